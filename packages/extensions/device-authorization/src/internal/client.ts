import { AuthError, type Extension, UserAgent } from "@keyway/client"
import { Grant, SecureUrl, Wire } from "@keyway/core"
import * as Clock from "effect/Clock"
import * as Duration from "effect/Duration"
import * as Effect from "effect/Effect"
import * as Result from "effect/Result"
import { terminalQr } from "./qr.js"

/**
 * What the user is shown: where to go and the code to enter there.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html#section-3.3 | RFC 8628 §3.3}
 */
export interface DeviceCode {
  /** The verification URI, short enough to type. */
  readonly verificationUri: string
  /** The verification URI with the user code in it, for a QR code or a link; absent when the server gives none. */
  readonly verificationUriComplete: string | undefined
  /** The code to enter at the verification URI. */
  readonly userCode: string
  /** Seconds until the codes expire. */
  readonly expiresIn: number
}

/**
 * Options of {@link deviceAuthorization}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html | RFC 8628}
 */
export interface DeviceAuthorizationOptions {
  /**
   * Shows the user where to go and the code to enter (RFC 8628 §3.3); by default they are printed on stderr, with
   * the QR code of the complete URI when stderr is a terminal.
   */
  readonly show?: (code: DeviceCode) => void | Promise<void>
  /** Stops polling: the authorization then fails with `cancelled`. */
  readonly signal?: AbortSignal
  /**
   * `always` (the default) uses the device flow for every authorization; `no-browser` only where no system browser
   * can open (`UserAgent.browserUnavailable` of `@keyway/client` on this process's environment, and every runtime
   * without `process`), leaving the authorization code flow to the others.
   */
  readonly when?: "always" | "no-browser"
  /**
   * Whether a 403 `insufficient_scope` starts a new device authorization for the held and the challenged scopes
   * together (within the client's step-up limit); true by default.
   */
  readonly stepUp?: boolean
}

/** The polling interval when the server states none (RFC 8628 §3.2), and the increase on `slow_down` (§3.5). */
const DEFAULT_INTERVAL_SECONDS = 5
const SLOW_DOWN_SECONDS = 5

const fail = (step: AuthError.Step, reason: AuthError.Reason, url: string, message: string, error?: string) =>
  Effect.fail(new AuthError.AuthError({ step, reason, url, message, ...(error === undefined ? {} : { error }) }))

/**
 * Where {@link printTo} writes: a Node.js writable such as `process.stderr`, or anything with `write`; `isTTY` true
 * when it is a terminal, which can show a QR code.
 */
export interface TextStream {
  readonly write: (text: string) => unknown
  readonly isTTY?: boolean | undefined
}

/** The lifetime of the codes as the user reads it. */
const lifetime = (seconds: number): string =>
  seconds >= 120 ? `${Math.floor(seconds / 60)} minutes` : `${seconds} seconds`

/**
 * A {@link DeviceAuthorizationOptions.show} that writes the verification URI and the user code to `stream`, then,
 * when the stream is a terminal and the server gave a complete URI, its QR code for a phone to scan (RFC 8628
 * §3.3.1); a complete URI too long for a QR code is shown as text only.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html#section-3.3 | RFC 8628 §3.3}
 */
export const printTo =
  (stream: TextStream) =>
  (code: DeviceCode): void => {
    const lines = [
      `To authorize, visit ${code.verificationUri} and enter the code ${code.userCode}`,
      ...(code.verificationUriComplete === undefined ? [] : [`or open ${code.verificationUriComplete}`]),
    ]
    if (stream.isTTY === true && code.verificationUriComplete !== undefined) {
      const qr = qrOf(code.verificationUriComplete)
      if (qr !== undefined) lines.push("or scan:", qr)
    }
    lines.push(`(the code expires in ${lifetime(code.expiresIn)})`)
    stream.write(`${lines.join("\n")}\n`)
  }

