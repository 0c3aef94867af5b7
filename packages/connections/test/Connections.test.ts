/**
 * The connect flow over HTTP against node-oidc-provider playing the third-party provider (its own login and consent
 * scripted through its pages), with the connect pages on a loopback server.
 */

import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { listen } from "@keyway/http/node"
import { Effect } from "effect"
import Provider from "oidc-provider"
import { afterEach, describe, expect, it } from "vitest"
import { ConnectionRequired, createConnections } from "../src/Connections.js"
import * as KeyRing from "../src/KeyRing.js"
import { memoryVault } from "../src/Vault.js"
import { browser } from "./support/browser.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const USER = { issuer: "https://as.example", subject: "-alice" }

const start = async () => {
  const http = createServer()
  await new Promise<void>((resolve) => http.listen(0, "127.0.0.1", resolve))
  const issuer = `http://127.0.0.1:${(http.address() as AddressInfo).port}`
  const apiBase = `${issuer}/api`
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
  const site = await listen((request) => handler(request), { host: "127.0.0.1", port: 0 })
  cleanups.push(site.close)
  const provider = new Provider(issuer, {
    clients: [
      {
        client_id: "mcp-notes",
        client_secret: "a secret of the notes server at the code host",
        redirect_uris: [`${site.url}/connect/codehost/callback`],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
      },
    ],
    cookies: { keys: ["a test key that is long enough to sign the cookies"] },
    features: {
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        getResourceServerInfo: (_ctx, resource) => ({ scope: "", audience: resource, accessTokenFormat: "opaque" }),
      },
    },
    findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  })
  const callback = provider.callback()
  http.on("request", async (req, res) => {
    if (req.url?.startsWith("/api/") === true) {
      const token = /^Bearer (.+)$/u.exec(req.headers.authorization ?? "")?.[1]
      const found = token === undefined ? undefined : await provider.AccessToken.find(token)
      res.writeHead(found === undefined ? 401 : 200, { "content-type": "application/json" })
      res.end(JSON.stringify(found === undefined ? { error: "invalid_token" } : { login: found.accountId }))
      return
    }
    callback(req, res)
  })
  cleanups.push(
    () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections()
        http.close(() => resolve())
      }),
  )
  const vault = memoryVault(KeyRing.make({ keys: [{ id: "-2025", key: KeyRing.generateKey() }] }))
  const connections = createConnections({
    baseUrl: site.url,
    serverName: "Keyway notes",
    providers: {
      codehost: {
        name: "Code Host",
        issuer,
        clientId: "mcp-notes",
        clientSecret: "a secret of the notes server at the code host",
        scopes: ["openid", "offline_access"],
        apiBase,
      },
    },
    vault,
  })
  handler = async (request) => (await connections.handle(request)) ?? new Response(null, { status: 404 })
  return { connections, vault, site, apiBase }
}

const required = async (promise: Promise<unknown>): Promise<ConnectionRequired> => {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(ConnectionRequired)
  return error as ConnectionRequired
}

describe("the connect flow", () => {
  it("asks, connects through the provider, calls the API silently, disconnects with revocation and asks again", async () => {
    const { connections, vault, site, apiBase } = await start()
    const completed: Array<[string, string]> = []
    connections.onComplete((id, user, provider) => completed.push([id, `${user.subject}@${provider}`]))
    const first = await required(connections.fetch(USER, "codehost"))
    expect(first.provider).toBe("codehost")
    expect(first.elicitation.mode).toBe("url")
    expect(first.elicitation.message).toBe(
      "Keyway notes needs access to your Code Host account. Open the link to connect it.",
    )
    expect(first.elicitation.url).toMatch(new RegExp(`^${site.url}/connect/codehost\\?ref=[A-Za-z0-9_-]{43}$`, "u"))

    const user = browser()
    const landing = await user.go(first.elicitation.url)
    expect(landing.status).toBe(200)
    expect(landing.headers.get("x-frame-options")).toBe("DENY")
    expect(landing.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
    expect(landing.html).toContain(
      "<strong>Keyway notes</strong> asks to connect your <strong>Code Host</strong> account",
    )
    expect(landing.html).toContain("You can disconnect the account later")
    const page = await user.connect(first.elicitation.url)
    expect(page.status).toBe(200)
    expect(page.html).toContain("Your Code Host account is connected")
    expect(completed).toEqual([[first.elicitation.elicitationId, "-alice@codehost"]])
    const [stored] = await Effect.runPromise(vault.list(USER.issuer, USER.subject))
    expect(stored?.tokens.accessToken).toMatch(/^[A-Za-z0-9_-]{20,}$/u)
    expect(page.html).not.toContain(stored?.tokens.accessToken)

    const api = await connections.fetch(USER, "codehost")
    const answer = await api(`${apiBase}/user`)
    expect(answer.status).toBe(200)
    expect(await answer.json()).toEqual({ login: "alice" })
    await expect(api("http://127.0.0.1:1/elsewhere")).rejects.toThrow(
      `refusing to send the Code Host token to http://127.0.0.1:1/elsewhere: it is not under ${apiBase}`,
    )

    expect(await connections.disconnect(USER, "codehost")).toBe(true)
    // The provider no longer accepts the access token the connection held: it was revoked there (RFC 7009).
    expect((await api(`${apiBase}/user`)).status).toBe(401)
    await required(connections.fetch(USER, "codehost"))
  })

  it("refuses a missing cookie, a forged form, a replayed link, a replayed callback and another browser's answer", async () => {
    const { connections } = await start()
    const { elicitation } = await required(connections.fetch(USER, "codehost"))
    const user = browser()
    const landing = await user.go(elicitation.url)

    const noCookie = await fetch(new URL(landing.url).origin + new URL(landing.url).pathname, {
      method: "POST",
      body: new URLSearchParams({ ref: new URL(elicitation.url).searchParams.get("ref") ?? "", csrf: "x" }),
    })
    expect(noCookie.status).toBe(400)
    expect(await noCookie.text()).toContain(
      "Your browser did not send the cookie of this connection: finish the connection in the browser that opened the link, with cookies allowed.",
    )
    const forged = await user.submit(landing, { csrf: "forged" })
    expect(forged.status).toBe(403)
    expect(forged.html).toContain(
      "This form was not sent from the connect page of this browser: open the connect link again.",
    )

    let callbackUrl = ""
    const stopped = await user.connect(elicitation.url, (url) => {
      if (url.pathname.endsWith("/callback")) callbackUrl = url.href
      return callbackUrl !== ""
    })
    expect(stopped.status).toBe(0)
    const again = await user.go(elicitation.url)
    expect(again.status).toBe(400)
    expect(again.html).toContain(
      "This connection link is unknown, has expired or was already used: call the tool again in your MCP client for a new link.",
    )

    const attacker = browser()
    await attacker.go(elicitation.url.replace(/ref=.*/u, "ref=unknown"))
    attacker.jar.set("keyway_connect", "A".repeat(43))
    const foreign = await attacker.go(callbackUrl)
    expect(foreign.status).toBe(400)
    expect(foreign.html).toContain(
      "This answer of the provider belongs to a connection started in another browser or by another user: nothing was stored.",
    )

    const done = await user.go(callbackUrl)
    expect(done.status).toBe(200)
    const replay = await user.go(callbackUrl)
    expect(replay.status).toBe(400)
    expect(replay.html).toContain("This connection has expired or was already completed: nothing was stored.")
  })
})
