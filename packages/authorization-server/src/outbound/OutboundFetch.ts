/**
 * The SSRF guard for server-side fetches of documents named by clients (client ID metadata documents, `jwks_uri`):
 * https only, the host resolved once and every address vetted, the connection pinned to the vetted address (so a
 * second DNS answer cannot swap it), redirects followed by hand with each hop re-checked, and caps on body size and
 * total time. Only JSON responses are accepted.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.6 | draft-ietf-oauth-client-id-metadata-document-02 §8.6 (SSRF)}
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.7 | draft-ietf-oauth-client-id-metadata-document-02 §8.7 (maximum response size)}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP 2025-11-25 Client ID Metadata Documents}
 * @module
 */
import type { LookupFunction } from "node:net"
import { isIP } from "node:net"
import { Context, Duration, Effect, Layer, Schema } from "effect"
import { Agent, request } from "undici"
import * as Address from "./Address.js"
import { type ResolvedAddress, Resolver, type ResolverService } from "./Resolver.js"

/**
 * Why an outbound fetch was refused or failed:
 * - `url`: not a URL, or it carries credentials;
 * - `scheme`: not https (or http to a non-loopback address under the development option);
 * - `address`: an address of the host is in a refused range ({@link Address.classify});
 * - `redirect`: a redirect when redirects are not followed, or one without a usable `Location`;
 * - `too-many-redirects`: more hops than allowed;
 * - `too-large`: the body exceeds the size cap;
 * - `timeout`: the whole exchange (resolution, connection, every hop, the body) exceeded the time cap;
 * - `content-type`: not `application/json` or an `application/*+json` type;
 * - `status`: a final status other than 200;
 * - `json`: the body is not valid JSON;
 * - `network`: resolution, connection, TLS or protocol failure;
 * - `rate-limited`: the authorization server's per-host limit on these fetches is reached (`retryAfter` says for how
 *   long); nothing was sent.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-5 | draft-ietf-oauth-client-id-metadata-document-02 §5}
 */
export const RefusalReason = Schema.Literals([
  "url",
  "scheme",
  "address",
  "redirect",
  "too-many-redirects",
  "too-large",
  "timeout",
  "content-type",
  "status",
  "json",
  "network",
  "rate-limited",
])
/** @see {@link RefusalReason} */
export type RefusalReason = typeof RefusalReason.Type

/**
 * An outbound fetch was refused by the guard or failed. `url` is the URL of the hop concerned (the redirect target
 * when a redirect is refused); `message` says what was wrong in words fit for a log or an error description.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.6 | draft-ietf-oauth-client-id-metadata-document-02 §8.6}
 */
export class OutboundRefused extends Schema.TaggedError<OutboundRefused>()("OutboundRefused", {
  reason: RefusalReason,
  url: Schema.String,
  message: Schema.String,
  /** Seconds until the host may be fetched again, when `reason` is `rate-limited`. */
  retryAfter: Schema.optionalKey(Schema.Number),
}) {}

/**
 * Limits and relaxations of the guard.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.7 | draft-ietf-oauth-client-id-metadata-document-02 §8.7}
 */
export interface Options {
  /** Largest accepted body in bytes; reading stops as soon as it is exceeded. Default 65536 (64 KiB). */
  readonly maxBytes?: number
  /** Cap on the whole fetch, redirects and slow bodies included, in milliseconds. Default 5000. */
  readonly timeoutMs?: number
  /** How many redirects to follow, each re-checked; 0 refuses any redirect. Default 3. */
  readonly maxRedirects?: number
  /**
   * Development only: allow http, and loopback addresses (127.0.0.0/8, ::1), so a client on the developer's machine
   * can be fetched. Every other refused range stays refused. Off by default; a warning is logged when on.
   */
  readonly allowInsecureLoopback?: boolean
  /**
   * Trust anchors for TLS in PEM, replacing Node's default set (as `ca` of `tls.connect`). For private PKIs and
   * tests; certificate verification is never switched off.
   */
  readonly ca?: string | ReadonlyArray<string>
  /** `User-Agent` sent with every request. Default `keyway-authorization-server`. */
  readonly userAgent?: string
}

/**
 * A candidate connection the guard would refuse, as shown to {@link TestOptions.allow}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6890.html | RFC 6890}
 */
export interface Candidate {
  readonly hostname: string
  readonly address: string
  readonly refusal: Address.Refusal
}

/**
 * Test-only options: `allow` lets a test declare that some (host name, address) pairs count as public, so real
 * servers on loopback can stand in for hosts on the internet. The guard's own classification still runs first and
 * `allow` is asked only about addresses it refuses.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6890.html | RFC 6890}
 */
