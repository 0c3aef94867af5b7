import { Result } from "effect"
import { describe, expect, it } from "vitest"
import { Grant, TokenExchange } from "../src/index.js"

const policy: TokenExchange.RequestPolicy = {
  subjectTokenTypes: [Grant.ACCESS_TOKEN_TYPE, Grant.JWT_TOKEN_TYPE],
  requestedTokenTypes: [Grant.ACCESS_TOKEN_TYPE],
  actorTokenTypes: [Grant.ACCESS_TOKEN_TYPE],
}
const good: Record<string, string> = {
  grant_type: Grant.TOKEN_EXCHANGE,
  subject_token: "-subject",
  subject_token_type: Grant.ACCESS_TOKEN_TYPE,
  resource: "https://calendar.example.com/api",
}
const parse = (fields: Record<string, string | undefined>, p: TokenExchange.RequestPolicy = policy) => {
  const form = new Map<string, string>()
  for (const [k, v] of Object.entries({ ...good, ...fields })) if (v !== undefined) form.set(k, v)
  return TokenExchange.parseRequest(form, p)
}
const problem = (code: TokenExchange.RequestProblem["code"], description: string) =>
  Result.fail<TokenExchange.RequestProblem>({ code, description })

describe("TokenExchange.request (RFC 8693 §2.1)", () => {
  it("writes grant_type and every given parameter, and leaves absent ones out", () => {
    expect(
      TokenExchange.request({
        subjectToken: "s",
        subjectTokenType: Grant.ACCESS_TOKEN_TYPE,
        resource: "https://r.example/",
        scope: "a b",
      }),
    ).toEqual({
      grant_type: Grant.TOKEN_EXCHANGE,
      resource: "https://r.example/",
      scope: "a b",
      subject_token: "s",
      subject_token_type: Grant.ACCESS_TOKEN_TYPE,
    })
    const all = TokenExchange.request({
      subjectToken: "s",
      subjectTokenType: Grant.ID_TOKEN_TYPE,
      requestedTokenType: Grant.ID_JAG_TOKEN_TYPE,
      audience: "https://as.example",
      resource: "https://r.example/",
      actorToken: "a",
      actorTokenType: Grant.JWT_TOKEN_TYPE,
    })
    expect(Object.keys(all)).toEqual([
      "grant_type",
      "resource",
      "audience",
      "requested_token_type",
      "subject_token",
      "subject_token_type",
      "actor_token",
      "actor_token_type",
    ])
  })
})

describe("TokenExchange.parseRequest (RFC 8693 §2.1, §2.2.2)", () => {
  it("accepts a well-formed request, a subject token starting with - included", () => {
    expect(parse({ scope: "calendar:read" })).toEqual(
      Result.succeed({
        subjectToken: "-subject",
        subjectTokenType: Grant.ACCESS_TOKEN_TYPE,
        requestedTokenType: undefined,
        audience: undefined,
        resource: "https://calendar.example.com/api",
        scope: "calendar:read",
        actorToken: undefined,
        actorTokenType: undefined,
      }),
    )
    const withActor = parse({ actor_token: "a", actor_token_type: Grant.ACCESS_TOKEN_TYPE })
    expect(Result.isSuccess(withActor) && withActor.success.actorToken).toBe("a")
  })

  it.each<[string, Record<string, string | undefined>, TokenExchange.RequestProblem["code"], string]>([
    ["no subject_token", { subject_token: undefined }, "invalid_request", "subject_token is missing"],
    ["an empty subject_token", { subject_token: "" }, "invalid_request", "subject_token is missing"],
    ["no subject_token_type", { subject_token_type: undefined }, "invalid_request", "subject_token_type is missing"],
    [
      "an unknown subject_token_type",
      { subject_token_type: Grant.ID_TOKEN_TYPE },
      "invalid_request",
      `subject_token_type must be one of ${Grant.ACCESS_TOKEN_TYPE}, ${Grant.JWT_TOKEN_TYPE}`,
    ],
    [
      "actor_token_type without actor_token",
      { actor_token_type: Grant.ACCESS_TOKEN_TYPE },
      "invalid_request",
      "actor_token_type is present without actor_token",
    ],
    ["actor_token without its type", { actor_token: "a" }, "invalid_request", "actor_token_type is missing"],
    [
      "an unknown actor_token_type",
      { actor_token: "a", actor_token_type: Grant.JWT_TOKEN_TYPE },
      "invalid_request",
      `actor_token_type must be ${Grant.ACCESS_TOKEN_TYPE}`,
    ],
    [
      "an unknown requested_token_type",
      { requested_token_type: Grant.ID_JAG_TOKEN_TYPE },
      "invalid_request",
      `requested_token_type must be ${Grant.ACCESS_TOKEN_TYPE}`,
    ],
    ["an empty audience", { audience: "" }, "invalid_request", "audience is missing"],
    ["an empty resource", { resource: "" }, "invalid_request", "resource is missing"],
    ["a scope with a backslash", { scope: "a\\b" }, "invalid_scope", "scope is malformed"],
    ["a scope with a quote", { scope: 'a"' }, "invalid_scope", "scope is malformed"],
  ])("refuses %s", (_, fields, code, description) => {
    expect(parse(fields)).toEqual(problem(code, description))
  })

  it("refuses an actor token where none is accepted, and requires what the policy requires", () => {
    const strict: TokenExchange.RequestPolicy = {
      subjectTokenTypes: [Grant.ID_TOKEN_TYPE],
      requestedTokenTypes: [Grant.ID_JAG_TOKEN_TYPE],
      requireAudience: true,
      requireResource: true,
    }
    const base = { subject_token_type: Grant.ID_TOKEN_TYPE, audience: "https://as.example" }
    expect(parse({ ...base, actor_token: "a", actor_token_type: Grant.JWT_TOKEN_TYPE }, strict)).toEqual(
      problem("invalid_request", "actor_token is not accepted here"),
    )
    expect(parse({ ...base, audience: undefined }, strict)).toEqual(problem("invalid_request", "audience is missing"))
    expect(parse({ ...base, resource: undefined }, strict)).toEqual(problem("invalid_request", "resource is missing"))
    expect(parse({ ...base, subject_token_type: Grant.ACCESS_TOKEN_TYPE }, strict)).toEqual(
      problem("invalid_request", `subject_token_type must be ${Grant.ID_TOKEN_TYPE}`),
    )
  })
})

