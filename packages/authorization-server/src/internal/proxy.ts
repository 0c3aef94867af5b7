import { AuthorizationResponse, Pkce } from "@keyway/core"
import { Clock, Effect, Result } from "effect"
import type { ResolvedConfig } from "../Config.js"
import type { StorageError } from "../storage/Errors.js"
import { type ClientStore, GrantStore } from "../storage/Storage.js"
import { asked, check, issueCode, postedForm, redirect, reject, rejected, unverifiable } from "./authorize.js"
import { redirectWith, type ValidAuthorizationRequest } from "./authorizeRequest.js"
import type { MetadataDocuments } from "./clients.js"
import { nowSeconds } from "./clock.js"
import { randomToken, sha256 } from "./crypto.js"
import { emit } from "./events.js"
import { readCookie } from "./http.js"
import { consentPage, errorPage } from "./pages.js"
import { PENDING_SECONDS, type Pending, type ProxyState } from "./proxyCookies.js"
import { describeRedirect, isLocalhostOnly } from "./redirect.js"
import type { Sessions } from "./session.js"
import { UpstreamFailure } from "./upstreamClient.js"

/** The proxy's cookies and upstream client, built by the router. */
export { ProxyState } from "./proxyCookies.js"
export { UpstreamClient } from "./upstreamClient.js"

/** `rememberJti` namespace for spent callback states (single use across instances sharing the store). */
const STATE_NAMESPACE = "keyway:upstream-state"

/** The key a browser's remembered consents are stored under: the hash of its random consent cookie. */
const browserSubject = (hash: string) => `browser:${hash}`

const browserKey = (state: ProxyState, request: Request): string | undefined => {
  const value = readCookie(request, state.consentCookie)
  return value !== undefined && /^[A-Za-z0-9_-]{43}$/.test(value) ? value : undefined
}

/** Whether this browser approved this client for the resource and every scope, recently enough. */
const browserApproved = (state: ProxyState, browserHash: string, request: ValidAuthorizationRequest) =>
  Effect.gen(function* () {
    const grants = yield* GrantStore
    const consent = yield* grants.getConsent(browserSubject(browserHash), request.client.clientId, request.resource.uri)
    if (consent._tag === "None") return false
    if (consent.value.granted_at + state.upstream.options.consentSeconds <= (yield* nowSeconds)) return false
    const scopes = new Set(consent.value.scopes)
    return request.scopes.every((scope) => scopes.has(scope))
  })

/** An OAuth error sent back to the MCP client's (validated) redirect URI, with `iss` and `state`. */
const toClient = (
  config: ResolvedConfig,
  request: ValidAuthorizationRequest,
  error: string,
  description: string,
  status: 302 | 303,
  headers: Record<string, string> = {},
) =>
  redirect(
    redirectWith(request.redirectUri, {
      error,
      error_description: description,
      state: request.state,
      iss: config.issuer,
    }),
    status,
    headers,
  )

/** Consent given (now or before): remember the pending request in its cookie and send the browser upstream. */
const startUpstream = (
  config: ResolvedConfig,
  state: ProxyState,
  request: ValidAuthorizationRequest,
  query: string,
  mode: Pending["m"],
  browserHash: string,
  status: 302 | 303,
  cookies: ReadonlyArray<string> = [],
) =>
  Effect.gen(function* () {
    const upstream = state.upstream.options
    const metadata = yield* state.upstream.metadata.pipe(Effect.result)
    if (Result.isFailure(metadata)) {
      const description = "the upstream authorization server cannot be reached"
      yield* rejected(query, "temporarily_unavailable", description, "redirect")
      return toClient(config, request, "temporarily_unavailable", description, status)
    }
    const upstreamState = randomToken(32)
    const verifier = Pkce.generateVerifier()
    const challenge = yield* Effect.promise(() => Pkce.challengeS256(verifier))
    const nonce = upstream.subjectFrom === "id_token" ? randomToken(16) : undefined
    const target = new URL(metadata.success.authorization_endpoint)
    const params: Record<string, string | undefined> = {
      response_type: "code",
      client_id: upstream.clientId,
      redirect_uri: config.endpoints.upstreamCallback,
      code_challenge: challenge,
      code_challenge_method: "S256",
      state: upstreamState,
      scope: upstream.scope,
      resource: upstream.resource,
      nonce,
    }
    for (const [key, value] of Object.entries(params)) if (value !== undefined) target.searchParams.set(key, value)
    const pending: Pending = {
      s: upstreamState,
      v: verifier,
      ...(nonce === undefined ? {} : { n: nonce }),
      q: query,
      m: mode,
      b: browserHash,
      exp: (yield* nowSeconds) + PENDING_SECONDS,
    }
    const headers = new Headers({
      Location: target.href,
      "Cache-Control": "no-store",
      Pragma: "no-cache",
      "Referrer-Policy": "no-referrer",
    })
    // The state cookie is set only now, after consent (MCP security best practices, state validation).
    for (const cookie of [...cookies, state.sealPending(pending)]) headers.append("Set-Cookie", cookie)
    return new Response(null, { status, headers })
  })

