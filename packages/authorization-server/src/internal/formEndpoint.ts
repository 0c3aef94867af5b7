import { OAuthError } from "@keyway/core"
import { PayloadTooLarge } from "@keyway/http"
import { Effect, Schema } from "effect"
import type { ResolvedConfig } from "../Config.js"
import type { RateLimited } from "../RateLimiter.js"
import type { StorageError } from "../storage/Errors.js"
import type { ClientAuthFailure } from "./clientAuth.js"
import { mediaType, oauthError, parseForm, payloadTooLarge, readBody } from "./http.js"
import { tooManyRequests } from "./limits.js"

/**
 * Reads the form body of a back-channel endpoint (token, revocation, introspection): form media type only,
 * size-capped, no repeated parameter.
 */
export const readForm = (
  config: ResolvedConfig,
  request: Request,
): Effect.Effect<Map<string, string>, OAuthError.OAuthError | BodyTooLargeFailure> =>
  Effect.gen(function* () {
    if (mediaType(request) !== "application/x-www-form-urlencoded") {
      return yield* Effect.fail(
        OAuthError.make("invalid_request", "the body must be application/x-www-form-urlencoded"),
      )
    }
    const body = yield* Effect.tryPromise({
      try: () => readBody(request, config.maxBodyBytes),
      catch: (e) =>
        e instanceof PayloadTooLarge
          ? new BodyTooLargeFailure()
          : OAuthError.make("invalid_request", "the body is not valid UTF-8 form data"),
    })
    const form = parseForm(body)
    if (!(form instanceof Map)) {
      return yield* Effect.fail(OAuthError.make("invalid_request", `parameter ${form.duplicate} is repeated`))
    }
    return form
  })

/** The body was larger than `maxBodyBytes`: 413 with an `invalid_request` body. */
export class BodyTooLargeFailure extends Schema.TaggedError<BodyTooLargeFailure>()("BodyTooLargeFailure", {}) {}

/**
 * Turns the failures of a back-channel endpoint into responses (an abuse limit's refusal is the 429 that names it);
 * `realm` names the Basic challenge. Every 401
 * `invalid_client` carries the challenge, whatever method the client tried: RFC 9110 §11.6.1 requires a
 * `WWW-Authenticate` on every 401, and RFC 6749 §2.3.1 makes Basic the method every server supports.
 */
export const answerFailures =
  (config: ResolvedConfig, realm: string) =>
  <R>(
    effect: Effect.Effect<
      Response,
      StorageError | OAuthError.OAuthError | BodyTooLargeFailure | ClientAuthFailure | RateLimited,
      R
    >,
  ): Effect.Effect<Response, StorageError, R> =>
    effect.pipe(
      Effect.catchTags({
        BodyTooLargeFailure: () => Effect.succeed(payloadTooLarge("invalid_request", config.maxBodyBytes)),
        ClientAuthFailure: (e) =>
          Effect.succeed(
            e.retryAfter !== undefined
              ? tooManyRequests(e.retryAfter, e.description)
              : oauthError(
                  OAuthError.make(e.code, e.description),
                  e.code === "invalid_client" ? { "WWW-Authenticate": `Basic realm="${realm}"` } : {},
                ),
          ),
        OAuthError: (e) => Effect.succeed(oauthError(e)),
        RateLimited: (e) => Effect.succeed(tooManyRequests(e.retryAfter, e.description)),
      }),
    )
