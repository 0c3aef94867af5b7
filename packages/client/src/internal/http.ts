import { HttpCache, SecureUrl } from "@keyway/core"
import * as Effect from "effect/Effect"
import { AuthError, type Step } from "../AuthError.js"

/** The subset of `fetch` the client needs; any WHATWG-compatible fetch fits. */
export type FetchLike = (input: string | URL | Request, init?: RequestInit) => Promise<Response>

/** Parses an absolute URL or fails with a typed error for the given step. */
export const parseUrl = (step: Step, raw: string, what: string): Effect.Effect<URL, AuthError> => {
  const url = URL.parse(raw)
  return url === null
    ? Effect.fail(
        new AuthError({
          step,
          reason: "invalid-input",
          url: raw,
          message: `${what} "${raw}" is not an absolute URL; give a full URL such as https://mcp.example.com/mcp`,
        }),
      )
    : Effect.succeed(url)
}

/** Refuses to send credentials to an endpoint that is neither https nor loopback (core's {@link SecureUrl} policy). */
export const requireSecure = (step: Step, url: string, what: string): Effect.Effect<void, AuthError> =>
  SecureUrl.isAllowed(url, { httpLoopback: true })
    ? Effect.void
    : Effect.fail(
        new AuthError({
          step,
          reason: "insecure-endpoint",
          url,
          message: `refusing to send client credentials to ${what} ${url}: authorization server endpoints must use https (plain http is only allowed on loopback addresses)`,
        }),
      )

/** Sends a request; network failures become typed errors for the step. Redirects are never followed silently. */
export const send = (
  fetchFn: FetchLike,
  step: Step,
  url: string,
  init: RequestInit = {},
): Effect.Effect<Response, AuthError> =>
  Effect.tryPromise({
    try: (signal) => fetchFn(url, { redirect: "manual", signal, ...init }),
    catch: (cause) =>
      new AuthError({
        step,
        reason: "network-error",
        url,
        message: `could not reach ${url}: ${cause instanceof Error ? cause.message : String(cause)}; check the URL and that the server is running`,
      }),
  })

/**
 * Lets go of a body that will not be read, without waiting for it: when the caller's fetch kept a clone of the
 * response (a logging wrapper), the body is one branch of a tee, whose cancellation settles only once the other
 * branch is cancelled too, which may be never. Nothing waits on it, so nothing hangs on it.
 */
export const discard = (response: Response): void => {
  response.body?.cancel().catch(() => undefined)
}

/** Reads a response body as JSON; anything else is a typed error naming the URL and the content type received. */
export const readJson = (step: Step, url: string, response: Response): Effect.Effect<unknown, AuthError> =>
  Effect.tryPromise({
    try: () => response.text(),
    catch: (cause) =>
      new AuthError({
        step,
        reason: "network-error",
        url,
        message: `the body from ${url} could not be read: ${cause instanceof Error ? cause.message : String(cause)}`,
      }),
  }).pipe(
    Effect.flatMap((text) =>
      Effect.try({
        try: () => JSON.parse(text) as unknown,
        catch: () =>
          new AuthError({
            step,
            reason: "invalid-json",
            url,
            status: response.status,
            message: `${url} answered HTTP ${response.status} with a body that is not JSON (content-type ${response.headers.get("content-type") ?? "none"}); the endpoint must return a JSON document`,
          }),
      }),
    ),
  )

/** Whether a parsed JSON value is a plain object. */
export const isRecord = (u: unknown): u is Record<string, unknown> =>
  typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * How long a discovery response may be reused, in seconds: core's RFC 9111 freshness of its headers at `nowSeconds`
 * (0 for `no-store`/`no-cache`), else the configured default when the response states none.
 */
export const ttlOf = (headers: Headers, defaultSeconds: number, nowSeconds: number): number =>
  HttpCache.freshness(headers, nowSeconds) ?? defaultSeconds
