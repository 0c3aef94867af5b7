import { randomBytes } from "node:crypto"
import type { Config, Extension, RateLimiter } from "@keyway/authorization-server"
import { Grant, OAuthError } from "@keyway/core"
import { Effect, Option } from "effect"
import { z } from "zod"
import { consentPage, enterPage, finishedPage, lockedPage } from "./devicePages.js"
import * as UserCode from "./userCode.js"

/** The extension's identifier. */
export const ID = "io.keyway/device-authorization"
// The records: a device code's (by the device code, so it is stored hashed) names its user code; the user code's
// holds the authorization's state, which the page and the polling client both reach.
const DEVICE = `${ID}/device-codes`
const USER = `${ID}/user-codes`
const ENTRY_ADDRESS = `${ID}/entry-address`
const ENTRY_SESSION = `${ID}/entry-session`

// A whole number from `min` to `max`.
const seconds = (min: number, max: number) =>
  z
    .number({ error: "must be a number" })
    .int("must be a whole number")
    .min(min, `must be at least ${min}`)
    .max(max, `must be at most ${max}`)

/**
 * The options of {@link deviceAuthorization}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html#section-3.2 | RFC 8628 §3.2}
 */
export const optionsSchema = z.strictObject(
  {
    /** How long the device code and user code are valid (`expires_in`), in seconds; 600 by default. */
    lifetime: seconds(60, 3600).optional(),
    /** The least interval between two polls (`interval`), in seconds; 5 by default. */
    interval: seconds(1, 60).optional(),
    /** The path of the verification page below the issuer's; `/device` by default. */
    pagePath: z
      .string({ error: "must be a string" })
      .regex(/^\/[A-Za-z0-9._~-]+(\/[A-Za-z0-9._~-]+)*$/, "must be a path like /device")
      .optional(),
    /**
     * Wrong user codes allowed per client address and per browser session in `window` seconds before code entry is
     * locked (RFC 8628 §5.1); 10 in 600 seconds by default.
     */
    entryLimit: z
      .strictObject(
        { max: seconds(1, 1000), window: seconds(1, 86_400) },
        { error: "must be an object with max and window" },
      )
      .optional(),
  },
  { error: "must be an object" },
)

/**
 * The options of {@link deviceAuthorization}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html#section-3.2 | RFC 8628 §3.2}
 */
export type DeviceAuthorizationOptions = z.input<typeof optionsSchema>

/** The state of one device authorization, kept under its user code. */
interface State {
  readonly client_id: string
  readonly client_name: string
  readonly resource: string
  readonly scope: string
  /** `pending` until the user decides (RFC 8628 §3.3). */
  readonly status: "pending" | "approved" | "denied"
  readonly subject?: string
  readonly auth_time?: number
  /** The interval the client must keep now (grown by 5 s at each `slow_down`, §3.5). */
  readonly interval: number
  /** The last poll, in seconds since the epoch; 0 before the first. */
  readonly polled_at: number
  readonly expires_at: number
}

const pathBase = (config: Config.ResolvedConfig): string =>
  config.issuerUrl.pathname === "/" ? "" : config.issuerUrl.pathname.replace(/\/$/, "")
const urlOf = (config: Config.ResolvedConfig, path: string): string =>
  new URL(`${pathBase(config)}${path}`, config.issuerUrl).href

const fail = (error: OAuthError.ErrorCode, description: string) => Effect.fail(OAuthError.make(error, description))

/**
 * The device authorization grant for Keyway's authorization server: the device authorization endpoint
 * (`/device_authorization`), the verification page (`/device`), the `urn:ietf:params:oauth:grant-type:device_code`
 * grant at the token endpoint, and `device_authorization_endpoint` in the metadata. Clients need the grant type among
 * their `grant_types`. Its state lives in the server's record store, so every instance on one database serves it.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html | RFC 8628}
 */
