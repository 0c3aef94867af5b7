import type { Challenge } from "@keyway/core"
import { describe, expect, it } from "vitest"
import {
  type Event,
  failure,
  initial,
  maxSends,
  type Policy,
  type Sent,
  type State,
  type Step,
  transition,
} from "../src/internal/transitions.js"

const policy: Policy = { maxStepUpAttempts: 3, stepUp: true }
const noStepUp: Policy = { maxStepUpAttempts: 3, stepUp: false }

const token: Sent = { accessToken: "at-1", scope: "tools:read offline_access", refreshable: true }
const noRefresh: Sent = { ...token, refreshable: false }
const invalidToken: Challenge.BearerParams = { error: "invalid_token", resource_metadata: "http://rs/.well-known/prm" }
const insufficient: Challenge.BearerParams = { error: "insufficient_scope", scope: "tools:write" }

/** A response event: a 200 to a request sent without a token unless told otherwise. */
const response = (facts: Partial<Omit<Extract<Event, { _tag: "Response" }>, "_tag">>): Event => ({
  _tag: "Response",
  status: 200,
  challenge: undefined,
  foreign: false,
  sent: undefined,
  resendAsked: false,
  stepUps: 0,
  ...facts,
})

/** The state after a send with `sent` answered 401 with `challenge`. */
const after401 = (sent: Sent | undefined, more: Partial<State> = {}): State => ({
  ...initial,
  sends: 1,
  sent,
  challenge: invalidToken,
  ...more,
})

interface Row {
  readonly name: string
  readonly policy?: Policy
  readonly state: State
  readonly event: Event
  readonly step: Step
  /** The fields of the state left that the row changes (besides what a response records). */
  readonly state_?: Partial<State>
}

