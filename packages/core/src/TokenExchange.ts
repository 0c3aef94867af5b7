/**
 * The token exchange (RFC 8693) written once for every party that runs it: the request a client sends
 * ({@link request}), the checks of a request that reaches a token endpoint ({@link parseRequest}), and the delegation
 * claims of the tokens it issues: the actor chain of `act` ({@link actors}, {@link withActor}) and the `may_act`
 * statement ({@link mayAct}). Pure: verifying the tokens and issuing are the caller's.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html | RFC 8693}
 * @module
 */
import * as Result from "effect/Result"
import { TOKEN_EXCHANGE } from "./Grant.js"
import * as Scope from "./Scope.js"

/**
 * The parameters of a token exchange request.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.1 | RFC 8693 §2.1}
 */
export interface ExchangeRequest {
  readonly subjectToken: string
  readonly subjectTokenType: string
  /** The token type asked for; the server chooses when absent. */
  readonly requestedTokenType?: string | undefined
  /** The logical name of the target service. */
  readonly audience?: string | undefined
  /** The absolute URI of the target service (RFC 8707). */
  readonly resource?: string | undefined
  /** The scopes asked for, space-separated. */
  readonly scope?: string | undefined
  /** A token that represents the acting party, with its type (both or neither). */
  readonly actorToken?: string | undefined
  readonly actorTokenType?: string | undefined
}

/**
 * The form parameters of a token exchange request, `grant_type` included, in the order RFC 8693 §2.1 lists them;
 * absent values are left out. Client authentication is the caller's (see `ClientAuth`).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.1 | RFC 8693 §2.1}
 */
export const request = (exchange: ExchangeRequest): Record<string, string> => {
  const out: Record<string, string> = { grant_type: TOKEN_EXCHANGE }
  const put = (name: string, value: string | undefined) => {
    if (value !== undefined) out[name] = value
  }
  put("resource", exchange.resource)
  put("audience", exchange.audience)
  put("scope", exchange.scope)
  put("requested_token_type", exchange.requestedTokenType)
  put("subject_token", exchange.subjectToken)
  put("subject_token_type", exchange.subjectTokenType)
  put("actor_token", exchange.actorToken)
  put("actor_token_type", exchange.actorTokenType)
  return out
}

/**
 * What a token endpoint accepts in a token exchange request.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.1 | RFC 8693 §2.1}
 */
export interface RequestPolicy {
  /** The `subject_token_type` values this endpoint understands. */
  readonly subjectTokenTypes: ReadonlyArray<string>
  /** The `requested_token_type` values it can issue; the parameter may be absent. */
  readonly requestedTokenTypes: ReadonlyArray<string>
  /** The `actor_token_type` values it understands; an `actor_token` is refused when omitted or empty. */
  readonly actorTokenTypes?: ReadonlyArray<string>
  /** Whether `audience` is required. */
  readonly requireAudience?: boolean
  /** Whether `resource` is required. */
  readonly requireResource?: boolean
}

/**
 * Why a token exchange request was refused: the OAuth error code and its description.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.2.2 | RFC 8693 §2.2.2}
 */
export interface RequestProblem {
  readonly code: "invalid_request" | "invalid_scope"
  readonly description: string
}

const oneOf = (name: string, values: ReadonlyArray<string>): string =>
  values.length === 1 ? `${name} must be ${values[0]}` : `${name} must be one of ${values.join(", ")}`

/**
 * Checks the parameters of a token exchange request (the form, none repeated) against what this endpoint
 * understands, in this order: `subject_token` present, `subject_token_type` present and understood, `actor_token`
 * and `actor_token_type` both or neither (§2.1) and the type understood, `requested_token_type` understood when
 * present, `audience` and `resource` present when required and never empty, `scope` well formed
 * (`invalid_scope`). Whether the tokens are valid, and what the target is, are the caller's checks.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.1 | RFC 8693 §2.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-2.2.2 | RFC 8693 §2.2.2}
 */