/** The terminal QR code of a URI, or undefined when it is too long for one. */
const qrOf = (uri: string): string | undefined => {
  try {
    return terminalQr(uri)
  } catch (error) {
    if (error instanceof RangeError) return undefined
    throw error
  }
}

/**
 * The default {@link DeviceAuthorizationOptions.show}: {@link printTo} this process's stderr (the console where
 * there is no `process`).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html#section-3.3 | RFC 8628 §3.3}
 */
export const printOnStderr = (code: DeviceCode): void => {
  const stderr = (globalThis as { process?: { stderr?: TextStream } }).process?.stderr
  printTo(stderr ?? { write: (text) => console.error(text.trimEnd()) })(code)
}

/** Whether the device flow is to be used here: always, or where no system browser can open. */
const chosen = (when: "always" | "no-browser"): boolean => {
  if (when === "always") return true
  const process = (globalThis as { process?: { env: Record<string, string | undefined>; platform: string } }).process
  return process === undefined || UserAgent.browserUnavailable(process.env, process.platform) !== undefined
}

/** Waits for the signal to abort; never completes without one. */
const aborted = (signal: AbortSignal | undefined, url: string) =>
  signal === undefined
    ? Effect.never
    : Effect.callback<never, AuthError.AuthError>((resume) => {
        const stop = () =>
          resume(fail("token", "cancelled", url, "the device authorization was cancelled before the user approved it"))
        if (signal.aborted) {
          stop()
          return
        }
        signal.addEventListener("abort", stop, { once: true })
        return Effect.sync(() => signal.removeEventListener("abort", stop))
      })

/** The device authorization request (RFC 8628 §3.1) and its validated response (§3.2). */
const requestCodes = Effect.fnUntraced(function* (
  context: Extension.AcquireContext,
  endpoint: string,
  client: Parameters<Extension.AcquireContext["formRequest"]>[2]["client"],
) {
  const body = new URLSearchParams({ resource: context.resource })
  if (context.scope !== undefined) body.set("scope", context.scope)
  const answer = yield* context.formRequest(endpoint, body, { client, step: "authorization" })
  if (answer.status !== 200) {
    const parsed = Wire.validate(Wire.OAuthErrorResponse, answer.body, "device authorization error response")
    const error = Result.isSuccess(parsed) ? parsed.success.error : undefined
    const description = Result.isSuccess(parsed) ? (parsed.success.error_description ?? "") : ""
    return yield* new AuthError.AuthError({
      step: "authorization",
      reason: "oauth-error",
      url: endpoint,
      status: answer.status,
      ...(error === undefined ? {} : { error }),
      message: `the device authorization endpoint ${endpoint} answered HTTP ${answer.status} ${error ?? "without an OAuth error code"}${description === "" ? "" : `: ${description}`}`,
    })
  }
  const parsed = Wire.validate(
    Wire.DeviceAuthorizationResponse,
    answer.body,
    Wire.Documents.deviceAuthorizationResponse,
  )
  if (Result.isFailure(parsed)) {
    return yield* fail(
      "authorization",
      "invalid-document",
      endpoint,
      `the device authorization response from ${endpoint} is invalid: ${parsed.failure.message}`,
    )
  }
  const codes = parsed.success
  for (const [name, uri] of [
    ["verification_uri", codes.verification_uri],
    ["verification_uri_complete", codes.verification_uri_complete],
  ] as const) {
    if (uri !== undefined && !SecureUrl.isAllowed(uri, { httpLoopback: true })) {
      return yield* fail(
        "authorization",
        "insecure-endpoint",
        endpoint,
        `the device authorization response from ${endpoint} has ${name} ${uri}: the user is only sent to https URLs (or http on a loopback address)`,
      )
    }
  }
  return codes
})

