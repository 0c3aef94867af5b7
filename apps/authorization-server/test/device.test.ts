import { writeFile } from "node:fs/promises"
import { join } from "node:path"
import { Grant } from "@keyway/core"
import { describe, expect, it } from "vitest"
import { runAdmin } from "../src/admin.js"
import { startAuthorizationServer } from "../src/index.js"
import { testCleanups } from "./support/cleanup.js"
import { PASSWORD, RESOURCE, SCOPES } from "./support/flow.js"

const { defer, dir } = testCleanups()

const form = (url: string, values: Record<string, string>, cookie = "") =>
  fetch(url, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie },
    body: new URLSearchParams(values),
  })
const csrfOf = (html: string) => /name="csrf_token" value="([^"]+)"/.exec(html)?.[1] ?? ""
const cookieOf = (response: Response) => response.headers.getSetCookie()[0]?.split(";")[0] ?? ""

describe("extensions.deviceAuthorization", () => {
  it("serves the device flow; the grant is listed by admin grants", async () => {
    const config = {
      port: 0,
      database: join(await dir(), "keyway.db"),
      users: [{ username: "alice", password: PASSWORD }],
      resources: [{ uri: RESOURCE, scopes: SCOPES }],
      clients: [
        { clientId: "-tv", clientName: "TV", redirectUris: [], grantTypes: [Grant.DEVICE_CODE, "refresh_token"] },
      ],
      extensions: { deviceAuthorization: { interval: 1 } },
    }
    const file = join(await dir(), "keyway.json")
    await writeFile(file, JSON.stringify(config))
    const server = await startAuthorizationServer(config, { log: () => undefined })
    defer(server.close)
    const { issuer } = server
    const metadata = await (await fetch(`${issuer}/.well-known/oauth-authorization-server`)).json()
    expect(metadata.device_authorization_endpoint).toBe(`${issuer}/device_authorization`)

    const started = await form(`${issuer}/device_authorization`, { client_id: "-tv", resource: RESOURCE })
    expect(started.status).toBe(200)
    const device = await started.json()
    expect(device).toMatchObject({ verification_uri: `${issuer}/device`, expires_in: 600, interval: 1 })

    const login = await fetch(`${issuer}/device`)
    const signedIn = await form(
      `${issuer}/device`,
      { csrf_token: csrfOf(await login.text()), request: "", username: "alice", password: PASSWORD },
      cookieOf(login),
    )
    expect(signedIn.status).toBe(303)
    const cookie = cookieOf(signedIn)
    const entry = await (await fetch(`${issuer}/device`, { headers: { cookie } })).text()
    const consent = await form(`${issuer}/device`, { csrf_token: csrfOf(entry), user_code: device.user_code }, cookie)
    const approved = await form(
      `${issuer}/device`,
      { csrf_token: csrfOf(await consent.text()), user_code: device.user_code, decision: "approve" },
      cookie,
    )
    expect(await approved.text()).toContain("Device connected")

    const tokens = await form(`${issuer}/token`, {
      grant_type: Grant.DEVICE_CODE,
      device_code: device.device_code,
      client_id: "-tv",
    })
    expect(tokens.status).toBe(200)
    const listed = await runAdmin(["--config", file, "--json", "grants", "list", "--client", "-tv"])
    expect(listed.code).toBe(0)
    expect(JSON.parse(listed.stdout)).toMatchObject([{ subject: "alice", client_id: "-tv", resource: RESOURCE }])
  })
})
