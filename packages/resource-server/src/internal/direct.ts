/**
 * Verifiers that can also run without the Effect run loop. A `TokenVerifier` is an Effect service; the protected
 * resource's pipeline runs its `verify` once per cache miss, and running an Effect that waits on promises costs it
 * more than the rest of a miss (docs/benchmarks.md). So a verifier of this package registers, next to its `verify`,
 * a direct form built from the same code, and the pipeline calls that one when there is one.
 */
import type { Result } from "effect"
import type { VerificationError, VerifiedToken } from "../VerifiedToken.js"

/**
 * Verifies `token` at `now` (milliseconds, the caller's clock); undefined when it needs what only the Effect form can
 * do (a first discovery of an issuer's keys), and the caller then runs that form.
 */
export type DirectVerify = (
  token: string,
  now: number,
) => Promise<Result.Result<VerifiedToken, VerificationError>> | undefined

const registry = new WeakMap<object, DirectVerify>()

/** Registers `direct` as the direct form of `verify`, which it returns. */
export const withDirect = <F extends object>(verify: F, direct: DirectVerify): F => {
  registry.set(verify, direct)
  return verify
}

/** The direct form of `verify`, when it has one. */
export const directOf = (verify: object): DirectVerify | undefined => registry.get(verify)