const renderConsent = (
  config: ResolvedConfig,
  state: ProxyState,
  request: ValidAuthorizationRequest,
  query: string,
  headers: Record<string, string>,
  csrf: string,
) => {
  const { host } = describeRedirect(request.redirectUri)
  return consentPage({
    action: config.endpoints.consent,
    csrf,
    request: query,
    clientName: request.client.clientName ?? request.client.clientId,
    clientId: request.client.clientId,
    redirectHost: host,
    redirectUri: request.redirectUri,
    localhostOnly: isLocalhostOnly(request.redirectUri),
    unverifiable: unverifiable(config, request),
    ...(request.client.metadataDocument === undefined ? {} : { metadataDocument: request.client.metadataDocument }),
    resourceName: request.resource.name,
    resourceUri: request.resource.uri,
    scopes: request.scopes.map((name) => ({ name, description: request.resource.scopes.get(name) ?? name })),
    upstream: { name: state.upstream.options.name },
    headers,
  })
}

type Needs = ClientStore | GrantStore | MetadataDocuments

/**
 * GET authorization endpoint in proxy mode: validate exactly as without a proxy, then Keyway's own consent page for
 * this client, unless this browser already approved it; only then the redirect upstream.
 */
export const proxyAuthorizeGet = (
  config: ResolvedConfig,
  sessions: Sessions,
  state: ProxyState,
  request: Request,
): Effect.Effect<Response, StorageError, Needs> =>
  Effect.gen(function* () {
    const query = new URL(request.url).search.slice(1)
    const checked = yield* check(config, query)
    if (Result.isFailure(checked)) return yield* reject(config, query, checked.failure, 302)
    const valid = checked.success
    const key = browserKey(state, request)
    // As without a proxy: an unverifiable client is shown the consent page every time.
    if (key !== undefined && !unverifiable(config, valid) && (yield* browserApproved(state, sha256(key), valid))) {
      return yield* startUpstream(config, state, valid, query, "remembered", sha256(key), 302)
    }
    let session = yield* sessions.read(request)
    const headers: Record<string, string> = {}
    if (session === undefined) {
      session = yield* sessions.create()
      headers["Set-Cookie"] = sessions.cookie(session)
    }
    return renderConsent(config, state, valid, query, headers, sessions.csrfToken(session))
  })

/** POST of the proxy consent form: CSRF check, then Approve (remember for this browser, go upstream) or Deny. */
export const proxyConsentPost = (
  config: ResolvedConfig,
  sessions: Sessions,
  state: ProxyState,
  request: Request,
): Effect.Effect<Response, StorageError, Needs> =>
  Effect.gen(function* () {
    const posted = yield* postedForm(config, sessions, request, "consent")
    if (posted instanceof Response) return posted
    const { form, query, valid } = posted
    if (form.get("decision") !== "approve") {
      // The user is not known yet: they sign in upstream only after consenting.
      yield* emit({ event: "consent_denied", ...asked(valid) })
      return toClient(config, valid, "access_denied", "the user denied the request", 303)
    }
    const existing = browserKey(state, request)
    const key = existing ?? randomToken(32)
    const grants = yield* GrantStore
    yield* grants.grantConsent({
      subject: browserSubject(sha256(key)),
      client_id: valid.client.clientId,
      resource: valid.resource.uri,
      scopes: [...valid.scopes].sort(),
      granted_at: yield* nowSeconds,
    })
    return yield* startUpstream(config, state, valid, query, "fresh", sha256(key), 303, [state.consentSetCookie(key)])
  })

const callbackError = (description: string, clear: ReadonlyArray<string>) => {
  const response = errorPage(400, "invalid_request", description)
  for (const cookie of clear) response.headers.append("Set-Cookie", cookie)
  return response
}

/** Upstream errors as the MCP client sees them. */
const mapUpstreamError = (error: string): { readonly error: string; readonly description: string } => {
  if (["access_denied", "login_required", "consent_required", "interaction_required"].includes(error)) {
    return { error: "access_denied", description: `the upstream authorization server answered ${error}` }
  }
  if (error === "temporarily_unavailable") {
    return { error, description: "the upstream authorization server is temporarily unavailable" }
  }
  return { error: "server_error", description: `the upstream authorization server answered ${error}` }
}

