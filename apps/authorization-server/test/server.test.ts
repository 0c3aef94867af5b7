import { stat } from "node:fs/promises"
import { join } from "node:path"
import { DatabaseSync } from "node:sqlite"
import { UserAuthenticator } from "@keyway/authorization-server"
import { Pkce } from "@keyway/core"
import { describe, expect, it } from "vitest"
import { type AppConfig, type RunningAuthorizationServer, startAuthorizationServer } from "../src/index.js"
import { testCleanups } from "./support/cleanup.js"
import {
  codeFlow,
  eventually,
  login,
  PASSWORD,
  REDIRECT_URI,
  RESOURCE,
  refresh,
  registerClient,
  SCOPES,
} from "./support/flow.js"

const { defer, dir } = testCleanups()

const base = (dataDir: string): AppConfig => ({
  port: 0,
  dataDir,
  users: [{ username: "alice", password: PASSWORD, displayName: "Alice" }],
  resources: [{ uri: RESOURCE, name: "Notes", scopes: SCOPES }],
})

const start = async (config: AppConfig, log: Array<string> = []): Promise<RunningAuthorizationServer> => {
  const running = await startAuthorizationServer(config, { log: (line) => log.push(line) })
  defer(running.close)
  return running
}

describe("startAuthorizationServer", () => {
  it("serves metadata for the default loopback issuer, with registration on by default", async () => {
    const log: Array<string> = []
    const as = await start(base(await dir()), log)
    expect(as.issuer).toBe(`http://127.0.0.1:${as.port}`)
    const metadata = (await (await fetch(`${as.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      unknown
    >
    expect(metadata).toMatchObject({
      issuer: as.issuer,
      authorization_endpoint: `${as.issuer}/authorize`,
      token_endpoint: `${as.issuer}/token`,
      registration_endpoint: `${as.issuer}/register`,
      jwks_uri: `${as.issuer}/jwks`,
      code_challenge_methods_supported: ["S256"],
    })
    expect(log).toContain(
      `warning: DEVELOPMENT MODE: the authorization server runs with the insecure http issuer ${as.issuer}/. ` +
        "Never use this outside local development.",
    )
    expect(log).toContain(
      `listening on http://127.0.0.1:${as.port}, issuer ${as.issuer}; resources ${RESOURCE}; dynamic registration on`,
    )
  })

  it("turns dynamic registration off on request", async () => {
    const as = await start({ ...base(await dir()), registration: false })
    const metadata = (await (await fetch(`${as.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      unknown
    >
    expect(metadata.registration_endpoint).toBeUndefined()
    expect((await fetch(`${as.issuer}/register`, { method: "POST", body: "{}" })).status).toBe(404)
  })

  it("creates the SQLite database in a new owner-only data directory", async () => {
    const dataDir = join(await dir(), "nested", "data")
    await start(base(dataDir))
    expect((await stat(dataDir)).mode & 0o777).toBe(0o700)
    expect((await stat(join(dataDir, "keyway.db"))).isFile()).toBe(true)
  })

  it("uses an explicit database path instead of the data directory", async () => {
    const d = await dir()
    const log: Array<string> = []
    await start({ ...base(join(d, "unused")), database: join(d, "db", "as.sqlite") }, log)
    expect((await stat(join(d, "db", "as.sqlite"))).isFile()).toBe(true)
    await expect(stat(join(d, "unused"))).rejects.toThrow(/ENOENT/)
    expect(log).toContain(`database ${join(d, "db", "as.sqlite")}`)
  })

  it("keeps dynamically registered clients across a restart", async () => {
    const dataDir = await dir()
    const first = await startAuthorizationServer(base(dataDir), { log: () => undefined })
    const clientId = await registerClient(first.issuer)
    const port = first.port
    await first.close()
    const second = await start({ ...base(dataDir), port })
    expect(second.issuer).toBe(first.issuer)
    const tokens = await codeFlow(second.issuer, { clientId })
    expect(tokens.scope).toBe("notes:read")
    // Also refused when the client is unknown, so the success above is the stored registration at work.
    await expect(codeFlow(second.issuer, { clientId: "never-registered" })).rejects.toThrow("authorize answered 400")
  })

  it("signs users in with a configured passwordHash, and configured clients work", async () => {
    const as = await start({
      ...base(await dir()),
      users: [{ username: "bob", passwordHash: await UserAuthenticator.hashPassword("bob's long password") }],
      clients: [{ clientId: "keyway-cli", clientName: "Keyway CLI", redirectUris: [REDIRECT_URI] }],
    })
    const tokens = await codeFlow(as.issuer, {
      clientId: "keyway-cli",
      username: "bob",
      password: "bob's long password",
      scope: "notes:read notes:write",
    })
    expect(tokens.scope).toBe("notes:read notes:write")
    await expect(codeFlow(as.issuer, { clientId: "keyway-cli", username: "alice" })).rejects.toThrow(
      "login answered 401",
    )
  })
})

describe("scope limits", () => {
  it("a scope chosen at dynamic registration does not stop a later step-up (the library's rule)", async () => {
    const as = await start(base(await dir()))
    const response = await fetch(`${as.issuer}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        client_name: "Scoped",
        redirect_uris: [REDIRECT_URI],
        token_endpoint_auth_method: "none",
        scope: "notes:read",
      }),
    })
    expect(response.status).toBe(201)
    const { client_id } = (await response.json()) as { client_id: string }
    const tokens = await codeFlow(as.issuer, { clientId: client_id, scope: "notes:read notes:write" })
    expect(tokens.scope).toBe("notes:read notes:write")
  })

  it("the scope of a pre-registered client limits it: more is refused with invalid_scope", async () => {
    const as = await start({
      ...base(await dir()),
      clients: [{ clientId: "reader", redirectUris: [REDIRECT_URI], scope: "notes:read" }],
    })
    const url = new URL(`${as.issuer}/authorize`)
    for (const [k, v] of Object.entries({
      response_type: "code",
      client_id: "reader",
      redirect_uri: REDIRECT_URI,
      code_challenge: "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM",
      code_challenge_method: "S256",
      resource: RESOURCE,
      scope: "notes:read notes:write",
    }))
      url.searchParams.set(k, v)
    const refused = await fetch(url, { redirect: "manual" })
    expect(refused.status).toBe(302)
    const location = new URL(refused.headers.get("location") ?? "")
    expect(location.searchParams.get("error")).toBe("invalid_scope")
    expect(location.searchParams.get("error_description")).toBe("this client may not request notes:write")
    const tokens = await codeFlow(as.issuer, { clientId: "reader", scope: "notes:read" })
    expect(tokens.scope).toBe("notes:read")
  })
})

describe("logs", () => {
  it("tell what happens, readably, and never contain passwords, codes or tokens", async () => {
    const log: Array<string> = []
    const as = await start(base(await dir()), log)
    const clientId = await registerClient(as.issuer, "Notes CLI")
    const tokens = await codeFlow(as.issuer, { clientId, wrongPassword: "hunter2-wrong", scope: "notes:read" })
    const refreshed = await refresh(as.issuer, clientId, tokens.refresh_token)
    expect(refreshed.status).toBe(200)
    const rotated = (await refreshed.json()) as { access_token: string; refresh_token: string }
    // Within the reuse interval the rotated-out token gets the same successor (a retry after a lost answer).
    const retried = await refresh(as.issuer, clientId, tokens.refresh_token)
    expect(retried.status).toBe(200)
    const again = (await retried.json()) as { access_token: string; refresh_token: string }
    expect(again.refresh_token).toBe(rotated.refresh_token)
    const next = await refresh(as.issuer, clientId, rotated.refresh_token)
    expect(next.status).toBe(200)
    const third = (await next.json()) as { access_token: string; refresh_token: string }
    // A token two rotations back is reuse: refused, and the family revoked.
    expect((await refresh(as.issuer, clientId, tokens.refresh_token)).status).toBe(400)

    const about = `client ${JSON.stringify(clientId)}, scope "notes:read", resource ${RESOURCE}`
    const events = log.filter((line) => !/^(GET|POST) /.test(line))
    const refreshedLine = `token refreshed: grant refresh_token, subject "alice", ${about}, expires in 300 s, with a refresh token`
    expect(events.slice(-11)).toEqual([
      `client registered: ${JSON.stringify(clientId)} ("Notes CLI"), auth none, redirect URIs ${REDIRECT_URI}`,
      'login failed: "alice" (wrong username or password)',
      `login ok: "alice" (${about})`,
      `consent granted: user "alice", ${about}`,
      `authorization code issued: user "alice", ${about}`,
      `token issued: grant authorization_code, subject "alice", ${about}, expires in 300 s, with a refresh token`,
      refreshedLine,
      refreshedLine,
      refreshedLine,
      `refresh token reuse detected: subject "alice", client ${JSON.stringify(clientId)}; the token's whole family is revoked`,
      "token request refused: invalid_grant (the refresh token was already used; its whole family is now revoked), " +
        `grant "refresh_token", client ${JSON.stringify(clientId)}`,
    ])
    expect(log.filter((line) => /^(GET|POST) /.test(line)).map((line) => line.replace(/ \d+ms$/, ""))).toEqual([
      "POST /register 201",
      "GET /authorize 200",
      "POST /authorize/login 401",
      "POST /authorize/login 303",
      "GET /authorize 200",
      "POST /authorize/consent 303",
      "POST /token 200",
      "POST /token 200",
      "POST /token 200",
      "POST /token 200",
      "POST /token 400",
    ])
    const secrets = [
      PASSWORD,
      "hunter2-wrong",
      tokens.code,
      tokens.access_token,
      tokens.refresh_token,
      rotated.access_token,
      rotated.refresh_token,
      again.access_token,
      third.access_token,
      third.refresh_token,
    ]
    for (const line of log) for (const secret of secrets) expect(line).not.toContain(secret)
    // No query string either (it carries the code challenge and state).
    for (const line of log) expect(line).not.toMatch(/code_challenge|state=/)
  })
})

describe("logs of refusals", () => {
  it("report a denied consent and an unknown client without the query string", async () => {
    const log: Array<string> = []
    const as = await start(base(await dir()), log)
    const clientId = await registerClient(as.issuer)
    await expect(codeFlow(as.issuer, { clientId, decision: "deny" })).rejects.toThrow("no code after consent (303)")
    expect(log).toContain(
      `consent denied: user "alice", client ${JSON.stringify(clientId)}, scope "notes:read", resource ${RESOURCE}`,
    )
    const unknown = await fetch(`${as.issuer}/authorize?client_id=nobody&response_type=code&state=secret-state`)
    expect(unknown.status).toBe(400)
    expect(log).toContain(
      "authorization refused on the error page: invalid_client (the client_id is not known to this server), " +
        'client "nobody", redirect URI (none sent)',
    )
    expect(log.join("\n")).not.toContain("secret-state")
  })

  it("say why an authorization request was refused, with the client ID and redirect URI it carried", async () => {
    const log: Array<string> = []
    const as = await start(base(await dir()), log)
    const clientId = await registerClient(as.issuer)
    const pkce = await Pkce.generate()
    const authorize = async (params: Record<string, string | undefined>) => {
      const url = new URL(`${as.issuer}/authorize`)
      const all: Record<string, string | undefined> = {
        response_type: "code",
        client_id: clientId,
        redirect_uri: REDIRECT_URI,
        code_challenge: pkce.challenge,
        code_challenge_method: "S256",
        resource: RESOURCE,
        scope: "notes:read",
        state: "secret-state",
        ...params,
      }
      for (const [name, value] of Object.entries(all)) if (value !== undefined) url.searchParams.set(name, value)
      return (await fetch(url, { redirect: "manual" })).status
    }
    const client = JSON.stringify(clientId)
    const sent = JSON.stringify(REDIRECT_URI)
    for (const [params, status, line] of [
      [
        { redirect_uri: "http://127.0.0.1:8080/elsewhere" },
        400,
        "authorization refused on the error page: invalid_request (redirect_uri does not match any URI registered " +
          `for this client), client ${client}, redirect URI "http://127.0.0.1:8080/elsewhere"`,
      ],
      [
        { client_id: 'forged"\nPOST /token 200 1ms' },
        400,
        "authorization refused on the error page: invalid_client (the client_id is not known to this server), " +
          `client "forged\\"\\nPOST /token 200 1ms", redirect URI ${sent}`,
      ],
      [
        { code_challenge: undefined },
        302,
        `authorization refused: invalid_request (code_challenge is required (PKCE)), client ${client}, redirect URI ${sent}`,
      ],
      [
        { code_challenge_method: "plain" },
        302,
        "authorization refused: invalid_request (code_challenge_method plain is not supported; use S256), " +
          `client ${client}, redirect URI ${sent}`,
      ],
      [
        { resource: "http://127.0.0.1:9999/mcp" },
        302,
        "authorization refused: invalid_target (this server does not issue tokens for that resource), " +
          `client ${client}, redirect URI ${sent}`,
      ],
      [
        { scope: "notes:admin" },
        302,
        "authorization refused: invalid_scope (scope notes:admin is not defined for this resource), " +
          `client ${client}, redirect URI ${sent}`,
      ],
    ] as const) {
      expect(await authorize(params)).toBe(status)
      expect(log.at(-2)).toBe(line)
    }
    expect(log.join("\n")).not.toContain("secret-state")
  })
})

describe("operational options reach the library", () => {
  const keyCount = async (issuer: string) =>
    ((await (await fetch(`${issuer}/jwks`)).json()) as { keys: ReadonlyArray<unknown> }).keys.length

  it("signingKeys: a short rotateEvery publishes a second key while the server runs", async () => {
    const as = await start({ ...base(await dir()), signingKeys: { rotateEvery: 1, publishAhead: 0, checkEvery: 0.05 } })
    expect(await keyCount(as.issuer)).toBe(1)
    await eventually(async () => (await keyCount(as.issuer)) === 2, "a second signing key")
  })

  it("maintenance: a short purgeEvery deletes a record that expired while the server runs", async () => {
    const dataDir = await dir()
    await start({ ...base(dataDir), maintenance: { purgeEvery: 0.05 } })
    const revokedIds = () => {
      const db = new DatabaseSync(join(dataDir, "keyway.db"))
      try {
        db.exec("PRAGMA busy_timeout = 5000")
        return Number((db.prepare("SELECT count(*) AS n FROM revoked_access_tokens").get() as { n: number }).n)
      } finally {
        db.close()
      }
    }
    // Written from outside, as another instance sharing the file would. It expires a second from now, so the purge
    // round run at start cannot be what deletes it: only a later round, which the default (300 s) would not reach.
    const db = new DatabaseSync(join(dataDir, "keyway.db"))
    db.exec("PRAGMA busy_timeout = 5000")
    db.prepare("INSERT INTO revoked_access_tokens (jti, expires_at) VALUES (?, ?)").run(
      "soon-expired-jti",
      Math.floor(Date.now() / 1000) + 1,
    )
    db.close()
    expect(revokedIds()).toBe(1)
    await eventually(() => revokedIds() === 0, "the expired record purged")
  })

  it("rateLimits: registrations counted per the address the proxy wrote in clientAddressHeader", async () => {
    const as = await start({
      ...base(await dir()),
      rateLimits: { registration: { max: 1, window: 600 }, clientAddressHeader: "x-forwarded-for" },
    })
    const register = (forwardedFor: string) =>
      fetch(`${as.issuer}/register`, {
        method: "POST",
        headers: { "content-type": "application/json", "x-forwarded-for": forwardedFor },
        body: JSON.stringify({ redirect_uris: [REDIRECT_URI], token_endpoint_auth_method: "none" }),
      })
    // The window runs on the server's wall clock: the wait it names is 600 s less the whole seconds that passed.
    const before = Math.floor(Date.now() / 1000)
    expect((await register("10.0.0.1, 198.51.100.7")).status).toBe(201)
    // The last entry is the one the proxy appended: what a client wrote before it does not matter.
    const refused = await register("203.0.113.9, 198.51.100.7")
    const passed = Math.floor(Date.now() / 1000) - before
    expect(refused.status).toBe(429)
    const retryAfter = Number(refused.headers.get("retry-after"))
    expect(retryAfter).toBeGreaterThanOrEqual(600 - passed)
    expect(retryAfter).toBeLessThanOrEqual(600)
    expect(await refused.json()).toEqual({
      error: "invalid_request",
      error_description: `too many registrations from this address: rateLimits.registration allows 1 in 600 seconds; retry after ${retryAfter} seconds`,
    })
    expect((await register("198.51.100.8")).status).toBe(201)
  })

  it("rateLimits: a locked sign-in is answered 429 and logged as refused", async () => {
    const log: Array<string> = []
    const as = await start({ ...base(await dir()), rateLimits: { login: { account: { freeAttempts: 1 } } } }, log)
    const clientId = await registerClient(as.issuer)
    await expect(login(as.issuer, clientId, "wrong")).rejects.toThrow("login answered 429")
    expect(log).toContain('login refused: "alice" (too many failed attempts; retry after 60 s)')
  })

  it("sessionSecret: a login session outlives a restart with the same secret, and not without one", async () => {
    const dataDir = await dir()
    const sessionSecret = "an-app-test-secret-of-32-characters-or-more"
    const first = await startAuthorizationServer({ ...base(dataDir), sessionSecret }, { log: () => undefined })
    const clientId = await registerClient(first.issuer)
    const { cookie, consentUrl } = await login(first.issuer, clientId)
    const port = first.port
    await first.close()
    const page = async (config: AppConfig) => {
      const as = await startAuthorizationServer({ ...config, port }, { log: () => undefined })
      try {
        const response = await fetch(consentUrl, { headers: { cookie }, redirect: "manual" })
        expect(response.status).toBe(200)
        return await response.text()
      } finally {
        await as.close()
      }
    }
    const same = await page({ ...base(dataDir), sessionSecret })
    expect(same).toContain('name="decision"')
    expect(same).not.toContain('name="password"')
    const none = await page(base(dataDir))
    expect(none).toContain('name="password"')
    expect(none).not.toContain('name="decision"')
  })
})
