/**
 * The protected resource's rule for delegated tokens (RFC 8693 §4.1): a token whose claims carry `act` was issued
 * to someone acting for its subject, and is accepted only when this resource says which actors it trusts and how
 * long a chain of them may be. The chain is read by core's `TokenExchange.actors`; what is decided here is whether
 * this resource accepts it, and the refusal's description, which names token-supplied values only sanitised and cut.
 */
import { OAuthError, TokenExchange } from "@keyway/core"
import { Result } from "effect"
import { InvalidToken, type VerifiedToken } from "../VerifiedToken.js"
import { descriptions } from "./reasons.js"

/** The `delegation` option, checked. */
export interface DelegationConfig {
  readonly actors: ReadonlySet<string>
  readonly maxChain: number
}

/** The longest token-supplied value a description repeats; what is longer is cut and marked with `...`. */
const maxShownLength = 64

/**
 * `value` as a description may show it: at most {@link maxShownLength} characters, every character that cannot
 * appear in an `error_description` (control characters, `"`, `\`, non-ASCII) replaced by core's rule.
 */
const shown = (value: string): string =>
  value.length > maxShownLength
    ? `${OAuthError.sanitizeDescription(value.slice(0, maxShownLength))}...`
    : OAuthError.sanitizeDescription(value)

/** The descriptions of the refusals; tests assert them as literals. */
const DelegationDescriptions = {
  notAccepted: descriptions["delegation-refused"],
  // Core's messages name members by path (`act.act.sub`), never their values.
  malformed: (problem: string) =>
    `The act claim of the access token is malformed: ${OAuthError.sanitizeDescription(problem)}`,
  tooLong: (length: number, maxChain: number) =>
    `The delegation chain of the access token has ${length} actors; this resource accepts at most ${maxChain}`,
  actor: (sub: string) => `The actor '${shown(sub)}' is not accepted by this resource`,
} as const

const refuse = (reason: "malformed" | "delegation-refused", description: string) =>
  Result.fail(new InvalidToken({ reason, description }))

/**
 * Judges a verified token's delegation: the token with its {@link VerifiedToken.actors} (current actor first) when
 * accepted, an `invalid_token` refusal otherwise. The chain comes from the claims alone: `actors` a verifier may
 * have set is replaced, and dropped for a token without `act`. The caller calls it only for tokens whose claims carry
 * `act` or which come with `actors`, so a token of neither costs nothing here.
 */
export const judge = (
  config: DelegationConfig | undefined,
  token: VerifiedToken,
): Result.Result<VerifiedToken, InvalidToken> => {
  if (token.claims.act === undefined) {
    const { actors: _dropped, ...rest } = token
    return Result.succeed(rest)
  }
  if (config === undefined) return refuse("delegation-refused", DelegationDescriptions.notAccepted)
  const chain = TokenExchange.actors(token.claims)
  if (Result.isFailure(chain)) return refuse("malformed", DelegationDescriptions.malformed(chain.failure))
  const actors = chain.success
  if (actors.length > config.maxChain) {
    return refuse("delegation-refused", DelegationDescriptions.tooLong(actors.length, config.maxChain))
  }
  for (const actor of actors) {
    if (!config.actors.has(actor.sub)) return refuse("delegation-refused", DelegationDescriptions.actor(actor.sub))
  }
  return Result.succeed({ ...token, actors })
}