export const parseRequest = (
  form: ReadonlyMap<string, string>,
  policy: RequestPolicy,
): Result.Result<ExchangeRequest, RequestProblem> => {
  const fail = (description: string, code: RequestProblem["code"] = "invalid_request") =>
    Result.fail<RequestProblem>({ code, description })
  const subjectToken = form.get("subject_token")
  if (subjectToken === undefined || subjectToken === "") return fail("subject_token is missing")
  const subjectTokenType = form.get("subject_token_type")
  if (subjectTokenType === undefined || subjectTokenType === "") return fail("subject_token_type is missing")
  if (!policy.subjectTokenTypes.includes(subjectTokenType)) {
    return fail(oneOf("subject_token_type", policy.subjectTokenTypes))
  }
  const actorToken = form.get("actor_token")
  const actorTokenType = form.get("actor_token_type")
  if (actorToken !== undefined || actorTokenType !== undefined) {
    const accepted = policy.actorTokenTypes ?? []
    if (accepted.length === 0) return fail("actor_token is not accepted here")
    if (actorToken === undefined || actorToken === "") return fail("actor_token_type is present without actor_token")
    if (actorTokenType === undefined || actorTokenType === "") return fail("actor_token_type is missing")
    if (!accepted.includes(actorTokenType)) return fail(oneOf("actor_token_type", accepted))
  }
  const requestedTokenType = form.get("requested_token_type")
  if (requestedTokenType !== undefined && !policy.requestedTokenTypes.includes(requestedTokenType)) {
    return fail(oneOf("requested_token_type", policy.requestedTokenTypes))
  }
  const audience = form.get("audience")
  if (audience === "" || (audience === undefined && policy.requireAudience === true)) {
    return fail("audience is missing")
  }
  const resource = form.get("resource")
  if (resource === "" || (resource === undefined && policy.requireResource === true)) {
    return fail("resource is missing")
  }
  const scope = form.get("scope")
  if (scope !== undefined && Result.isFailure(Scope.validate(scope))) return fail("scope is malformed", "invalid_scope")
  return Result.succeed({
    subjectToken,
    subjectTokenType,
    requestedTokenType,
    audience,
    resource,
    scope,
    actorToken,
    actorTokenType,
  })
}

/**
 * One party of a delegation chain: the members of an `act` (or `may_act`) claim that identify it.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-4.1 | RFC 8693 §4.1}
 */
export interface Actor {
  /** The actor's subject; Keyway names a client by its client ID. */
  readonly sub: string
  /** The issuer `sub` is relative to, when the claim says. */
  readonly iss?: string
  /** The client the actor acted through, when the claim says (RFC 8693 §4.3). */
  readonly client_id?: string
}

/** The deepest `act` nesting read: a longer chain is refused rather than walked. */
export const MAX_CHAIN = 16

const isObject = (value: unknown): value is Readonly<Record<string, unknown>> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const readActor = (value: Readonly<Record<string, unknown>>, path: string): Result.Result<Actor, string> => {
  const { sub, iss, client_id } = value
  if (typeof sub !== "string" || sub === "") return Result.fail(`${path}.sub must be a non-empty string`)
  if (iss !== undefined && typeof iss !== "string") return Result.fail(`${path}.iss must be a string`)
  if (client_id !== undefined && typeof client_id !== "string") {
    return Result.fail(`${path}.client_id must be a string`)
  }
  return Result.succeed({
    sub,
    ...(iss === undefined ? {} : { iss }),
    ...(client_id === undefined ? {} : { client_id }),
  })
}

/**
 * The delegation chain of a token's claims, the current actor first and the earliest last (RFC 8693 §4.1: a nested
 * `act` names a prior actor); empty when the token carries no `act`. Fails with a message naming the malformed
 * member (for example `act.act.sub must be a non-empty string`) or a chain deeper than {@link MAX_CHAIN}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-4.1 | RFC 8693 §4.1}
 */
export const actors = (claims: Readonly<Record<string, unknown>>): Result.Result<ReadonlyArray<Actor>, string> => {
  const chain: Array<Actor> = []
  let current: unknown = claims.act
  let path = "act"
  while (current !== undefined) {
    if (!isObject(current)) return Result.fail(`${path} must be a JSON object`)
    if (chain.length === MAX_CHAIN) return Result.fail(`the act chain is longer than ${MAX_CHAIN}`)
    const actor = readActor(current, path)
    if (Result.isFailure(actor)) return Result.fail(actor.failure)
    chain.push(actor.success)
    current = current.act
    path = `${path}.act`
  }
  return Result.succeed(chain)
}

/**
 * The `act` claim of a token issued to `actor` for a subject token with these claims: the actor, with the subject
 * token's own `act` (if any) nested as the prior actor (RFC 8693 §4.1), so a chain grows by one at each exchange.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-4.1 | RFC 8693 §4.1}
 */
export const withActor = (actor: Actor, subjectClaims: Readonly<Record<string, unknown>>): Record<string, unknown> =>
  isObject(subjectClaims.act) ? { ...actor, act: subjectClaims.act } : { ...actor }

/**
 * Whether a subject token lets `actor` act for its subject (RFC 8693 §4.4): true when the token carries no
 * `may_act`, or one whose `sub` (and `iss`, `client_id` when present) are the actor's; false otherwise, a malformed
 * `may_act` included.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8693.html#section-4.4 | RFC 8693 §4.4}
 */
export const mayAct = (subjectClaims: Readonly<Record<string, unknown>>, actor: Actor): boolean => {
  const statement = subjectClaims.may_act
  if (statement === undefined) return true
  if (!isObject(statement)) return false
  const allowed = readActor(statement, "may_act")
  if (Result.isFailure(allowed)) return false
  const { sub, iss, client_id } = allowed.success
  return (
    sub === actor.sub &&
    (iss === undefined || iss === actor.iss) &&
    (client_id === undefined || client_id === actor.client_id)
  )
}