export interface TestOptions extends Options {
  readonly allow: (candidate: Candidate) => boolean
}

/**
 * Per-request settings.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-5 | draft-ietf-oauth-client-id-metadata-document-02 §5}
 */
export interface RequestOptions {
  /** Overrides {@link Options.maxRedirects} for this request (client ID metadata documents use 0). */
  readonly maxRedirects?: number
  /** `Accept` header. Default `application/json`. */
  readonly accept?: string
  /** Overrides {@link Options.maxBytes} for this request. */
  readonly maxBytes?: number
}

/**
 * A successful fetch: status 200, a JSON content type, a body within the cap, parsed.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8259.html | RFC 8259 (JSON)}
 */
export interface JsonResponse {
  /** The URL that answered (after redirects). */
  readonly url: string
  readonly status: number
  readonly headers: Headers
  readonly json: unknown
}

/**
 * The shape of the {@link OutboundFetch} service.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.6 | draft-ietf-oauth-client-id-metadata-document-02 §8.6}
 */
export interface OutboundFetchService {
  /** GETs a JSON document through the guard. */
  readonly fetchJson: (url: string, options?: RequestOptions) => Effect.Effect<JsonResponse, OutboundRefused>
}

/**
 * Defaults of {@link Options}: 64 KiB, 5 s, 3 redirects.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.7 | draft-ietf-oauth-client-id-metadata-document-02 §8.7}
 */
export const defaults = {
  maxBytes: 64 * 1024,
  timeoutMs: 5000,
  maxRedirects: 3,
  userAgent: "keyway-authorization-server",
} as const

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308])

/** `application/json` or `application/<anything>+json`, parameters ignored (RFC 6839 §3.1). */
const isJsonContentType = (value: string): boolean => {
  const essence = value.split(";")[0]?.trim().toLowerCase() ?? ""
  return essence === "application/json" || /^application\/[^/\s]+\+json$/.test(essence)
}

const headerValue = (value: string | ReadonlyArray<string> | undefined): string | undefined =>
  typeof value === "string" ? value : value?.[0]

type Hop =
  | { readonly _tag: "redirect"; readonly status: number; readonly location: string | undefined }
  | { readonly _tag: "done"; readonly response: JsonResponse }

interface Settings {
  readonly maxBytes: number
  readonly timeoutMs: number
  readonly maxRedirects: number
  readonly allowInsecureLoopback: boolean
  readonly ca: string | ReadonlyArray<string> | undefined
  readonly userAgent: string
  readonly allow: ((candidate: Candidate) => boolean) | undefined
}

/** Connects to the vetted address whatever name the socket layer asks about. */
const pinnedLookup =
  (pinned: ResolvedAddress): LookupFunction =>
  (_hostname, options, callback) => {
    if (options.all === true) {
      ;(callback as (err: null, addresses: Array<{ address: string; family: number }>) => void)(null, [
        { address: pinned.address, family: pinned.family },
      ])
    } else callback(null, pinned.address, pinned.family)
  }

/** Drops a body we will not read; undici reports the abort as an error event nobody else listens to. */
const discard = (body: { on: (event: "error", listener: () => void) => unknown; destroy: () => unknown }): void => {
  body.on("error", () => undefined)
  body.destroy()
}

const readBody = async (
  body: AsyncIterable<Uint8Array> & Parameters<typeof discard>[0],
  url: string,
  maxBytes: number,
): Promise<Uint8Array> => {
  const chunks: Array<Uint8Array> = []
  let size = 0
  for await (const chunk of body) {
    size += chunk.byteLength
    if (size > maxBytes) {
      discard(body)
      throw new OutboundRefused({ reason: "too-large", url, message: `${url} sent more than ${maxBytes} bytes` })
    }
    chunks.push(chunk)
  }
  return Buffer.concat(chunks)
}

