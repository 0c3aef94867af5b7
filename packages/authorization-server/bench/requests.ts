/**
 * What both load generators of bench/token-endpoint.ts share: the scenario they read from stdin, the server's CPU
 * from its control port, a token request, and one warm re-authorization made with fetch (the refresh families are
 * opened with it before the clock starts).
 */

/** The scenario a load generator runs (stdin, JSON). */
export interface Scenario {
  readonly kind: "reauth" | "refresh"
  readonly authorization: string
  readonly token: string
  readonly cpu: string
  readonly cookie: string
  readonly clientId: string
  readonly redirectUri: string
  readonly resource: string
  readonly scope: string
  readonly verifier: string
  readonly challenge: string
  readonly concurrency: number
  readonly durationMs: number
}

/** What a load generator prints (stdout, JSON). */
export interface LoadResult {
  readonly ok: number
  readonly failed: number
  readonly firstFailure?: string
  readonly elapsedMs: number
  readonly cpuMicros: number
  readonly threadMicros: number
  readonly p50: number
  readonly p99: number
}

export const readScenario = async (): Promise<Scenario> => {
  let input = ""
  for await (const chunk of process.stdin) input += (chunk as Buffer).toString("utf8")
  return JSON.parse(input) as Scenario
}

/** The authorization request of a warm re-authorization, with its own `state`. */
export const authorizationQuery = (s: Scenario, state: string): string =>
  new URLSearchParams({
    response_type: "code",
    client_id: s.clientId,
    redirect_uri: s.redirectUri,
    scope: s.scope,
    state,
    code_challenge: s.challenge,
    code_challenge_method: "S256",
    resource: s.resource,
  }).toString()

/** The code redemption that follows it. */
export const redemption = (s: Scenario, code: string): Record<string, string> => ({
  grant_type: "authorization_code",
  code,
  code_verifier: s.verifier,
  redirect_uri: s.redirectUri,
  client_id: s.clientId,
  resource: s.resource,
})

/** A refresh of `token`. */
export const refresh = (s: Scenario, token: string): Record<string, string> => ({
  grant_type: "refresh_token",
  refresh_token: token,
  client_id: s.clientId,
  resource: s.resource,
})

export const requests = (s: Scenario) => {
  const serverCpu = async () => (await (await fetch(s.cpu)).json()) as { cpu: number; thread: number }
  const post = async (body: Record<string, string>) => {
    const response = await fetch(s.token, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams(body).toString(),
    })
    const json = (await response.json()) as { access_token?: string; refresh_token?: string; error?: string }
    return { ok: response.status === 200 && typeof json.access_token === "string", json, status: response.status }
  }
  let n = 0
  /** One warm re-authorization: the code from the redirect, redeemed. */
  const reauth = async () => {
    const answer = await fetch(`${s.authorization}?${authorizationQuery(s, `s${++n}`)}`, {
      headers: { cookie: s.cookie },
      redirect: "manual",
    })
    await answer.arrayBuffer()
    const location = answer.headers.get("location")
    const code = location === null ? null : new URL(location, s.authorization).searchParams.get("code")
    if (code === null) return { ok: false, status: answer.status, json: { location } as { refresh_token?: string } }
    return post(redemption(s, code))
  }
  return { serverCpu, post, reauth }
}