const rows: ReadonlyArray<Row> = [
  // Any answer but 401 and 403 is the caller's.
  {
    name: "a 200 is returned and clears the step-up count",
    state: initial,
    event: response({ status: 200, sent: token }),
    step: { _tag: "Return", ok: true },
  },
  {
    name: "a 204 is returned and clears the step-up count",
    state: initial,
    event: response({ status: 204, sent: token }),
    step: { _tag: "Return", ok: true },
  },
  {
    name: "a 307 is returned as it is",
    state: initial,
    event: response({ status: 307, sent: token }),
    step: { _tag: "Return", ok: false },
  },
  {
    name: "a 500 is returned as it is",
    state: initial,
    event: response({ status: 500, sent: token }),
    step: { _tag: "Return", ok: false },
  },
  // An extension's resend (DPoP nonce), once.
  {
    name: "an extension asks for a resend: resend once",
    state: initial,
    event: response({ status: 401, challenge: invalidToken, sent: token, resendAsked: true }),
    step: { _tag: "Resend" },
    state_: { resent: true },
  },
  {
    name: "an extension asks again after its resend: the answer is handled",
    state: { ...initial, sends: 1, resent: true },
    event: response({ status: 200, sent: token, resendAsked: true }),
    step: { _tag: "Return", ok: true },
  },
  {
    name: "an extension's ask is not heeded for a request sent without a token",
    state: initial,
    event: response({ status: 200, resendAsked: true }),
    step: { _tag: "Return", ok: true },
  },
  // 403.
  {
    name: "403 without a challenge is returned",
    state: initial,
    event: response({ status: 403, sent: token }),
    step: { _tag: "Return", ok: false },
  },
  {
    name: "403 with another error than insufficient_scope is returned",
    state: initial,
    event: response({ status: 403, challenge: invalidToken, sent: token }),
    step: { _tag: "Return", ok: false },
  },
  {
    name: "403 insufficient_scope to a request without a token is returned",
    state: initial,
    event: response({ status: 403, challenge: insufficient }),
    step: { _tag: "Return", ok: false },
  },
  {
    name: "403 insufficient_scope steps up for the union of held and challenged scopes",
    state: initial,
    event: response({ status: 403, challenge: insufficient, sent: token, stepUps: 2 }),
    step: { _tag: "Authorize", challenge: insufficient, scope: "tools:read offline_access tools:write", force: false },
  },
  {
    name: "403 insufficient_scope with no scope named steps up for the held scope",
    state: initial,
    event: response({ status: 403, challenge: { error: "insufficient_scope" }, sent: token }),
    step: {
      _tag: "Authorize",
      challenge: { error: "insufficient_scope" },
      scope: "tools:read offline_access",
      force: false,
    },
  },
  {
    name: "403 insufficient_scope at the limit fails with step-up-limit",
    state: initial,
    event: response({ status: 403, challenge: insufficient, sent: token, stepUps: 3 }),
    step: { _tag: "Fail", reason: "step-up-limit", attempts: 3 },
  },
  {
    name: "403 insufficient_scope past the limit (a 401's authorization counted) fails with the count",
    state: initial,
    event: response({ status: 403, challenge: insufficient, sent: token, stepUps: 4 }),
    step: { _tag: "Fail", reason: "step-up-limit", attempts: 4 },
  },
  {
    name: "403 insufficient_scope with step-up off fails with insufficient-scope",
    policy: noStepUp,
    state: initial,
    event: response({ status: 403, challenge: insufficient, sent: token }),
    step: { _tag: "Fail", reason: "insufficient-scope", needed: "tools:write", held: "tools:read offline_access" },
  },
  {
    name: "403 insufficient_scope naming no scope with step-up off fails with an empty needed scope",
    policy: noStepUp,
    state: initial,
    event: response({ status: 403, challenge: { error: "insufficient_scope" }, sent: token }),
    step: { _tag: "Fail", reason: "insufficient-scope", needed: "", held: "tools:read offline_access" },
  },
  // 401.
  {
    name: "401 with a challenge for another scheme only is returned",
    state: initial,
    event: response({ status: 401, foreign: true, sent: token }),
    step: { _tag: "Return", ok: false },
  },
  {
    name: "401 to a request with a token: check the held token before refreshing",
    state: initial,
    event: response({ status: 401, challenge: invalidToken, sent: token }),
    step: { _tag: "CheckHeld", before: "refresh" },
  },
  {
    name: "401 without a challenge to a request with a token: check the held token before refreshing",
    state: initial,
    event: response({ status: 401, sent: token }),
    step: { _tag: "CheckHeld", before: "refresh" },
  },
  {
    name: "401 to a request without a token: check the held token before authorizing",
    state: initial,
    event: response({ status: 401, challenge: invalidToken }),
    step: { _tag: "CheckHeld", before: "authorize" },
    state_: { authorized: true },
  },
  {
    name: "401 to a request without a token after this request's authorization fails with unauthorized",
    state: { ...initial, sends: 2, authorized: true },
    event: response({ status: 401, challenge: invalidToken }),
    step: { _tag: "Fail", reason: "unauthorized" },
  },
  // The held token, before a refresh.
  {
    name: "another request replaced the token: retry with theirs",
    state: after401(token),
    event: { _tag: "Held", before: "refresh", accessToken: "at-2" },
    step: { _tag: "Retry" },
  },
  {
    name: "the token is still held and refreshable: refresh",
    state: after401(token),
    event: { _tag: "Held", before: "refresh", accessToken: "at-1" },
    step: { _tag: "Refresh" },
    state_: { refreshed: true },
  },
  {
    name: "no token is held (forgotten meanwhile) and the sent one is refreshable: refresh",
    state: after401(token),
    event: { _tag: "Held", before: "refresh", accessToken: undefined },
    step: { _tag: "Refresh" },
    state_: { refreshed: true },
  },
  {
    name: "the token is still held, refreshed once already: authorize",
    state: after401(token, { refreshed: true }),
    event: { _tag: "Held", before: "refresh", accessToken: "at-1" },
    step: { _tag: "CheckHeld", before: "authorize" },
    state_: { authorized: true },
  },
  {
    name: "the token is still held, no refresh token: authorize",
    state: after401(noRefresh),
    event: { _tag: "Held", before: "refresh", accessToken: "at-1" },
    step: { _tag: "CheckHeld", before: "authorize" },
    state_: { authorized: true },
  },
  {
    name: "the token is still held, refreshed and authorized already: fail with unauthorized",
    state: after401(token, { refreshed: true, authorized: true }),
    event: { _tag: "Held", before: "refresh", accessToken: "at-1" },
    step: { _tag: "Fail", reason: "unauthorized" },
  },
  // The refresh.
  {
    name: "the refresh got a token: retry with it",
    state: after401(token, { refreshed: true }),
    event: { _tag: "Refreshed", ok: true },
    step: { _tag: "Retry" },
  },
  {
    name: "the refresh found the grant dead: authorize",
    state: after401(token, { refreshed: true }),
    event: { _tag: "Refreshed", ok: false },
    step: { _tag: "CheckHeld", before: "authorize" },
    state_: { authorized: true },
  },
  {
    name: "the refresh found the grant dead after this request's authorization: fail with unauthorized",
    state: after401(token, { refreshed: true, authorized: true }),
    event: { _tag: "Refreshed", ok: false },
    step: { _tag: "Fail", reason: "unauthorized" },
  },
  // The held token, before authorizing.
  {
    name: "another request stored a token meanwhile: retry with it before asking the user",
    state: after401(undefined, { authorized: true }),
    event: { _tag: "Held", before: "authorize", accessToken: "at-2" },
    step: { _tag: "Retry" },
  },
  {
    name: "no token held and none sent: authorize with the challenge, discovery documents as cached",
    state: after401(undefined, { authorized: true }),
    event: { _tag: "Held", before: "authorize", accessToken: undefined },
    step: { _tag: "Authorize", challenge: invalidToken, scope: undefined, force: false },
  },
  {
    name: "the rejected token is still held: authorize again, discovery documents fetched anew",
    state: after401(token, { refreshed: true, authorized: true }),
    event: { _tag: "Held", before: "authorize", accessToken: "at-1" },
    step: { _tag: "Authorize", challenge: invalidToken, scope: undefined, force: true },
  },
  {
    name: "the rejected token is gone (a dead grant): authorize again, discovery documents fetched anew",
    state: after401(token, { refreshed: true, authorized: true }),
    event: { _tag: "Held", before: "authorize", accessToken: undefined },
    step: { _tag: "Authorize", challenge: invalidToken, scope: undefined, force: true },
  },
  {
    name: "a 401 without a challenge: authorize without one",
    state: after401(undefined, { authorized: true, challenge: undefined }),
    event: { _tag: "Held", before: "authorize", accessToken: undefined },
    step: { _tag: "Authorize", challenge: undefined, scope: undefined, force: false },
  },
]