/** One request to one vetted address over a fresh agent, so no pooled connection outlives its check. */
const exchange = async (
  target: URL,
  pinned: ResolvedAddress,
  settings: Settings,
  accept: string,
  signal: AbortSignal,
): Promise<Hop> => {
  const url = target.href
  const agent = new Agent({
    allowH2: false,
    connect: { lookup: pinnedLookup(pinned), ...(settings.ca === undefined ? {} : { ca: [...[settings.ca].flat()] }) },
  })
  try {
    const response = await request(target, {
      dispatcher: agent,
      method: "GET",
      headers: { accept, "user-agent": settings.userAgent },
      signal,
    })
    const status = response.statusCode
    if (REDIRECT_STATUSES.has(status)) {
      discard(response.body)
      return { _tag: "redirect", status, location: headerValue(response.headers.location) }
    }
    if (status !== 200) {
      discard(response.body)
      throw new OutboundRefused({ reason: "status", url, message: `${url} answered HTTP ${status}, expected 200` })
    }
    const contentType = headerValue(response.headers["content-type"])
    if (contentType === undefined || !isJsonContentType(contentType)) {
      discard(response.body)
      const got = contentType === undefined ? "no content type" : `content type "${contentType}"`
      throw new OutboundRefused({
        reason: "content-type",
        url,
        message: `${url} answered with ${got}, expected application/json or an application/*+json type`,
      })
    }
    const declared = Number(headerValue(response.headers["content-length"]))
    if (Number.isFinite(declared) && declared > settings.maxBytes) {
      discard(response.body)
      throw new OutboundRefused({
        reason: "too-large",
        url,
        message: `${url} sent more than ${settings.maxBytes} bytes`,
      })
    }
    const bytes = await readBody(response.body, url, settings.maxBytes)
    let json: unknown
    try {
      json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes))
    } catch (error) {
      throw new OutboundRefused({
        reason: "json",
        url,
        message: `${url} did not send valid JSON: ${(error as Error).message}`,
      })
    }
    const headers = new Headers()
    for (const [name, value] of Object.entries(response.headers)) {
      if (value === undefined) continue
      for (const v of [value].flat()) headers.append(name, v)
    }
    return { _tag: "done", response: { url, status, headers, json } }
  } finally {
    await agent.destroy().catch(() => undefined)
  }
}

const networkMessage = (error: unknown): string => {
  const e = error as { message?: string; code?: string; cause?: { message?: string; code?: string } }
  const cause = e.cause?.message ?? e.cause?.code
  return cause === undefined ? (e.message ?? String(error)) : `${e.message ?? String(error)} (${cause})`
}

const fromSettings = (settings: Settings, resolver: ResolverService): OutboundFetchService => {
  const vet = Effect.fnUntraced(function* (url: string) {
    let target: URL
    try {
      target = new URL(url)
    } catch {
      return yield* new OutboundRefused({ reason: "url", url, message: `${url} is not a valid URL` })
    }
    if (target.username !== "" || target.password !== "") {
      return yield* new OutboundRefused({
        reason: "url",
        url,
        message: `refused ${url}: URLs with credentials are not fetched`,
      })
    }
    const insecure = target.protocol === "http:" && settings.allowInsecureLoopback
    if (target.protocol !== "https:" && !insecure) {
      return yield* new OutboundRefused({
        reason: "scheme",
        url,
        message: `refused ${url}: only https URLs are fetched`,
      })
    }
    const hostname = target.hostname.startsWith("[") ? target.hostname.slice(1, -1) : target.hostname
    const family = isIP(hostname)
    const addresses: ReadonlyArray<ResolvedAddress> =
      family === 0
        ? yield* resolver
            .lookup(hostname)
            .pipe(
              Effect.mapError(
                (error) =>
                  new OutboundRefused({ reason: "network", url, message: `could not fetch ${url}: ${error.message}` }),
              ),
            )
        : [{ address: hostname, family: family === 6 ? 6 : 4 }]
    for (const { address } of addresses) {
      const refusal = Address.classify(address)
      if (refusal === undefined) continue
      if (settings.allowInsecureLoopback && refusal.kind === "loopback") continue
      if (settings.allow?.({ hostname, address, refusal }) === true) continue
      const of = family === 0 ? ` of ${hostname}` : ""
      return yield* new OutboundRefused({
        reason: "address",
        url,
        message: `refused ${url}: address ${address}${of} is ${Address.describe(refusal)}`,
      })
    }
    if (target.protocol === "http:" && !addresses.every(({ address }) => Address.isLoopback(address))) {
      return yield* new OutboundRefused({
        reason: "scheme",
        url,
        message: `refused ${url}: http is allowed only to loopback addresses (development option)`,
      })
    }
    const pinned = addresses[0]
    if (pinned === undefined) {
      return yield* new OutboundRefused({ reason: "network", url, message: `could not fetch ${url}: no address` })
    }
    return { target, pinned }
  })

  const fetchJson = Effect.fn("OutboundFetch.fetchJson")(function* (url: string, options?: RequestOptions) {
    const maxRedirects = options?.maxRedirects ?? settings.maxRedirects
    const accept = options?.accept ?? "application/json"
    const limits = options?.maxBytes === undefined ? settings : { ...settings, maxBytes: options.maxBytes }
    const run = Effect.gen(function* () {
      let current = url
      for (let hops = 0; ; hops++) {
        const { target, pinned } = yield* vet(current)
        const hop = yield* Effect.tryPromise({
          try: (signal) => exchange(target, pinned, limits, accept, signal),
          catch: (error) =>
            error instanceof OutboundRefused
              ? error
              : new OutboundRefused({
                  reason: "network",
                  url: target.href,
                  message: `could not fetch ${target.href}: ${networkMessage(error)}`,
                }),
        })
        if (hop._tag === "done") return hop.response
        const from = target.href
        if (hop.location === undefined) {
          return yield* new OutboundRefused({
            reason: "redirect",
            url: from,
            message: `refused ${from}: HTTP ${hop.status} redirect without a Location header`,
          })
        }
        let next: string
        try {
          next = new URL(hop.location, from).href
        } catch {
          return yield* new OutboundRefused({
            reason: "redirect",
            url: from,
            message: `refused ${from}: redirect to an invalid URL`,
          })
        }
        if (maxRedirects === 0) {
          return yield* new OutboundRefused({
            reason: "redirect",
            url: from,
            message: `refused ${from}: redirects are not followed (HTTP ${hop.status} to ${next})`,
          })
        }
        if (hops >= maxRedirects) {
          return yield* new OutboundRefused({
            reason: "too-many-redirects",
            url: from,
            message: `refused ${from}: more than ${maxRedirects} redirects`,
          })
        }
        current = next
      }
    })
    return yield* run.pipe(
      Effect.timeoutOrElse({
        duration: Duration.millis(settings.timeoutMs),
        orElse: () =>
          Effect.fail(
            new OutboundRefused({
              reason: "timeout",
              url,
              message: `${url} did not answer within ${settings.timeoutMs} ms`,
            }),
          ),
      }),
    )
  })

  return { fetchJson }
}

