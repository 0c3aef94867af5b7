import { readFile } from "node:fs/promises"
import { join } from "node:path"
import { Pkce } from "@keyway/core"
import { postForm } from "@keyway/testing"
import { describe, expect, it } from "vitest"
import { type AppConfig, startAuthorizationServer } from "../src/index.js"
import { type AuditEvent, securityEventReceiver } from "../src/logging.js"
import { testCleanups } from "./support/cleanup.js"
import { PASSWORD, REDIRECT_URI, RESOURCE, registerClient, SCOPES } from "./support/flow.js"

const { defer, dir } = testCleanups()

const csrfOf = (html: string): string => /name="csrf_token" value="([^"]+)"/.exec(html)?.[1] ?? ""

const base = (dataDir: string): AppConfig => ({
  port: 0,
  dataDir,
  auditLog: join(dataDir, "audit.jsonl"),
  users: [{ username: "alice", password: PASSWORD, displayName: "Alice" }],
  resources: [{ uri: RESOURCE, name: "Notes", scopes: SCOPES }],
})

/** The audit log's lines without their time. */
const auditLines = async (dataDir: string) =>
  (await readFile(join(dataDir, "audit.jsonl"), "utf8"))
    .trimEnd()
    .split("\n")
    .map((line) => {
      const { time, ...rest } = JSON.parse(line) as Record<string, unknown>
      expect(time).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      return rest
    })

