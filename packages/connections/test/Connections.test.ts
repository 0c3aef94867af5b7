/**
 * The connect flow over HTTP against node-oidc-provider playing the third-party provider (its own login and consent
 * scripted through its pages), with the connect pages on a loopback server and the connections on the TestClock.
 */

import { Effect, Option } from "effect"
import { afterEach, describe, expect, it } from "vitest"
import { ConnectionRequired, ConnectionsError } from "../src/Connections.js"
import { browser } from "./support/browser.js"
import { startStack } from "./support/stack.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup()
})

const USER = { issuer: "https://as.example", subject: "-alice" }

const start = () => startStack(cleanups)

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
    expect(stored?.status).toBe("connected")
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

const connected = async (stack: Awaited<ReturnType<typeof start>>, provider: string) => {
  const { elicitation } = await required(stack.connections.fetch(USER, provider))
  const user = browser()
  const page = await user.connect(elicitation.url)
  expect(page.status).toBe(200)
  return { user, page }
}

const stored = async (stack: Awaited<ReturnType<typeof start>>, provider: string) =>
  Option.getOrThrow(await Effect.runPromise(stack.vault.get({ ...USER, provider })))

const HOUR = 3_600_000

describe("providers, refreshes and disconnection", () => {
  it("connects a provider configured by its endpoints, without metadata", async () => {
    const stack = await start()
    const { page } = await connected(stack, "manual")
    expect(page.html).toContain("Your Manual Host account is connected")
    const api = await stack.connections.fetch(USER, "manual")
    // A relative URL is resolved under apiBase.
    const answer = await api("user")
    expect(answer.status).toBe(200)
    expect(await answer.json()).toEqual({ login: "alice" })
    await expect(api("/user")).rejects.toThrow(
      `refusing to send the Manual Host token to ${stack.issuer}/user: it is not under ${stack.apiBase}`,
    )
  })

  it("refreshes an expired access token through the vault, once for 10 concurrent calls", async () => {
    const stack = await start()
    await connected(stack, "codehost")
    const before = await stored(stack, "codehost")
    expect(before.tokens.refreshToken).toMatch(/^[A-Za-z0-9_-]{20,}$/u)
    expect(stack.counts.refreshes).toBe(0)
    // Past the access token's expires_at (the provider's default lifetime is an hour).
    await stack.adjust(HOUR)
    const apis = await Promise.all(Array.from({ length: 10 }, () => stack.connections.fetch(USER, "codehost")))
    expect(stack.counts.refreshes).toBe(1)
    const answers = await Promise.all(apis.map((api) => api(`${stack.apiBase}/user`)))
    expect(answers.map((a) => a.status)).toEqual(Array.from({ length: 10 }, () => 200))
    const after = await stored(stack, "codehost")
    expect(after.tokens.accessToken).not.toBe(before.tokens.accessToken)
    expect(after.status).toBe("connected")
    await stack.connections.fetch(USER, "codehost")
    expect(stack.counts.refreshes).toBe(1)
  })

  it("marks the connection broken when the provider answers the refresh invalid_grant, and asks again", async () => {
    const stack = await start()
    await connected(stack, "codehost")
    const held = await stored(stack, "codehost")
    // The user revoked the grant at the provider: its refresh token is gone there.
    const refreshToken = await stack.provider.RefreshToken.find(held.tokens.refreshToken ?? "")
    await refreshToken?.destroy()
    await stack.adjust(HOUR)
    const again = await required(stack.connections.fetch(USER, "codehost"))
    expect(again.elicitation.message).toBe(
      "Keyway notes needs access to your Code Host account. Open the link to connect it.",
    )
    expect((await stored(stack, "codehost")).status).toBe("broken")
    const page = await browser().connect(again.elicitation.url)
    expect(page.html).toContain("Your Code Host account is connected")
    expect((await stored(stack, "codehost")).status).toBe("connected")
  })

  it("refuses a callback whose iss is not the provider's (RFC 9207), and stores nothing", async () => {
    const stack = await start()
    const { elicitation } = await required(stack.connections.fetch(USER, "codehost"))
    const user = browser()
    let callbackUrl = ""
    await user.connect(elicitation.url, (url) => {
      if (url.pathname.endsWith("/callback")) callbackUrl = url.href
      return callbackUrl !== ""
    })
    const forged = new URL(callbackUrl)
    expect(forged.searchParams.get("iss")).toBe(stack.issuer)
    forged.searchParams.set("iss", "https://evil.example")
    const refused = await user.go(forged.href)
    expect(refused.status).toBe(400)
    expect(refused.html).toContain(
      `<p data-error>The provider&#39;s answer was refused: the authorization response at ${stack.site.url}/connect/codehost/callback has iss &#34;https://evil.example&#34; but the request went to &#34;${stack.issuer}&#34;; rejected as a possible mix-up attack (RFC 9207)</p>`,
    )
    const original = await user.go(callbackUrl)
    expect(original.status).toBe(400)
    expect(original.html).toContain("This connection has expired or was already completed: nothing was stored.")
    expect(await Effect.runPromise(stack.vault.get({ ...USER, provider: "codehost" }))).toEqual(Option.none())
  })

  it("refuses an expired flow: its link after flowTtl, and its callback after flowTtl", async () => {
    const stack = await start()
    const first = await required(stack.connections.fetch(USER, "codehost"))
    await stack.adjust(600_000)
    const late = await browser().go(first.elicitation.url)
    expect(late.status).toBe(400)
    expect(late.html).toContain(
      "This connection link is unknown, has expired or was already used: call the tool again in your MCP client for a new link.",
    )

    const second = await required(stack.connections.fetch(USER, "codehost"))
    const user = browser()
    let callbackUrl = ""
    await user.connect(second.elicitation.url, (url) => {
      if (url.pathname.endsWith("/callback")) callbackUrl = url.href
      return callbackUrl !== ""
    })
    await stack.adjust(600_000)
    const expired = await user.go(callbackUrl)
    expect(expired.status).toBe(400)
    expect(expired.html).toContain("This connection has expired or was already completed: nothing was stored.")
    expect(await Effect.runPromise(stack.vault.get({ ...USER, provider: "codehost" }))).toEqual(Option.none())
  })

  it("disconnects with the button of the completion page: revoked at the provider, forgotten, asked again", async () => {
    const stack = await start()
    const { user, page } = await connected(stack, "codehost")
    const api = await stack.connections.fetch(USER, "codehost")
    expect((await api(`${stack.apiBase}/user`)).status).toBe(200)
    const done = await user.submit(page)
    expect(done.status).toBe(200)
    expect(done.html).toContain("The account is disconnected; its access was revoked and forgotten.")
    expect(stack.counts.revocations).toBe(2)
    expect((await api(`${stack.apiBase}/user`)).status).toBe(401)
    await required(stack.connections.fetch(USER, "codehost"))
    const replay = await user.submit(page)
    expect(replay.status).toBe(400)
    expect(replay.html).toContain(
      "This connection link is unknown, has expired or was already used: call the tool again in your MCP client for a new link.",
    )
  })

  it("deletes the connection when the revocation at the provider fails, and reports the failure", async () => {
    const stack = await start()
    await connected(stack, "brittle")
    const error = await stack.connections.disconnect(USER, "brittle").then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(error).toBeInstanceOf(ConnectionsError)
    expect((error as ConnectionsError).reason).toBe("revocation")
    expect((error as ConnectionsError).message).toBe(
      `the Brittle Host connection was deleted here, but revoking its tokens at Brittle Host failed: the revocation endpoint ${stack.issuer}/broken/revocation answered HTTP 503 temporarily_unavailable when revoking the refresh token`,
    )
    expect(stack.counts.brokenRevocations).toBe(1)
    expect(await Effect.runPromise(stack.vault.get({ ...USER, provider: "brittle" }))).toEqual(Option.none())
    await required(stack.connections.fetch(USER, "brittle"))
    expect(await stack.connections.disconnect(USER, "brittle")).toBe(false)
  })
})
