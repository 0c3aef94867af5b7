import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto"
import { ClientAuth, Pkce, WellKnown } from "@keyway/core"
import { Effect, Result, Schema } from "effect"
import { createRemoteJWKSet, type JWTPayload, jwtVerify } from "jose"
import type { ResolvedConfig } from "../Config.js"
import type { ResolvedUpstream, UpstreamIdentity, UpstreamTokenResponse } from "../proxy/Upstream.js"
import type { StorageError } from "../storage/Errors.js"
import { type ClientStore, GrantStore } from "../storage/Storage.js"
import { check, errorFor, issueCode, postedForm, redirect } from "./authorize.js"
import { redirectWith, type ValidAuthorizationRequest } from "./authorizeRequest.js"
import type { MetadataDocuments } from "./clients.js"
import { randomToken, safeEqual, sha256 } from "./crypto.js"
import { readCookie } from "./http.js"
import { consentPage, errorPage } from "./pages.js"
import { describeRedirect, isLocalhostOnly } from "./redirect.js"
import type { Sessions } from "./session.js"

const now = () => Math.floor(Date.now() / 1000)

/** A pending upstream sign-in lives this long (the MCP security best practices suggest about 10 minutes). */
const PENDING_SECONDS = 600
/** `rememberJti` namespace for spent callback states (single use across instances sharing the store). */
const STATE_NAMESPACE = "keyway:upstream-state"

/** The upstream metadata fields the proxy uses. */
interface UpstreamMetadata {
  readonly issuer: string
  readonly authorization_endpoint: string
  readonly token_endpoint: string
  readonly jwks_uri?: string
  readonly authorization_response_iss_parameter_supported?: boolean
}

/** The upstream sign-in in flight, kept in an encrypted, HttpOnly cookie bound to its `state`. */
interface Pending {
  /** The upstream `state`. */
  readonly s: string
  /** Our PKCE verifier at the upstream. */
  readonly v: string
  /** OpenID Connect nonce, for `id_token` subjects. */
  readonly n?: string
  /** The MCP client's authorization request (query string), validated again at the callback. */
  readonly q: string
  /** Whether consent was given just now, or remembered for this browser (then its hashed key, to withdraw it). */
  readonly m: "fresh" | "remembered"
  readonly b: string
  readonly exp: number
}

/** What went wrong talking to the upstream (its words are shown in `error_description`). */
/** The upstream sign-in failed; `message` says at which step and why (shown to the user in the error redirect). */
class UpstreamFailure extends Schema.TaggedError<UpstreamFailure>()("UpstreamFailure", { message: Schema.String }) {}

const timeout = (upstream: ResolvedUpstream) => AbortSignal.timeout(upstream.timeoutMs)

const string = (value: unknown): value is string => typeof value === "string" && value !== ""

/**
 * The upstream as a client sees it: discovered metadata (issuer validated), its JWK Set, the token request and the
 * identity checks. The upstream is a configured, trusted peer, so plain `fetch` with a time cap is used here, not the
 * SSRF guard meant for URLs that clients name.
 */
export class UpstreamClient {
  private metadataCache: { readonly value: UpstreamMetadata; readonly until: number } | undefined
  private keys: { readonly uri: string; readonly set: ReturnType<typeof createRemoteJWKSet> } | undefined

  constructor(readonly options: ResolvedUpstream) {}