describe("transition", () => {
  it.each(rows.map((row) => [row.name, row] as const))("%s", (_, row) => {
    const { state, step } = transition(row.policy ?? policy, row.state, row.event)
    expect(step).toEqual(row.step)
    const recorded =
      row.event._tag === "Response"
        ? { sends: row.state.sends + 1, sent: row.event.sent, challenge: row.event.challenge }
        : {}
    expect(state).toEqual({ ...row.state, ...recorded, ...row.state_ })
  })

  it("has a row for every step", () => {
    const steps = new Set(rows.map((row) => (row.step._tag === "Fail" ? `Fail ${row.step.reason}` : row.step._tag)))
    expect([...steps].sort()).toEqual([
      "Authorize",
      "CheckHeld",
      "Fail insufficient-scope",
      "Fail step-up-limit",
      "Fail unauthorized",
      "Refresh",
      "Resend",
      "Retry",
      "Return",
    ])
  })
})

describe("maxSends", () => {
  it("is the first send, the extension's resend, one after a refresh, one after a 401's authorization, and one after each step-up", () => {
    expect(maxSends({ maxStepUpAttempts: 3, stepUp: true })).toBe(7)
    expect(maxSends({ maxStepUpAttempts: 1, stepUp: true })).toBe(5)
  })

  it("bounds a request alone: a 401 refreshed, a 401 authorized and step-ups to the limit end in a failure before it", () => {
    // The longest run one request can make on its own, each event answered as the fetch loop answers it.
    const limited: Policy = { maxStepUpAttempts: 3, stepUp: true }
    let state = initial
    let stepUps = 0
    const steps: Array<string> = []
    const run = (event: Event) => {
      const next = transition(limited, state, event)
      state = next.state
      steps.push(next.step._tag === "Fail" ? `Fail ${next.step.reason}` : next.step._tag)
      if (next.step._tag === "Authorize") stepUps++
    }
    run(response({ status: 401, challenge: invalidToken, sent: token, resendAsked: true }))
    run(response({ status: 401, challenge: invalidToken, sent: token }))
    run({ _tag: "Held", before: "refresh", accessToken: "at-1" })
    run({ _tag: "Refreshed", ok: true })
    const fresh: Sent = { ...token, accessToken: "at-2" }
    run(response({ status: 401, challenge: invalidToken, sent: fresh }))
    run({ _tag: "Held", before: "refresh", accessToken: "at-2" })
    run({ _tag: "Held", before: "authorize", accessToken: "at-2" })
    for (let i = 0; i < 3; i++) run(response({ status: 403, challenge: insufficient, sent: fresh, stepUps }))
    expect(steps).toEqual([
      "Resend",
      "CheckHeld",
      "Refresh",
      "Retry",
      "CheckHeld",
      "CheckHeld",
      "Authorize",
      "Authorize",
      "Authorize",
      "Fail step-up-limit",
    ])
    expect(state.sends).toBe(6)
    expect(state.sends).toBeLessThan(maxSends(limited))
  })
})

describe("failure", () => {
  const url = "http://127.0.0.1:1/mcp"
  it.each([
    [
      { _tag: "Fail", reason: "insufficient-scope", needed: "tools:write", held: "tools:read" } as const,
      "step-up",
      403,
      `${url} needs the scope "tools:write" for tools/call admin, beyond the token's "tools:read"; this client does not ask for more scope on its own (enable step-up, or configure the scope it requests)`,
    ],
    [
      { _tag: "Fail", reason: "step-up-limit", attempts: 1 } as const,
      "step-up",
      403,
      `${url} still answers 403 insufficient_scope for tools/call admin after 1 authorization attempt for this operation (limit 3); giving up (the server may not grant the scopes it asks for)`,
    ],
    [
      { _tag: "Fail", reason: "step-up-limit", attempts: 3 } as const,
      "step-up",
      403,
      `${url} still answers 403 insufficient_scope for tools/call admin after 3 authorization attempts for this operation (limit 3); giving up (the server may not grant the scopes it asks for)`,
    ],
    [
      { _tag: "Fail", reason: "unauthorized" } as const,
      "request",
      401,
      `${url} rejected the token obtained by a fresh authorization; the server and its authorization server disagree about the token (audience, issuer or scope)`,
    ],
  ])("%o", (fail, step, status, message) => {
    const error = failure(policy, fail, url, "tools/call admin")
    expect({ step: error.step, reason: error.reason, url: error.url, status: error.status }).toEqual({
      step,
      reason: fail.reason,
      url,
      status,
    })
    expect(error.message).toBe(message)
  })
})