const settingsOf = (options: Options, allow: ((candidate: Candidate) => boolean) | undefined): Settings => ({
  maxBytes: options.maxBytes ?? defaults.maxBytes,
  timeoutMs: options.timeoutMs ?? defaults.timeoutMs,
  maxRedirects: options.maxRedirects ?? defaults.maxRedirects,
  allowInsecureLoopback: options.allowInsecureLoopback ?? false,
  ca: options.ca,
  userAgent: options.userAgent ?? defaults.userAgent,
  allow,
})

/**
 * The guard as a plain value over a resolver, for code that runs outside a layer (a jose key set's fetch). It checks
 * what {@link OutboundFetch.layer} checks but logs nothing: a caller that turns on `allowInsecureLoopback` gives its
 * own warning.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.6 | draft-ietf-oauth-client-id-metadata-document-02 §8.6}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6890.html | RFC 6890}
 */
export const make = (options: Options, resolver: ResolverService): OutboundFetchService =>
  fromSettings(settingsOf(options, undefined), resolver)

const build = (options: Options, allow: ((candidate: Candidate) => boolean) | undefined) =>
  Layer.effect(
    OutboundFetch,
    Effect.gen(function* () {
      const resolver = yield* Resolver
      const settings = settingsOf(options, allow)
      if (settings.allowInsecureLoopback) {
        yield* Effect.logWarning(
          "OutboundFetch: allowInsecureLoopback is ON: http and loopback addresses are fetched. Development only; never enable it in production.",
        )
      }
      return OutboundFetch.of(fromSettings(settings, resolver))
    }),
  )

/**
 * The guarded outbound fetch.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.6 | draft-ietf-oauth-client-id-metadata-document-02 §8.6}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6890.html | RFC 6890}
 */
export class OutboundFetch extends Context.Service<OutboundFetch, OutboundFetchService>()(
  "@keyway/authorization-server/OutboundFetch",
) {
  /**
   * The production guard. Needs a {@link Resolver} (`Resolver.layer` for the system resolver).
   *
   * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.6 | draft-ietf-oauth-client-id-metadata-document-02 §8.6}
   */
  static readonly layer = (options: Options = {}): Layer.Layer<OutboundFetch, never, Resolver> =>
    build(options, undefined)

  /**
   * For tests only: the production guard plus {@link TestOptions.allow}, which may declare refused (host name,
   * address) pairs public so that loopback servers stand in for internet hosts.
   *
   * @see {@link https://www.rfc-editor.org/rfc/rfc6890.html | RFC 6890}
   */
  static readonly layerTest = (options: TestOptions): Layer.Layer<OutboundFetch, never, Resolver> =>
    build(options, options.allow)
}