  /** RFC 8414 §3, then OpenID Connect Discovery, in the MCP order; the `issuer` must be the configured one (§3.3). */
  async metadata(): Promise<UpstreamMetadata> {
    const cached = this.metadataCache
    if (cached !== undefined && cached.until > now()) return cached.value
    const problems: Array<string> = []
    for (const { url } of WellKnown.authorizationServerMetadataUrls(this.options.issuer)) {
      let response: Response
      try {
        response = await fetch(url, {
          headers: { accept: "application/json" },
          redirect: "error",
          signal: timeout(this.options),
        })
      } catch (e) {
        problems.push(`${url}: ${(e as Error).message}`)
        continue
      }
      if (response.status !== 200) {
        await response.body?.cancel()
        problems.push(`${url}: HTTP ${response.status}`)
        continue
      }
      const body = (await response.json().catch(() => undefined)) as Record<string, unknown> | undefined
      if (typeof body !== "object" || body === null)
        throw new UpstreamFailure({ message: `${url} did not send a JSON object` })
      if (body.issuer !== this.options.issuer) {
        throw new UpstreamFailure({
          message: `${url} names the issuer ${String(body.issuer)}, expected ${this.options.issuer}`,
        })
      }
      if (!string(body.authorization_endpoint) || !string(body.token_endpoint)) {
        throw new UpstreamFailure({ message: `${url} lacks authorization_endpoint or token_endpoint` })
      }
      const methods = body.code_challenge_methods_supported
      if (!Array.isArray(methods) || !methods.includes("S256")) {
        throw new UpstreamFailure({
          message: `${this.options.issuer} does not advertise PKCE S256 (code_challenge_methods_supported)`,
        })
      }
      const value: UpstreamMetadata = {
        issuer: body.issuer,
        authorization_endpoint: body.authorization_endpoint,
        token_endpoint: body.token_endpoint,
        ...(string(body.jwks_uri) ? { jwks_uri: body.jwks_uri } : {}),
        ...(body.authorization_response_iss_parameter_supported === true
          ? { authorization_response_iss_parameter_supported: true }
          : {}),
      }
      this.metadataCache = { value, until: now() + 3600 }
      return value
    }
    throw new UpstreamFailure({ message: `no metadata found for ${this.options.issuer} (${problems.join("; ")})` })
  }

  /** The code for tokens (OAuth 2.1 §4.1.3), with our PKCE verifier and, if configured, the resource. */
  async exchange(metadata: UpstreamMetadata, code: string, verifier: string, redirectUri: string) {
    const body = new URLSearchParams({
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: redirectUri,
    })
    if (this.options.resource !== undefined) body.set("resource", this.options.resource)
    const headers: Record<string, string> = {
      "content-type": "application/x-www-form-urlencoded",
      accept: "application/json",
    }
    if (this.options.clientSecret === undefined) body.set("client_id", this.options.clientId)
    else {
      headers.authorization = ClientAuth.encodeClientSecretBasic(this.options.clientId, this.options.clientSecret)
    }
    let response: Response
    try {
      response = await fetch(metadata.token_endpoint, {
        method: "POST",
        headers,
        body,
        redirect: "error",
        signal: timeout(this.options),
      })
    } catch (e) {
      throw new UpstreamFailure({ message: `the upstream token request failed: ${(e as Error).message}` })
    }
    const json = (await response.json().catch(() => undefined)) as Record<string, unknown> | undefined
    if (response.status !== 200 || typeof json !== "object" || json === null) {
      const code = typeof json?.error === "string" ? ` (${json.error})` : ""
      throw new UpstreamFailure({ message: `the upstream token endpoint answered HTTP ${response.status}${code}` })
    }
    if (!string(json.access_token) || typeof json.token_type !== "string") {
      throw new UpstreamFailure({ message: "the upstream token response lacks access_token or token_type" })
    }
    return json as UpstreamTokenResponse
  }

  private jwks(metadata: UpstreamMetadata) {
    if (metadata.jwks_uri === undefined)
      throw new UpstreamFailure({ message: `${this.options.issuer} publishes no jwks_uri` })
    if (this.keys?.uri !== metadata.jwks_uri) {
      this.keys = {
        uri: metadata.jwks_uri,
        set: createRemoteJWKSet(new URL(metadata.jwks_uri), { timeoutDuration: this.options.timeoutMs }),
      }
    }
    return this.keys.set
  }

