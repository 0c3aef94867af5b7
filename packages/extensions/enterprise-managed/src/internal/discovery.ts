import type { ClientConfig } from "@keyway/client"
import { AuthError } from "@keyway/client"
import { Metadata, SecureUrl } from "@keyway/core"
import { Effect, Result } from "effect"

const isRecord = (u: unknown): u is Record<string, unknown> => typeof u === "object" && u !== null && !Array.isArray(u)

/**
 * The identity provider's metadata, read from `locations` (its issuer's well-known URLs, in RFC 8414 §3 order) and
 * checked by core's `Metadata`: the schema, the issuer compared exactly, and what `checks` asks (PKCE S256, the
 * endpoints the caller needs). A location that answers other than 200 with a JSON object is passed over; a document
 * that fails the checks stops discovery with the problem's reason; `step` is the step of the flow failures name.
 */
export const identityProviderMetadata = (
  fetch: ClientConfig.FetchLike,
  issuer: string,
  locations: ReadonlyArray<string>,
  step: AuthError.Step,
  checks: Metadata.AuthorizationServerMetadataOptions,
) =>
  Effect.gen(function* () {
    const fail = (url: string, reason: AuthError.Reason, message: string) =>
      Effect.fail(new AuthError.AuthError({ step, reason, url, message }))
    for (const where of locations) {
      if (!SecureUrl.isAllowed(where, { httpLoopback: true })) {
        return yield* fail(where, "insecure-endpoint", `the identity provider's metadata ${where} must use https`)
      }
      const response = yield* Effect.tryPromise({
        try: (signal) => fetch(where, { redirect: "manual", signal, headers: { accept: "application/json" } }),
        catch: (e) =>
          new AuthError.AuthError({
            step,
            reason: "network-error",
            url: where,
            message: `the identity provider's metadata ${where} could not be fetched: ${(e as Error).message}`,
          }),
      })
      if (response.status !== 200) {
        // Let go of the body without waiting on it (a caller's fetch may keep a clone).
        response.body?.cancel().catch(() => undefined)
        continue
      }
      const json = yield* Effect.promise(() => response.json().catch(() => undefined))
      if (!isRecord(json)) continue
      const metadata = Metadata.processAuthorizationServerMetadata(issuer, where, json, checks)
      if (Result.isFailure(metadata)) {
        return yield* fail(
          where,
          metadata.failure.reason,
          `the identity provider ${issuer}: ${metadata.failure.message}`,
        )
      }
      return metadata.success
    }
    return yield* fail(issuer, "not-found", `no metadata of the identity provider ${issuer} was found`)
  })
