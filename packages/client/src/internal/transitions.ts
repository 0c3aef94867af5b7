/**
 * What the client's `fetch` does after each answer of an MCP server, as pure transitions: the loop in `AuthClient`
 * does the I/O each step names (send, read the held token, refresh, authorize) and reports what came back as the
 * next event. A 401 is answered by the token another request stored, else a refresh, else one authorization; a 403
 * `insufficient_scope` by a step-up authorization for the union of the held and challenged scopes, within a
 * per-operation limit on authorizations.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-flow-steps | MCP authorization flow}
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#step-up-authorization-flow | MCP step-up authorization}
 * @module
 */
import { type Challenge, Scope } from "@keyway/core"
import { AuthError } from "../AuthError.js"

/** The configuration the decisions depend on. */
export interface Policy {
  /** Authorizations one operation may make before it fails with `step-up-limit`. */
  readonly maxStepUpAttempts: number
  /** Whether a 403 `insufficient_scope` may be answered by authorizing for more scope. */
  readonly stepUp: boolean
}

/** The first send of a request. */
export const FIRST_SEND = 1
/** The one resend an extension may ask for (a DPoP nonce the server now requires, RFC 9449 §9). */
export const EXTENSION_RESEND = 1
/** The send with the token one refresh obtained. */
export const SEND_AFTER_REFRESH = 1
/** The send after the one authorization that answers a 401 (or with the token another request stored first). */
export const SEND_AFTER_AUTHORIZATION = 1

/**
 * The sends one `fetch` may make: the first, the extension's resend, one after a refresh, one after the
 * authorization answering a 401, and one after each step-up. A request alone never reaches it (the 401's
 * authorization counts towards the step-up limit, and the limit is checked on each 403); concurrent requests can,
 * by replacing the held token again and again or by clearing the operation's count when they succeed.
 */
export const maxSends = (policy: Policy): number =>
  FIRST_SEND + EXTENSION_RESEND + SEND_AFTER_REFRESH + SEND_AFTER_AUTHORIZATION + policy.maxStepUpAttempts

/** The token a request was sent with, as far as the decisions go. */
export interface Sent {
  readonly accessToken: string
  /** The scope granted with it (space-separated). */
  readonly scope: string
  /** Whether a refresh token is held with it. */
  readonly refreshable: boolean
}

/** What the loop knows of one `fetch`. */
export interface State {
  /** Requests sent so far. */
  readonly sends: number
  /** The extension's one resend was used. */
  readonly resent: boolean
  /** A refresh was tried. */
  readonly refreshed: boolean
  /** The authorization answering a 401 was started (or the token another request stored was taken instead). */
  readonly authorized: boolean
  /** The token of the last send, undefined when it went without one. */
  readonly sent: Sent | undefined
  /** The Bearer challenge of the last answer (its scope, error and resource_metadata), if any. */
  readonly challenge: Challenge.BearerParams | undefined
}

/** Nothing sent yet. */
export const initial: State = {
  sends: 0,
  resent: false,
  refreshed: false,
  authorized: false,
  sent: undefined,
  challenge: undefined,
}

/** What the loop reports. */
export type Event =
  /** The server answered a request. */
  | {
      readonly _tag: "Response"
      readonly status: number
      /** The challenge of the schemes the client answers (Bearer and those extensions present tokens with). */
      readonly challenge: Challenge.BearerParams | undefined
      /** A `WWW-Authenticate` for another scheme only: not the client's to answer. */
      readonly foreign: boolean
      readonly sent: Sent | undefined
      /** An extension asked for the request once more. */
      readonly resendAsked: boolean
      /** Authorizations counted for this operation (shared by every request of it until one succeeds). */
      readonly stepUps: number
    }
  /** The access token held now, answering {@link Step} `CheckHeld`. */
  | { readonly _tag: "Held"; readonly before: "refresh" | "authorize"; readonly accessToken: string | undefined }
  /** The outcome of a refresh: false when the tokens are gone (the grant is dead) and an authorization is needed. */
  | { readonly _tag: "Refreshed"; readonly ok: boolean }

/** What the loop does next. */
export type Step =
  /** Hand the answer back; `ok` (2xx) clears the operation's step-up count. */
  | { readonly _tag: "Return"; readonly ok: boolean }
  /** Send the request again, once, for an extension. */
  | { readonly _tag: "Resend" }
  /** Send the request again with the token held now. */
  | { readonly _tag: "Retry" }
  /**
   * Read the token held now: another request may have replaced the rejected one meanwhile, and theirs is tried
   * before a refresh token is spent or the user is asked again.
   */
  | { readonly _tag: "CheckHeld"; readonly before: "refresh" | "authorize" }
  /** Refresh the token sent (concurrent requests share one refresh). */
  | { readonly _tag: "Refresh" }
  /**
   * Authorize, then send again; the authorization counts towards the operation's step-up limit. `force` re-fetches
   * the discovery documents (the held token was rejected); `scope` overrides the selection rules (a step-up).
   */
  | {
      readonly _tag: "Authorize"
      readonly challenge: Challenge.BearerParams | undefined
      readonly scope: string | undefined
      readonly force: boolean
    }
  /** Give up with the typed error of {@link failure}. */
  | Fail