  /** Who signed in: from the ID token, the JWT access token, or the configured function. */
  async identify(metadata: UpstreamMetadata, tokens: UpstreamTokenResponse, nonce: string | undefined) {
    const source = this.options.subjectFrom
    if (typeof source === "function") {
      const identity = await source(tokens)
      if (identity === undefined || !string(identity.subject)) {
        throw new UpstreamFailure({ message: "the identity function refused the upstream sign-in" })
      }
      return identity
    }
    let payload: JWTPayload
    if (source === "id_token") {
      if (!string(tokens.id_token))
        throw new UpstreamFailure({ message: "the upstream token response has no id_token" })
      payload = await this.verify(metadata, tokens.id_token, this.options.clientId, "ID token")
      if (nonce === undefined || payload.nonce !== nonce)
        throw new UpstreamFailure({ message: "the upstream ID token nonce does not match" })
    } else {
      payload = await this.verify(metadata, tokens.access_token, this.options.resource ?? "", "access token")
    }
    if (!string(payload.sub)) throw new UpstreamFailure({ message: "the upstream token has no sub" })
    const authTime = typeof payload.auth_time === "number" ? payload.auth_time : undefined
    return { subject: payload.sub, ...(authTime === undefined ? {} : { authTime }) } satisfies UpstreamIdentity
  }

  private async verify(metadata: UpstreamMetadata, token: string, audience: string, what: string) {
    try {
      const { payload } = await jwtVerify(token, this.jwks(metadata), {
        issuer: this.options.issuer,
        audience,
        requiredClaims: ["exp", "sub"],
        clockTolerance: 5,
      })
      return payload
    } catch (e) {
      if (e instanceof UpstreamFailure) throw e
      throw new UpstreamFailure({ message: `the upstream ${what} was rejected: ${(e as Error).message}` })
    }
  }
}

/**
 * The proxy's cookies and the key sealing the pending sign-in. Without `sessionSecret` the key lives in memory (a
 * restart only abandons sign-ins in flight); with it, every instance derives the same key.
 */
export class ProxyState {
  private readonly key: Uint8Array
  readonly consentCookie: string
  private readonly pendingPrefix: string

  constructor(
    readonly secure: boolean,
    readonly upstream: UpstreamClient,
    secret?: string,
  ) {
    this.key =
      secret === undefined ? randomBytes(32) : createHash("sha256").update(`keyway.upstream-pending.${secret}`).digest()
    // __Host-: this origin only, path /, https only (MCP security best practices, consent cookie security).
    this.consentCookie = secure ? "__Host-keyway_consent" : "keyway_consent"
    this.pendingPrefix = secure ? "__Host-keyway_upstream_" : "keyway_upstream_"
  }

  private attributes(maxAge: number) {
    return `Path=/; HttpOnly; SameSite=Lax; Max-Age=${maxAge}${this.secure ? "; Secure" : ""}`
  }

  /** One cookie per sign-in in flight, named after its state, so parallel sign-ins in one browser do not collide. */
  pendingName(state: string) {
    return `${this.pendingPrefix}${sha256(`pending.${state}`).slice(0, 16)}`
  }

  sealPending(pending: Pending): string {
    const iv = randomBytes(12)
    const cipher = createCipheriv("aes-256-gcm", this.key, iv)
    cipher.setAAD(Buffer.from(this.pendingName(pending.s)))
    const body = Buffer.concat([cipher.update(JSON.stringify(pending), "utf8"), cipher.final()])
    const value = Buffer.concat([iv, body, cipher.getAuthTag()]).toString("base64url")
    return `${this.pendingName(pending.s)}=${value}; ${this.attributes(PENDING_SECONDS)}`
  }

  openPending(request: Request, state: string): Pending | undefined {
    const name = this.pendingName(state)
    const raw = readCookie(request, name)
    if (raw === undefined) return undefined
    try {
      const bytes = Buffer.from(raw, "base64url")
      const decipher = createDecipheriv("aes-256-gcm", this.key, bytes.subarray(0, 12))
      decipher.setAAD(Buffer.from(name))
      decipher.setAuthTag(bytes.subarray(bytes.length - 16))
      const text = Buffer.concat([decipher.update(bytes.subarray(12, bytes.length - 16)), decipher.final()])
      const pending = JSON.parse(text.toString("utf8")) as Pending
      return safeEqual(pending.s, state) ? pending : undefined
    } catch {
      return undefined
    }
  }