describe("the audit log and the log lines", () => {
  it("come from what the endpoints parsed, whether a body is chunked or has a Content-Length", async () => {
    const dataDir = await dir()
    const log: Array<string> = []
    const as = await startAuthorizationServer(base(dataDir), { log: (line) => log.push(line) })
    defer(as.close)
    const clientId = await registerClient(as.issuer, "Notes CLI")

    const pkce = await Pkce.generate()
    const authorize = new URL(`${as.issuer}/authorize`)
    for (const [name, value] of Object.entries({
      response_type: "code",
      client_id: clientId,
      redirect_uri: REDIRECT_URI,
      code_challenge: pkce.challenge,
      code_challenge_method: "S256",
      resource: RESOURCE,
      scope: "notes:read",
      state: "state-1",
    }))
      authorize.searchParams.set(name, value)
    const request = authorize.search.slice(1)
    const page = await fetch(authorize, { redirect: "manual" })
    let cookie = page.headers.getSetCookie()[0]?.split(";")[0] ?? ""
    let csrf = csrfOf(await page.text())

    for (const [framing, password] of [
      ["chunked", "wrong-chunked"],
      ["length", "wrong-length"],
    ] as const) {
      const failed = await postForm(
        `${as.issuer}/authorize/login`,
        framing,
        { csrf_token: csrf, request, username: "alice", password },
        { cookie },
      )
      expect(failed.status).toBe(401)
      csrf = csrfOf(failed.body)
    }
    const signedIn = await postForm(
      `${as.issuer}/authorize/login`,
      "chunked",
      { csrf_token: csrf, request, username: "alice", password: PASSWORD },
      { cookie },
    )
    expect(signedIn.status).toBe(303)
    cookie = signedIn.cookie ?? ""
    const consentPage = await fetch(new URL(signedIn.location ?? "", as.issuer), { headers: { cookie } })
    const consent = await postForm(
      `${as.issuer}/authorize/consent`,
      "chunked",
      { csrf_token: csrfOf(await consentPage.text()), request, decision: "approve" },
      { cookie },
    )
    expect(consent.status).toBe(303)
    const code = new URL(consent.location ?? "").searchParams.get("code") ?? ""

    const redeemed = await postForm(`${as.issuer}/token`, "chunked", {
      grant_type: "authorization_code",
      code,
      redirect_uri: REDIRECT_URI,
      client_id: clientId,
      code_verifier: pkce.verifier,
      resource: RESOURCE,
    })
    expect(redeemed.status).toBe(200)
    const tokens = JSON.parse(redeemed.body) as { access_token: string; refresh_token: string }
    const refreshedByLength = await postForm(`${as.issuer}/token`, "length", {
      grant_type: "refresh_token",
      refresh_token: tokens.refresh_token,
      client_id: clientId,
    })
    expect(refreshedByLength.status).toBe(200)
    const second = JSON.parse(refreshedByLength.body) as { access_token: string; refresh_token: string }
    const refreshedChunked = await postForm(`${as.issuer}/token`, "chunked", {
      grant_type: "refresh_token",
      refresh_token: second.refresh_token,
      client_id: clientId,
    })
    expect(refreshedChunked.status).toBe(200)
    const third = JSON.parse(refreshedChunked.body) as { access_token: string; refresh_token: string }
    const refused = await postForm(`${as.issuer}/token`, "chunked", {
      grant_type: "authorization_code",
      code,
      redirect_uri: REDIRECT_URI,
      client_id: clientId,
      code_verifier: pkce.verifier,
    })
    expect([refused.status, JSON.parse(refused.body)]).toEqual([
      400,
      {
        error: "invalid_grant",
        error_description: "the authorization code was already used; tokens issued from it are revoked",
      },
    ])
    const revoked = await postForm(`${as.issuer}/revoke`, "chunked", {
      token: third.refresh_token,
      token_type_hint: "refresh_token",
      client_id: clientId,
    })
    expect(revoked.status).toBe(200)
    await as.close()

    const asked = { client_id: clientId, resource: RESOURCE, scope: "notes:read" }
    const issued = { ...asked, subject: "alice", expires_in: 300, refresh_token_issued: true }
    expect(await auditLines(dataDir)).toEqual([
      {
        source: "server",
        event: "client_registered",
        client_id: clientId,
        client_name: "Notes CLI",
        token_endpoint_auth_method: "none",
        redirect_uris: [REDIRECT_URI],
      },
      { source: "server", event: "login_failed", reason: "wrong_credentials", username: "alice", client_id: clientId },
      { source: "server", event: "login_failed", reason: "wrong_credentials", username: "alice", client_id: clientId },
      { source: "server", event: "login_succeeded", username: "alice", subject: "alice", ...asked },
      { source: "server", event: "consent_given", subject: "alice", ...asked },
      { source: "server", event: "code_issued", subject: "alice", ...asked, consent: "given" },
      { source: "server", event: "token_issued", grant_type: "authorization_code", ...issued },
      { source: "server", event: "token_issued", grant_type: "refresh_token", ...issued },
      { source: "server", event: "token_issued", grant_type: "refresh_token", ...issued },
      {
        source: "server",
        event: "token_refused",
        error: "invalid_grant",
        description: "the authorization code was already used; tokens issued from it are revoked",
        grant_type: "authorization_code",
        client_id: clientId,
      },
      { source: "server", event: "token_revoked", client_id: clientId, token_type_hint: "refresh_token" },
    ])

    const about = `client ${JSON.stringify(clientId)}, scope "notes:read", resource ${RESOURCE}`
    // What the server logged while it served, without the request lines.
    const served = log.slice(log.findIndex((line) => line.startsWith("audit log ")) + 1, log.indexOf("stopped"))
    expect(served.filter((line) => !/^(GET|POST) /.test(line))).toEqual([
      `client registered: ${JSON.stringify(clientId)} ("Notes CLI"), auth none, redirect URIs ${REDIRECT_URI}`,
      'login failed: "alice" (wrong username or password)',
      'login failed: "alice" (wrong username or password)',
      `login ok: "alice" (${about})`,
      `consent granted: user "alice", ${about}`,
      `authorization code issued: user "alice", ${about}`,
      `token issued: grant authorization_code, subject "alice", ${about}, expires in 300 s, with a refresh token`,
      `token refreshed: grant refresh_token, subject "alice", ${about}, expires in 300 s, with a refresh token`,
      `token refreshed: grant refresh_token, subject "alice", ${about}, expires in 300 s, with a refresh token`,
      "token request refused: invalid_grant (the authorization code was already used; tokens issued from it are revoked)" +
        `, grant "authorization_code", client ${JSON.stringify(clientId)}`,
      `revocation requested by client ${JSON.stringify(clientId)}`,
    ])
    const text = await readFile(join(dataDir, "audit.jsonl"), "utf8")
    for (const secret of [
      PASSWORD,
      "wrong-chunked",
      "wrong-length",
      code,
      pkce.verifier,
      tokens.access_token,
      tokens.refresh_token,
      second.access_token,
      second.refresh_token,
      third.access_token,
      third.refresh_token,
    ]) {
      expect(text).not.toContain(secret)
      for (const line of log) expect(line).not.toContain(secret)
    }
  })
})

describe("an exchanged token in the audit log and the log lines", () => {
  it("names the resource it was exchanged from and the actors, the current one first", () => {
    const log: Array<string> = []
    const audit: Array<AuditEvent> = []
    const event = {
      event: "token_issued",
      grant_type: "urn:ietf:params:oauth:grant-type:token-exchange",
      client_id: "files-api",
      subject: "alice",
      resource: "https://calendar.example.com",
      scope: "calendar:read",
      expires_in: 120,
      refresh_token_issued: false,
      source_resource: "https://api.example.com",
      actors: ["files-api", "-notes-mcp"],
    } as const
    securityEventReceiver({ log: (line) => void log.push(line), audit: (e) => void audit.push(e) })(event)
    expect(audit).toEqual([event])
    expect(log).toEqual([
      'token issued: grant urn:ietf:params:oauth:grant-type:token-exchange, subject "alice", client "files-api", ' +
        'scope "calendar:read", resource https://calendar.example.com, expires in 120 s, ' +
        'exchanged from resource https://api.example.com, actors "files-api" < "-notes-mcp"',
    ])
  })
})