/**
 * The device authorization grant (RFC 8628) for `@keyway/client`: tokens are obtained by asking the authorization
 * server's `device_authorization_endpoint` for a user code, showing it with the verification URI, and polling the
 * token endpoint with `grant_type=urn:ietf:params:oauth:grant-type:device_code` until the user approves on another
 * device. The client keeps discovery, `resource`, registration (declaring the device grant), storage, refresh and
 * step-up (a new device authorization for the larger scope).
 *
 * @example
 * ```ts
 * const auth = createAuthClient({ clientName: "my-agent", extensions: [deviceAuthorization({ when: "no-browser" })] })
 * const response = await auth.fetch("https://mcp.example.com/mcp", { method: "POST", body })
 * ```
 * @see {@link https://www.rfc-editor.org/rfc/rfc8628.html#section-3 | RFC 8628 §3}
 */
export const deviceAuthorization = (options: DeviceAuthorizationOptions = {}): Extension.ClientExtension => {
  const show = options.show ?? printOnStderr
  // RFC 8628 is not an MCP extension: MCP servers are not told of it in the client capabilities.
  if (!chosen(options.when ?? "always")) return { id: Grant.DEVICE_CODE, declared: false }
  return {
    id: Grant.DEVICE_CODE,
    declared: false,
    strategy: {
      unattended: false,
      stepUp: options.stepUp ?? true,
      grantTypes: [Grant.DEVICE_CODE, "refresh_token"],
      acquire: (context) =>
        Effect.gen(function* () {
          const { server } = context
          const endpoint = server.metadata.device_authorization_endpoint
          if (endpoint === undefined) {
            return yield* fail(
              "authorization",
              "missing-endpoint",
              server.metadataUrl ?? server.issuer,
              `the authorization server ${server.issuer} publishes no device_authorization_endpoint, so the device authorization grant (RFC 8628) cannot be used with it`,
            )
          }
          const tokenEndpoint = server.metadata.token_endpoint ?? server.issuer
          const client = yield* context.client
          const poll = Effect.gen(function* () {
            const started = yield* Clock.currentTimeMillis
            const codes = yield* requestCodes(context, endpoint, client)
            yield* Effect.promise(() =>
              Promise.resolve(
                show({
                  verificationUri: codes.verification_uri,
                  verificationUriComplete: codes.verification_uri_complete,
                  userCode: codes.user_code,
                  expiresIn: codes.expires_in,
                }),
              ),
            )
            const deadline = started + codes.expires_in * 1000
            // An interval of 0 would poll without pause: one second is the least the client waits.
            let interval = Math.max(codes.interval ?? DEFAULT_INTERVAL_SECONDS, 1)
            for (;;) {
              yield* Effect.sleep(Duration.seconds(interval))
              if ((yield* Clock.currentTimeMillis) >= deadline) {
                return yield* fail(
                  "token",
                  "expired",
                  tokenEndpoint,
                  `the user did not approve the device authorization within ${codes.expires_in} seconds; start again`,
                )
              }
              const body = new URLSearchParams({ grant_type: Grant.DEVICE_CODE, device_code: codes.device_code })
              const answer = yield* context.tokenRequest(body, { client }).pipe(Effect.result)
              if (Result.isSuccess(answer)) return answer.success
              const error = answer.failure.error
              if (error === "authorization_pending") continue
              if (error === "slow_down") {
                interval += SLOW_DOWN_SECONDS
                continue
              }
              if (error === "access_denied") {
                return yield* fail(
                  "token",
                  "authorization-error",
                  tokenEndpoint,
                  "the user denied the device authorization",
                  error,
                )
              }
              if (error === "expired_token") {
                return yield* fail(
                  "token",
                  "expired",
                  tokenEndpoint,
                  "the device code expired before the user approved it; start again",
                  error,
                )
              }
              return yield* answer.failure
            }
          })
          const response = yield* Effect.raceFirst(poll, aborted(options.signal, tokenEndpoint))
          return {
            response,
            clientId: client.client_id,
            ...(context.scope === undefined ? {} : { requestedScope: context.scope }),
          }
        }),
    },
  }
}