  clearPending(state: string): string {
    return `${this.pendingName(state)}=; ${this.attributes(0)}`
  }

  consentSetCookie(value: string): string {
    return `${this.consentCookie}=${value}; ${this.attributes(this.upstream.options.consentSeconds)}`
  }
}

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
    if (consent.value.granted_at + state.upstream.options.consentSeconds <= now()) return false
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
    const metadata = yield* Effect.tryPromise(() => state.upstream.metadata()).pipe(Effect.result)
    if (Result.isFailure(metadata)) {
      return toClient(
        config,
        request,
        "temporarily_unavailable",
        "the upstream authorization server cannot be reached",
        status,
      )
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
      exp: now() + PENDING_SECONDS,
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
    if (Result.isFailure(checked)) return errorFor(config, checked.failure, 302)
    const valid = checked.success
    const key = browserKey(state, request)
    if (key !== undefined && (yield* browserApproved(state, sha256(key), valid))) {
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
    const posted = yield* postedForm(config, sessions, request)
    if (posted instanceof Response) return posted
    const { form, query, valid } = posted
    if (form.get("decision") !== "approve") {
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
      granted_at: now(),
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
    const params = new URL(request.url).searchParams
    const upstreamState = params.get("state")
    if (upstreamState === null || upstreamState === "" || params.getAll("state").length > 1) {
      return callbackError("the sign-in response has no state; start again from your application", [])
    }
    const clear = [state.clearPending(upstreamState)]
    const pending = state.openPending(request, upstreamState)
    if (pending === undefined) {
      return callbackError(
        "the sign-in response does not belong to a sign-in started in this browser (unknown or mismatched state); start again from your application",
        clear,
      )
    }
    if (pending.exp <= now()) {
      return callbackError("the sign-in took too long; start again from your application", clear)
    }
    const grants = yield* GrantStore
    const fresh = yield* grants.rememberJti(STATE_NAMESPACE, sha256(upstreamState), pending.exp)
    if (!fresh) return callbackError("this sign-in response was already used; start again from your application", clear)
    const checked = yield* check(config, pending.q)
    if (Result.isFailure(checked)) {
      const response = errorFor(config, checked.failure, 302)
      for (const cookie of clear) response.headers.append("Set-Cookie", cookie)
      return response
    }
    const valid = checked.success
    const fail = (error: string, description: string) =>
      toClient(config, valid, error, description, 302, { "Set-Cookie": clear[0]! })

    const metadata = yield* Effect.tryPromise(() => state.upstream.metadata()).pipe(Effect.result)
    if (Result.isFailure(metadata)) {
      return fail("temporarily_unavailable", "the upstream authorization server cannot be reached")
    }
    const iss = params.get("iss")
    if (
      iss !== null
        ? iss !== state.upstream.options.issuer
        : metadata.success.authorization_response_iss_parameter_supported === true
    ) {
      return fail(
        "server_error",
        "the sign-in response did not come from the configured upstream (iss mismatch, RFC 9207)",
      )
    }
    const error = params.get("error")
    if (error !== null) {
      const mapped = mapUpstreamError(error)
      return fail(mapped.error, mapped.description)
    }
    const code = params.get("code")
    if (code === null || code === "") return fail("server_error", "the upstream sign-in response has no code")
    const identity = yield* Effect.tryPromise({
      try: async () => {
        const tokens = await state.upstream.exchange(
          metadata.success,
          code,
          pending.v,
          config.endpoints.upstreamCallback,
        )
        // The upstream tokens are used here to learn who signed in, then dropped: never stored, never forwarded.
        return state.upstream.identify(metadata.success, tokens, pending.n)
      },
      catch: (e) => (e instanceof UpstreamFailure ? e.message : "the upstream sign-in could not be completed"),
    }).pipe(Effect.result)
    if (Result.isFailure(identity)) return fail("server_error", identity.failure)
    const { subject } = identity.success
    const authTime = identity.success.authTime ?? now()
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
        granted_at: now(),
      })
    }
    return yield* issueCode(config, valid, subject, authTime, 302, { "Set-Cookie": clear[0]! })
  })
