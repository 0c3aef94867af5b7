import { OAuthError } from "@keyway/core"
import { expectOAuthError } from "@keyway/testing/oauth"
import { Effect } from "effect"
import { decodeJwt } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import type { AuthorizationServerExtension, GrantHandler } from "../src/Extension.js"
import { refusedByBothFaces } from "./support/refused.js"
import { basic, MCP, SECRET, startServer, type TestServer, tokenRequest } from "./support/server.js"

const TICKET = "urn:example:ticket"
const STAMP = "urn:example:stamp"

/** A grant that only refuses, saying which handler took the request. */
const refusing = (grantType: string, name: string, accepts?: GrantHandler["accepts"]): GrantHandler => ({
  grantType,
  clientAuthentication: "required",
  ...(accepts === undefined ? {} : { accepts }),
  handle: () => Effect.fail(OAuthError.make("invalid_grant", `handled by ${name}`)),
})

/** Two extensions sharing a grant type (each `accepts` its requests), one with a second grant of its own. */
const tickets: AuthorizationServerExtension = {
  id: "example.com/tickets",
  grants: [
    {
      grantType: TICKET,
      clientAuthentication: "required",
      accepts: (form) => form.has("ticket"),
      handle: (context) =>
        context.issue({
          subject: context.form.get("ticket") ?? "",
          clientId: context.client?.client_id ?? "",
          resource: MCP,
          scope: "tools:read",
        }),
    },
  ],
}
const vouchers: AuthorizationServerExtension = {
  id: "example.com/vouchers",
  grants: [refusing(TICKET, "the voucher grant", (form) => form.has("voucher")), refusing(STAMP, "the stamp grant")],
}

describe("the grant registry", () => {
  let server: TestServer
  beforeAll(async () => {
    server = await startServer({
      extensions: [tickets, vouchers],
      clients: [
        {
          clientId: "grant-app",
          redirectUris: ["https://grant.example.com/cb"],
          clientSecret: SECRET,
          tokenEndpointAuthMethod: "client_secret_basic",
          grantTypes: ["authorization_code", "refresh_token", TICKET, STAMP],
        },
        {
          clientId: "code-app",
          redirectUris: ["https://code.example.com/cb"],
          clientSecret: SECRET,
          tokenEndpointAuthMethod: "client_secret_basic",
        },
      ],
    })
  })
  afterAll(() => server.close())

  const asGrantApp = (body: Record<string, string>) =>
    tokenRequest(server, body, { authorization: basic("grant-app", SECRET) })

  it("lists the built-in grants, then each extension grant type once, in grant_types_supported", async () => {
    const metadata = (await (await fetch(`${server.issuer}/.well-known/oauth-authorization-server`)).json()) as {
      grant_types_supported: ReadonlyArray<string>
    }
    expect(metadata.grant_types_supported).toEqual(["authorization_code", "refresh_token", TICKET, STAMP])
  })

  it("dispatches every listed grant type through the one registry: built-in and extension handlers alike", async () => {
    await expectOAuthError(
      await asGrantApp({ grant_type: "authorization_code" }),
      400,
      "invalid_request",
      "code is missing",
    )
    await expectOAuthError(
      await asGrantApp({ grant_type: "refresh_token" }),
      400,
      "invalid_request",
      "refresh_token is missing",
    )
    const issued = await asGrantApp({ grant_type: TICKET, ticket: "t-1" })
    expect(issued.status).toBe(200)
    const token = (await issued.json()) as { access_token: string }
    expect(decodeJwt(token.access_token)).toMatchObject({ sub: "t-1", client_id: "grant-app", aud: MCP })
    await expectOAuthError(
      await asGrantApp({ grant_type: TICKET, voucher: "v-1" }),
      400,
      "invalid_grant",
      "handled by the voucher grant",
    )
    await expectOAuthError(await asGrantApp({ grant_type: STAMP }), 400, "invalid_grant", "handled by the stamp grant")
    await expectOAuthError(
      await asGrantApp({ grant_type: TICKET }),
      400,
      "unsupported_grant_type",
      `grant_type ${TICKET} is not supported`,
    )
    await expectOAuthError(
      await asGrantApp({ grant_type: "password" }),
      400,
      "unsupported_grant_type",
      "grant_type password is not supported",
    )
  })

  it("refuses, before the handler, a client without the grant type among its grant_types", async () => {
    await expectOAuthError(
      await tokenRequest(server, { grant_type: STAMP }, { authorization: basic("code-app", SECRET) }),
      400,
      "unauthorized_client",
      `this client may not use the ${STAMP} grant`,
    )
  })
})

describe("an extension grant with a built-in grant type", () => {
  const shadow: AuthorizationServerExtension = {
    id: "example.com/shadow",
    grants: [refusing("refresh_token", "the shadow grant")],
  }
  const options = {
    issuer: "https://as.example.com",
    resources: [{ uri: MCP, scopes: { read: "Read" } }],
    extensions: [shadow],
  }
  const message =
    "example.com/shadow: the grant type refresh_token is the server's own; an extension cannot register it"

  it("is refused at start-up by both faces, with the same ConfigError naming the grant type", async () => {
    expect(await refusedByBothFaces(options)).toBe(message)
  })
})