/** The failures the policy decides. */
export type Fail =
  | {
      readonly _tag: "Fail"
      readonly reason: "insufficient-scope"
      /** The scope the challenge names. */
      readonly needed: string
      /** The scope the token holds. */
      readonly held: string
    }
  | { readonly _tag: "Fail"; readonly reason: "step-up-limit"; readonly attempts: number }
  | { readonly _tag: "Fail"; readonly reason: "unauthorized" }

/** A decision and the state it leaves. */
export interface Transition {
  readonly state: State
  readonly step: Step
}

const to = (state: State, step: Step): Transition => ({ state, step })

/** The 401 once neither another request's token nor a refresh answers it: one authorization per request. */
const authorizeOnce = (state: State): Transition =>
  state.authorized
    ? to(state, { _tag: "Fail", reason: "unauthorized" })
    : to({ ...state, authorized: true }, { _tag: "CheckHeld", before: "authorize" })

/** Another request stored a different token than the one rejected. */
const replaced = (state: State, accessToken: string | undefined): boolean =>
  accessToken !== undefined && accessToken !== state.sent?.accessToken

/**
 * The next step after an event.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#authorization-flow-steps | MCP authorization flow}
 */
export const transition = (policy: Policy, state: State, event: Event): Transition => {
  switch (event._tag) {
    case "Response": {
      const now: State = { ...state, sends: state.sends + 1, sent: event.sent, challenge: event.challenge }
      if (event.sent !== undefined && event.resendAsked && !state.resent) {
        return to({ ...now, resent: true }, { _tag: "Resend" })
      }
      if (event.status !== 401 && event.status !== 403) {
        return to(now, { _tag: "Return", ok: event.status >= 200 && event.status < 300 })
      }
      if (event.status === 403) {
        // Only a token short of scope is answered by more scope; any other 403 is the caller's.
        if (event.challenge?.error !== "insufficient_scope" || event.sent === undefined) {
          return to(now, { _tag: "Return", ok: false })
        }
        if (!policy.stepUp) {
          return to(now, {
            _tag: "Fail",
            reason: "insufficient-scope",
            needed: event.challenge.scope ?? "",
            held: event.sent.scope,
          })
        }
        if (event.stepUps >= policy.maxStepUpAttempts) {
          return to(now, { _tag: "Fail", reason: "step-up-limit", attempts: event.stepUps })
        }
        const scope = Scope.format(Scope.union(Scope.parse(event.sent.scope), Scope.parse(event.challenge.scope)))
        return to(now, { _tag: "Authorize", challenge: event.challenge, scope, force: false })
      }
      // 401: a challenge for another scheme is not ours to answer.
      if (event.foreign) return to(now, { _tag: "Return", ok: false })
      return event.sent === undefined ? authorizeOnce(now) : to(now, { _tag: "CheckHeld", before: "refresh" })
    }
    case "Held": {
      if (replaced(state, event.accessToken)) return to(state, { _tag: "Retry" })
      if (event.before === "authorize") {
        return to(state, {
          _tag: "Authorize",
          challenge: state.challenge,
          scope: undefined,
          force: state.sent !== undefined,
        })
      }
      if (!state.refreshed && state.sent?.refreshable === true) {
        return to({ ...state, refreshed: true }, { _tag: "Refresh" })
      }
      return authorizeOnce(state)
    }
    case "Refreshed":
      return event.ok ? to(state, { _tag: "Retry" }) : authorizeOnce(state)
  }
}

/** The error of a failure, for a request to `url` of `operation`. */
export const failure = (policy: Policy, fail: Fail, url: string, operation: string): AuthError => {
  switch (fail.reason) {
    case "insufficient-scope":
      return new AuthError({
        step: "step-up",
        reason: "insufficient-scope",
        url,
        status: 403,
        message: `${url} needs the scope "${fail.needed}" for ${operation}, beyond the token's "${fail.held}"; this client does not ask for more scope on its own (enable step-up, or configure the scope it requests)`,
      })
    case "step-up-limit":
      return new AuthError({
        step: "step-up",
        reason: "step-up-limit",
        url,
        status: 403,
        message: `${url} still answers 403 insufficient_scope for ${operation} after ${fail.attempts} authorization attempt${fail.attempts === 1 ? "" : "s"} for this operation (limit ${policy.maxStepUpAttempts}); giving up (the server may not grant the scopes it asks for)`,
      })
    case "unauthorized":
      return new AuthError({
        step: "request",
        reason: "unauthorized",
        url,
        status: 401,
        message: `${url} rejected the token obtained by a fresh authorization; the server and its authorization server disagree about the token (audience, issuer or scope)`,
      })
  }
}
