import { OAuthError } from "@keyway/core"
import { Effect, Option } from "effect"
import type { AuthorizationServerExtension } from "../../src/Extension.js"

const NS = "example/records/authorizations"

/**
 * A made-up extension through the endpoint, page, record and issuance seams: a client asks `/example/authorizations`
 * for a handle (an API endpoint), a signed-in user approves it on `/example/approve` (a page), and the client
 * redeems the handle with the grant `urn:example:handle`, once.
 */
export const recordExtension: AuthorizationServerExtension = {
  id: "example/records",
  endpoints: [
    {
      path: "/example/authorizations",
      kind: "api",
      methods: ["POST"],
      handle: (context) =>
        Effect.gen(function* () {
          const client = yield* context.authenticateClient
          const form = context.form ?? new Map<string, string>()
          const resource = yield* context.resource(form.has("resource") ? [form.get("resource") ?? ""] : [])
          const scopes = yield* context.scopes(client, resource, form.get("scope"))
          const handle = form.get("handle") ?? ""
          const stored = yield* context.records.put(
            NS,
            handle,
            { client_id: client.client_id, resource: resource.uri, scope: scopes.join(" ") },
            context.now + 60,
            context.now,
          )
          if (!stored) return yield* Effect.fail(OAuthError.make("invalid_request", "handle is taken"))
          return Response.json({ client_id: client.client_id, resource: resource.uri, scopes })
        }),
    },
    {
      path: "/example/approve",
      kind: "page",
      methods: ["GET", "POST"],
      handle: (context) =>
        Effect.gen(function* () {
          const { pages } = context
          const action = `${context.config.issuer}/example/approve`
          const session = yield* pages.session
          if (context.request.method === "GET") {
            if (session?.subject === undefined)
              return yield* pages.login({ action, carry: "-carried", clientName: "Example" })
            const csrf = yield* pages.csrf
            return pages.render(
              "Approve",
              pages.html`<h1>Approve <span data-user>${session.displayName ?? ""}</span></h1><form method="post"><input type="hidden" name="csrf_token" value="${csrf.token}"><input name="handle"></form><p data-script>${"<script>"}</p>`,
              { headers: csrf.headers },
            )
          }
          if (!(yield* pages.verify(context.form))) return pages.refused()
          const form = context.form ?? new Map<string, string>()
          if (form.has("username")) {
            return yield* pages.signIn({ form, action, clientName: "Example", returnTo: action })
          }
          if (session?.subject === undefined) return pages.error(401, "login_required", "sign in first")
          const handle = form.get("handle") ?? ""
          const found = yield* context.records.get(NS, handle, context.now)
          if (Option.isNone(found)) return pages.error(400, "invalid_request", "unknown handle")
          const value = found.value.value as Record<string, string>
          const updated = yield* context.records.update(
            NS,
            handle,
            found.value.version,
            { ...value, subject: session.subject, auth_time: session.authTime ?? context.now },
            context.now,
          )
          return pages.render("Done", pages.html`<h1 data-done>${updated ? "approved" : "changed meanwhile"}</h1>`)
        }),
    },
  ],
  grants: [
    {
      grantType: "urn:example:handle",
      clientAuthentication: "required",
      handle: (context) =>
        Effect.gen(function* () {
          const taken = yield* context.records.take(NS, context.form.get("handle") ?? "", context.now)
          if (Option.isNone(taken)) return yield* Effect.fail(OAuthError.make("invalid_grant", "unknown handle"))
          const value = taken.value.value as Record<string, unknown>
          if (typeof value.subject !== "string" || value.client_id !== context.client?.client_id) {
            return yield* Effect.fail(OAuthError.make("invalid_grant", "not approved"))
          }
          return yield* context.issueAuthorized({
            subject: value.subject,
            authTime: value.auth_time as number,
            resource: value.resource as string,
            scope: value.scope as string,
          })
        }),
    },
  ],
}