export const deviceAuthorization = (
  options: DeviceAuthorizationOptions = {},
): Extension.AuthorizationServerExtension => {
  const parsed = optionsSchema.safeParse(options)
  if (!parsed.success) {
    const issue = parsed.error.issues[0]
    throw new Error(`deviceAuthorization: ${issue?.path.join(".") || "options"}: ${issue?.message ?? "invalid"}`)
  }
  const lifetime = parsed.data.lifetime ?? 600
  const interval = parsed.data.interval ?? 5
  const pagePath = parsed.data.pagePath ?? "/device"
  const entryRule: RateLimiter.WindowRule = parsed.data.entryLimit ?? { max: 10, window: 600 }
  const endpointPath = "/device_authorization"

  // RFC 8628 §3.1-3.2: the client's request, answered with both codes.
  const authorizationEndpoint: Extension.ExtensionEndpoint = {
    path: endpointPath,
    kind: "api",
    methods: ["POST"],
    handle: (context) =>
      Effect.gen(function* () {
        const client = yield* context.authenticateClient
        if (!client.grant_types.includes(Grant.DEVICE_CODE)) {
          return yield* fail("unauthorized_client", `this client may not use the ${Grant.DEVICE_CODE} grant`)
        }
        const form = context.form ?? new Map<string, string>()
        const sent = form.get("resource")
        const resource = yield* context.resource(sent === undefined ? [] : [sent])
        const scopes = yield* context.scopes(client, resource, form.get("scope"))
        const expiresAt = context.now + lifetime
        const state: State = {
          client_id: client.client_id,
          client_name: client.client_name ?? client.client_id,
          resource: resource.uri,
          scope: scopes.join(" "),
          status: "pending",
          interval,
          polled_at: 0,
          expires_at: expiresAt,
        }
        // The records outlive the codes by one lifetime, so a late poll is told `expired_token`, not `invalid_grant`.
        const keepUntil = expiresAt + lifetime
        let userCode: string | undefined
        // A live user code is never given twice; among 20^8 codes a clash is rare, a few draws end it.
        for (let attempt = 0; attempt < 5 && userCode === undefined; attempt++) {
          const drawn = UserCode.generate()
          if (yield* context.records.put(USER, drawn, state, keepUntil, context.now)) userCode = drawn
        }
        if (userCode === undefined) return yield* fail("temporarily_unavailable", "no user code is free; retry")
        const deviceCode = randomBytes(32).toString("base64url")
        yield* context.records.put(DEVICE, deviceCode, { user_code: userCode }, keepUntil, context.now)
        const verificationUri = urlOf(context.config, pagePath)
        const shown = UserCode.display(userCode)
        return Response.json(
          {
            device_code: deviceCode,
            user_code: shown,
            verification_uri: verificationUri,
            verification_uri_complete: `${verificationUri}?user_code=${shown}`,
            expires_in: lifetime,
            interval,
          },
          { headers: { "Cache-Control": "no-store", Pragma: "no-cache" } },
        )
      }),
  }

  // RFC 8628 §3.3: the user enters the code, signs in, and decides.
  const page: Extension.ExtensionEndpoint = {
    path: pagePath,
    kind: "page",
    methods: ["GET", "POST"],
    handle: (context) =>
      Effect.gen(function* () {
        const { pages, config } = context
        const action = urlOf(config, pagePath)
        const session = yield* pages.session
        const url = new URL(context.request.url)
        if (context.request.method === "GET") {
          const prefill = url.searchParams.get("user_code") ?? ""
          if (session?.subject === undefined) {
            return yield* pages.login({ action, carry: prefill, clientName: "your device" })
          }
          const csrf = yield* pages.csrf
          return enterPage(pages, { action, csrf: csrf.token, prefill, user: session.displayName ?? session.subject })
        }
        const form = context.form
        if (form === undefined || !(yield* pages.verify(form))) return pages.refused()
        if (form.has("username")) {
          const carry = form.get("request") ?? ""
          const returnTo = carry === "" ? action : `${action}?user_code=${encodeURIComponent(carry)}`
          return yield* pages.signIn({ form, action, clientName: "your device", returnTo })
        }
        if (session?.subject === undefined) return pages.refused()
        const user = session.displayName ?? session.subject
        const csrf = yield* pages.csrf
        const entered = form.get("user_code") ?? ""

        // Code entry is limited per address and per session (§5.1): a locked entry is refused before any lookup.
        const buckets = [
          ...(context.address === undefined ? [] : [{ kind: ENTRY_ADDRESS, key: context.address, rule: entryRule }]),
          { kind: ENTRY_SESSION, key: session.key, rule: entryRule },
        ]
        const locked = yield* context.limit(buckets.map((b) => ({ ...b, peek: true })))
        if (!locked.allowed) return lockedPage(pages, locked.retryAfter, pages.waitText(locked.retryAfter))
        const wrong = (message: string) =>
          Effect.gen(function* () {
            const counted = yield* context.limit(buckets)
            if (!counted.allowed) return lockedPage(pages, counted.retryAfter, pages.waitText(counted.retryAfter))
            return enterPage(pages, { action, csrf: csrf.token, prefill: entered, user, error: message })
          })

        const code = UserCode.normalize(entered)
        if (code === undefined) {
          return yield* wrong("That is not a code: it has 8 letters, like BCDF-GHJK. Check the code on your device.")
        }
        const found = yield* context.records.get(USER, code, context.now)
        if (Option.isNone(found) || (found.value.value as State).expires_at <= context.now) {
          return yield* wrong(
            "This code is not valid or has expired. Check the code on your device, or start again there.",
          )
        }
        const state = found.value.value as State
        if (state.status !== "pending") {
          return enterPage(pages, {
            action,
            csrf: csrf.token,
            prefill: "",
            user,
            error: "This code was already used. Start again on your device to get a new one.",
          })
        }
        const resource = config.resources.get(state.resource)
        const scopes = state.scope === "" ? [] : state.scope.split(" ")
        const decision = form.get("decision")
        if (decision === undefined) {
          return consentPage(pages, {
            action,
            csrf: csrf.token,
            userCode: UserCode.display(code),
            clientName: state.client_name,
            clientId: state.client_id,
            resourceName: resource?.name ?? state.resource,
            resourceUri: state.resource,
            scopes: scopes.map((name) => ({ name, description: resource?.scopes.get(name) ?? name })),
            user,
          })
        }
        const asked = { client_id: state.client_id, resource: state.resource, scope: state.scope }
        const approved = decision === "approve"
        const decided: State = approved
          ? { ...state, status: "approved", subject: session.subject, auth_time: session.authTime ?? context.now }
          : { ...state, status: "denied", subject: session.subject }
        if (!(yield* context.records.update(USER, code, found.value.version, decided, context.now))) {
          return enterPage(pages, {
            action,
            csrf: csrf.token,
            prefill: "",
            user,
            error: "This code was already used. Start again on your device to get a new one.",
          })
        }
        yield* context.emit({
          event: approved ? "consent_given" : "consent_denied",
          subject: session.subject,
          ...asked,
        })
        return finishedPage(pages, approved, state.client_name)
      }),
  }

  // RFC 8628 §3.4-3.5: the client polls with the device code.
  const grant: Extension.GrantHandler = {
    grantType: Grant.DEVICE_CODE,
    clientAuthentication: "required",
    // Command-line clients without a browser register themselves as any public client does.
    dynamicRegistration: true,
    handle: (context) =>
      Effect.gen(function* () {
        const deviceCode = context.form.get("device_code")
        if (deviceCode === undefined || deviceCode === "")
          return yield* fail("invalid_request", "device_code is missing")
        const client = context.client
        if (client === undefined) return yield* fail("invalid_client", "client authentication failed")
        const now = context.now
        // A concurrent poll or decision may change the state between the read and the write: read again.
        for (let attempt = 0; attempt < 3; attempt++) {
          const device = yield* context.records.get(DEVICE, deviceCode, now)
          if (Option.isNone(device)) return yield* fail("invalid_grant", "the device code is invalid")
          const userCode = (device.value.value as { readonly user_code: string }).user_code
          const found = yield* context.records.get(USER, userCode, now)
          if (Option.isNone(found)) return yield* fail("invalid_grant", "the device code is invalid")
          const state = found.value.value as State
          if (state.client_id !== client.client_id) {
            return yield* fail("invalid_grant", "the device code was issued to another client")
          }
          if (state.expires_at <= now) return yield* fail("expired_token", "the device code has expired")
          if (state.status === "denied") {
            yield* context.records.delete(DEVICE, deviceCode)
            return yield* fail("access_denied", "the user denied the request")
          }
          if (state.status === "approved" && state.subject !== undefined) {
            // Single use: of concurrent polls, the one that takes the device code issues.
            const taken = yield* context.records.take(DEVICE, deviceCode, now)
            if (Option.isNone(taken)) return yield* fail("invalid_grant", "the device code is invalid")
            yield* context.records.delete(USER, userCode)
            return yield* context.issueAuthorized({
              subject: state.subject,
              authTime: state.auth_time ?? now,
              resource: state.resource,
              scope: state.scope,
            })
          }
          const tooSoon = state.polled_at > 0 && now - state.polled_at < state.interval
          const next: State = { ...state, polled_at: now, interval: tooSoon ? state.interval + 5 : state.interval }
          if (!(yield* context.records.update(USER, userCode, found.value.version, next, now))) continue
          return yield* tooSoon
            ? fail("slow_down", `polling too fast: wait ${next.interval} seconds between requests`)
            : fail("authorization_pending", "the user has not yet approved the request")
        }
        return yield* fail("slow_down", "polling too fast: wait between requests")
      }),
  }

  return {
    id: ID,
    endpoints: [authorizationEndpoint, page],
    grants: [grant],
    metadata: (config) => ({
      device_authorization_endpoint: urlOf(config, endpointPath),
      grant_types_supported: [Grant.DEVICE_CODE],
    }),
  }
}