describe("TokenExchange.actors (RFC 8693 §4.1)", () => {
  it("reads the chain, current actor first", () => {
    expect(TokenExchange.actors({ sub: "alice" })).toEqual(Result.succeed([]))
    expect(
      TokenExchange.actors({
        sub: "alice",
        act: { sub: "calendar-proxy", act: { sub: "notes-server", iss: "https://as.example", client_id: "n" } },
      }),
    ).toEqual(
      Result.succeed([{ sub: "calendar-proxy" }, { sub: "notes-server", iss: "https://as.example", client_id: "n" }]),
    )
  })

  it.each<[string, unknown, string]>([
    ["a string act", "notes", "act must be a JSON object"],
    ["an array act", [{ sub: "x" }], "act must be a JSON object"],
    ["null act", null, "act must be a JSON object"],
    ["an act without sub", { client_id: "x" }, "act.sub must be a non-empty string"],
    ["an empty sub", { sub: "" }, "act.sub must be a non-empty string"],
    ["a nested act with a numeric sub", { sub: "a", act: { sub: 1 } }, "act.act.sub must be a non-empty string"],
    ["a numeric iss", { sub: "a", iss: 1 }, "act.iss must be a string"],
    ["a numeric client_id", { sub: "a", client_id: 1 }, "act.client_id must be a string"],
  ])("refuses %s", (_, act, message) => {
    expect(TokenExchange.actors({ sub: "alice", act })).toEqual(Result.fail(message))
  })

  it("refuses a chain deeper than MAX_CHAIN and reads one exactly that deep", () => {
    const chain = (depth: number): Record<string, unknown> | undefined =>
      depth === 0 ? undefined : { sub: `a${depth}`, ...(depth > 1 ? { act: chain(depth - 1) } : {}) }
    const deep = TokenExchange.actors({ act: chain(TokenExchange.MAX_CHAIN) })
    expect(Result.isSuccess(deep) && deep.success.length).toBe(TokenExchange.MAX_CHAIN)
    expect(TokenExchange.actors({ act: chain(TokenExchange.MAX_CHAIN + 1) })).toEqual(
      Result.fail(`the act chain is longer than ${TokenExchange.MAX_CHAIN}`),
    )
  })
})

describe("TokenExchange.withActor (RFC 8693 §4.1)", () => {
  it("names the actor and nests the subject token's own act as the prior actor", () => {
    expect(TokenExchange.withActor({ sub: "notes" }, { sub: "alice" })).toEqual({ sub: "notes" })
    expect(TokenExchange.withActor({ sub: "calendar" }, { sub: "alice", act: { sub: "notes" } })).toEqual({
      sub: "calendar",
      act: { sub: "notes" },
    })
  })
})

describe("TokenExchange.mayAct (RFC 8693 §4.4)", () => {
  const actor = { sub: "notes", iss: "https://as.example" }
  it.each<[string, unknown, boolean]>([
    ["no may_act", undefined, true],
    ["may_act naming the actor", { sub: "notes" }, true],
    ["may_act naming the actor and its issuer", { sub: "notes", iss: "https://as.example" }, true],
    ["may_act naming another actor", { sub: "other" }, false],
    ["may_act naming another issuer", { sub: "notes", iss: "https://other.example" }, false],
    ["may_act naming a client the actor did not act through", { sub: "notes", client_id: "c" }, false],
    ["a malformed may_act", "notes", false],
    ["may_act without sub", { iss: "https://as.example" }, false],
  ])("%s: %s", (_, mayAct, expected) => {
    expect(
      TokenExchange.mayAct(mayAct === undefined ? { sub: "alice" } : { sub: "alice", may_act: mayAct }, actor),
    ).toBe(expected)
  })
})