/**
 * The upstream's redirect back (`<issuer>/upstream/callback`): the state must match the cookie of a sign-in this
 * browser started after consent (single use, short-lived), `iss` must name the upstream (RFC 9207), the code is
 * redeemed upstream, the user identified, and Keyway's own code goes to the MCP client.
 */
export const upstreamCallback = (
  config: ResolvedConfig,
  state: ProxyState,
  request: Request,
): Effect.Effect<Response, StorageError, Needs> =>
  Effect.gen(function* () {
    const response = new URL(request.url)
    const stated = AuthorizationResponse.state(response)
    if (Result.isFailure(stated)) {
      return callbackError("the sign-in response has no state; start again from your application", [])
    }
    const upstreamState = stated.success
    const clear = [state.clearPending(upstreamState)]
    const pending = state.openPending(request, upstreamState)
    if (pending === undefined) {
      return callbackError(
        "the sign-in response does not belong to a sign-in started in this browser (unknown or mismatched state); start again from your application",
        clear,
      )
    }
    if (pending.exp <= (yield* nowSeconds)) {
      return callbackError("the sign-in took too long; start again from your application", clear)
    }
    const grants = yield* GrantStore
    const fresh = yield* grants.rememberJti(STATE_NAMESPACE, sha256(upstreamState), pending.exp)
    if (!fresh) return callbackError("this sign-in response was already used; start again from your application", clear)
    const checked = yield* check(config, pending.q)
    if (Result.isFailure(checked)) {
      const response = yield* reject(config, pending.q, checked.failure, 302)
      for (const cookie of clear) response.headers.append("Set-Cookie", cookie)
      return response
    }
    const valid = checked.success
    const fail = (error: string, description: string) =>
      Effect.as(
        rejected(pending.q, error, description, "redirect"),
        toClient(config, valid, error, description, 302, { "Set-Cookie": clear[0]! }),
      )

    const metadata = yield* state.upstream.metadata.pipe(Effect.result)
    if (Result.isFailure(metadata)) {
      return yield* fail("temporarily_unavailable", "the upstream authorization server cannot be reached")
    }
    // The state already matched the sign-in's cookie; core checks it again with iss, the error and the code.
    const processed = AuthorizationResponse.process(response, {
      state: upstreamState,
      issuer: state.upstream.options.issuer,
      issParameterSupported: metadata.success.authorization_response_iss_parameter_supported === true,
    })
    if (Result.isFailure(processed)) {
      const problem = processed.failure
      switch (problem.reason) {
        case "iss-missing":
        case "iss-mismatch":
          return yield* fail(
            "server_error",
            "the sign-in response did not come from the configured upstream (iss mismatch, RFC 9207)",
          )
        case "error-response": {
          const mapped = mapUpstreamError(problem.error ?? "")
          return yield* fail(mapped.error, mapped.description)
        }
        case "code-missing":
          return yield* fail("server_error", "the upstream sign-in response has no code")
        default:
          return yield* fail("server_error", `the upstream sign-in response cannot be used: ${problem.message}`)
      }
    }
    const { code } = processed.success
    const nowMillis = yield* Clock.currentTimeMillis
    const identity = yield* Effect.tryPromise({
      try: async () => {
        const tokens = await state.upstream.exchange(
          metadata.success,
          code,
          pending.v,
          config.endpoints.upstreamCallback,
        )
        // The upstream tokens are used here to learn who signed in, then dropped: never stored, never forwarded.
        return state.upstream.identify(metadata.success, tokens, pending.n, nowMillis)
      },
      catch: (e) => (e instanceof UpstreamFailure ? e.message : "the upstream sign-in could not be completed"),
    }).pipe(Effect.result)
    if (Result.isFailure(identity)) return yield* fail("server_error", identity.failure)
    const { subject } = identity.success
    const authTime = identity.success.authTime ?? Math.floor(nowMillis / 1000)
    if (pending.m === "remembered") {
      // This browser approved the client before, but maybe for another user, or the user withdrew consent since:
      // forget the browser's approval and ask again.
      const covered = yield* grants.consentCovers(subject, valid.client.clientId, valid.resource.uri, valid.scopes)
      if (!covered) {
        yield* grants.revokeConsent(browserSubject(pending.b), valid.client.clientId)
        return redirect(`${config.endpoints.authorization}?${pending.q}`, 302, { "Set-Cookie": clear[0]! })
      }
    } else {
      yield* grants.grantConsent({
        subject,
        client_id: valid.client.clientId,
        resource: valid.resource.uri,
        scopes: [...valid.scopes].sort(),
        granted_at: yield* nowSeconds,
      })
      yield* emit({ event: "consent_given", subject, ...asked(valid) })
    }
    const consent = pending.m === "remembered" ? "remembered" : "given"
    return yield* issueCode(config, valid, subject, authTime, consent, 302, { "Set-Cookie": clear[0]! })
  })
