import { ClientAuth, Metadata, TokenResponse, WellKnown, type Wire } from "@keyway/core"
import { Cache, Duration, Effect, Exit, Result, Schema } from "effect"
import { createRemoteJWKSet, type JWTPayload, jwtVerify } from "jose"
import type { ResolvedUpstream, UpstreamIdentity, UpstreamTokenResponse } from "../proxy/UpstreamProvider.js"

/** How long discovered upstream metadata is reused before it is fetched again. */
const METADATA_TTL = Duration.hours(1)

/** The upstream sign-in failed; `message` says at which step and why (shown to the user in the error redirect). */
export class UpstreamFailure extends Schema.TaggedError<UpstreamFailure>()("UpstreamFailure", {
  message: Schema.String,
}) {}

/** Upstream metadata after discovery: core has checked that the code-flow endpoints are present. */
export type UpstreamMetadata = Wire.AuthorizationServerMetadata & {
  readonly authorization_endpoint: string
  readonly token_endpoint: string
}

const timeout = (upstream: ResolvedUpstream) => AbortSignal.timeout(upstream.timeoutMs)

const string = (value: unknown): value is string => typeof value === "string" && value !== ""

/** One metadata location's answer: a parsed body, or why the next location should be tried. */
type Fetched = { readonly _tag: "body"; readonly json: unknown } | { readonly _tag: "skip"; readonly problem: string }

const NOT_JSON = Symbol("not JSON")

const fetchMetadata = (upstream: ResolvedUpstream, url: string): Effect.Effect<Fetched> =>
  Effect.promise(async (): Promise<Fetched> => {
    let response: Response
    try {
      response = await fetch(url, {
        headers: { accept: "application/json" },
        redirect: "error",
        signal: timeout(upstream),
      })
    } catch (e) {
      return { _tag: "skip", problem: `${url}: ${(e as Error).message}` }
    }
    if (response.status !== 200) {
      await response.body?.cancel()
      return { _tag: "skip", problem: `${url}: HTTP ${response.status}` }
    }
    return { _tag: "body", json: await response.json().catch(() => NOT_JSON) }
  })

/**
 * RFC 8414 §3, then OpenID Connect Discovery, in the MCP order: the first location that answers 200 decides, and its
 * document must pass core's checks (the configured `issuer` exactly, PKCE S256, the code-flow endpoints).
 */
const discover = (upstream: ResolvedUpstream): Effect.Effect<UpstreamMetadata, UpstreamFailure> =>
  Effect.gen(function* () {
    const problems: Array<string> = []
    for (const { url } of WellKnown.authorizationServerMetadataUrls(upstream.issuer)) {
      const fetched = yield* fetchMetadata(upstream, url)
      if (fetched._tag === "skip") {
        problems.push(fetched.problem)
        continue
      }
      if (fetched.json === NOT_JSON) {
        return yield* new UpstreamFailure({ message: `the authorization server metadata at ${url} is not JSON` })
      }
      const processed = Metadata.processAuthorizationServerMetadata(upstream.issuer, url, fetched.json)
      if (Result.isFailure(processed)) return yield* new UpstreamFailure({ message: processed.failure.message })
      // Core refused a document without the code-flow endpoints, which it checks by default.
      return processed.success as UpstreamMetadata
    }
    return yield* new UpstreamFailure({ message: `no metadata found for ${upstream.issuer} (${problems.join("; ")})` })
  })

/**
 * The upstream as a client sees it: discovered metadata (issuer validated), its JWK Set, the token request and the
 * identity checks. The upstream is a configured, trusted peer, so plain `fetch` with a time cap is used here, not the
 * SSRF guard meant for URLs that clients name.
 */
export class UpstreamClient {
  /** Discovery per issuer: one fetch at a time, reused for an hour; a failure is not kept, so the next request retries. */
  private readonly metadataCache: Cache.Cache<string, UpstreamMetadata, UpstreamFailure>
  private keys: { readonly uri: string; readonly set: ReturnType<typeof createRemoteJWKSet> } | undefined

  constructor(readonly options: ResolvedUpstream) {
    // Building the cache needs no service, so it runs here and the client stays a plain value for the router.
    this.metadataCache = Effect.runSync(
      Cache.makeWith((_issuer: string) => discover(options), {
        capacity: 1,
        timeToLive: (exit) => (Exit.isSuccess(exit) ? METADATA_TTL : Duration.zero),
      }),
    )
  }

  /** The upstream's metadata, validated (RFC 8414 §3.3) and cached; expiry reads Effect's `Clock`. */
  get metadata(): Effect.Effect<UpstreamMetadata, UpstreamFailure> {
    return Cache.get(this.metadataCache, this.options.issuer)
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
    const { clientId, clientSecret } = this.options
    const auth =
      clientSecret === undefined
        ? ClientAuth.apply("none", { clientId })
        : ClientAuth.apply("client_secret_basic", { clientId, clientSecret })
    for (const [name, value] of Object.entries(auth.form)) body.set(name, value)
    const headers: Record<string, string> = {
      "content-type": "application/x-www-form-urlencoded",
      accept: "application/json",
      ...auth.headers,
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
    const json: unknown = await response.json().catch(() => undefined)
    // Any token type and no schema beyond the tokens: they only say who signed in, they are never used here.
    const processed = TokenResponse.process(metadata.token_endpoint, response.status, json, {
      tokenType: () => true,
      schema: false,
    })
    if (Result.isFailure(processed)) throw new UpstreamFailure({ message: `upstream: ${processed.failure.message}` })
    return processed.success as UpstreamTokenResponse
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

  /**
   * Who signed in: from the ID token, the JWT access token, or the configured function. `nowMillis` is the time the
   * tokens' `exp` and `nbf` are checked against.
   */
  async identify(
    metadata: UpstreamMetadata,
    tokens: UpstreamTokenResponse,
    nonce: string | undefined,
    nowMillis: number,
  ) {
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
      payload = await this.verify(metadata, tokens.id_token, this.options.clientId, "ID token", nowMillis)
      if (nonce === undefined || payload.nonce !== nonce)
        throw new UpstreamFailure({ message: "the upstream ID token nonce does not match" })
    } else {
      payload = await this.verify(metadata, tokens.access_token, this.options.resource ?? "", "access token", nowMillis)
    }
    if (!string(payload.sub)) throw new UpstreamFailure({ message: "the upstream token has no sub" })
    const authTime = typeof payload.auth_time === "number" ? payload.auth_time : undefined
    return { subject: payload.sub, ...(authTime === undefined ? {} : { authTime }) } satisfies UpstreamIdentity
  }

  private async verify(metadata: UpstreamMetadata, token: string, audience: string, what: string, nowMillis: number) {
    try {
      const { payload } = await jwtVerify(token, this.jwks(metadata), {
        issuer: this.options.issuer,
        audience,
        requiredClaims: ["exp", "sub"],
        clockTolerance: 5,
        currentDate: new Date(nowMillis),
      })
      return payload
    } catch (e) {
      if (e instanceof UpstreamFailure) throw e
      throw new UpstreamFailure({ message: `the upstream ${what} was rejected: ${(e as Error).message}` })
    }
  }
}
