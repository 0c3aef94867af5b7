import { Pkce } from "@keyway/core"
import { freePort } from "@keyway/testing"
import { describe, expect, it } from "vitest"
import { type RunningAuthorizationServer, startAuthorizationServer } from "../src/index.js"
import { testCleanups } from "./support/cleanup.js"
import { PASSWORD, REDIRECT_URI, RESOURCE, registerClient, SCOPES } from "./support/flow.js"

const { defer, dir } = testCleanups()

const running = (server: RunningAuthorizationServer) => {
  defer(server.close)
  return server
}

const UPSTREAM_API = "http://127.0.0.1:9200/api"
const PROXY_SECRET = "proxy-client-secret-of-32-characters-at-least"

describe("proxy mode", () => {
  it("shows Keyway's consent page for a registered client before anything is sent upstream", async () => {
    // The proxy's callback must be registered at the upstream before the proxy starts, so its port is chosen first.
    const proxyPort = await freePort()
    const upstreamLog: Array<string> = []
    const upstream = running(
      await startAuthorizationServer(
        {
          port: 0,
          dataDir: await dir(),
          registration: false,
          users: [{ username: "alice", password: PASSWORD }],
          resources: [{ uri: UPSTREAM_API, scopes: { profile: "Read your profile" } }],
          clients: [
            {
              clientId: "keyway-proxy",
              clientSecret: PROXY_SECRET,
              tokenEndpointAuthMethod: "client_secret_basic",
              redirectUris: [`http://127.0.0.1:${proxyPort}/upstream/callback`],
            },
          ],
        },
        { log: (line) => upstreamLog.push(line) },
      ),
    )
    const proxyLog: Array<string> = []
    const proxy = running(
      await startAuthorizationServer(
        {
          port: proxyPort,
          dataDir: await dir(),
          resources: [{ uri: RESOURCE, name: "Notes", scopes: SCOPES }],
          upstream: {
            issuer: upstream.issuer,
            clientId: "keyway-proxy",
            clientSecret: PROXY_SECRET,
            scope: "profile",
            resource: UPSTREAM_API,
            name: "Upstream Identity",
          },
          development: { allowHttpLoopbackUpstream: true },
        },
        { log: (line) => proxyLog.push(line) },
      ),
    )
    expect(proxyLog).toContain(
      `warning: DEVELOPMENT MODE: the upstream authorization server ${upstream.issuer} is reached over http. ` +
        "Never use this outside local development.",
    )
    expect(proxyLog).toContain(
      `listening on ${proxy.issuer}, issuer ${proxy.issuer}; resources ${RESOURCE}; dynamic registration on; ` +
        `users sign in at the upstream ${upstream.issuer}`,
    )

    const clientId = await registerClient(proxy.issuer, "Cool MCP Client")
    const pkce = await Pkce.generate()
    const url = new URL(`${proxy.issuer}/authorize`)
    for (const [k, v] of Object.entries({
      response_type: "code",
      client_id: clientId,
      redirect_uri: REDIRECT_URI,
      code_challenge: pkce.challenge,
      code_challenge_method: "S256",
      resource: RESOURCE,
      scope: "notes:read",
      state: "state-1",
    }))
      url.searchParams.set(k, v)
    const page = await fetch(url, { redirect: "manual" })
    expect(page.status).toBe(200)
    expect(page.headers.get("location")).toBeNull()
    const html = await page.text()
    expect(html).toContain("<span data-client-name>Cool MCP Client</span>")
    expect(html).toContain("<strong>Upstream Identity</strong>")
    expect(html).toContain('name="decision"')
    // The proxy asks no password itself: users sign in upstream.
    expect(html).not.toContain('name="password"')
    // Nothing reached the upstream's authorization endpoint.
    expect(upstreamLog.filter((line) => line.startsWith("GET /authorize"))).toEqual([])
  })
})
