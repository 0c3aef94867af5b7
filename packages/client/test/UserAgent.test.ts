import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { it } from "@effect/vitest"
import { listen, rpc } from "@keyway/testing/peers"
import { Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { describe, expect } from "vitest"
import { createAuthClient as createWebAuthClient } from "../src/AuthClient.js"
import type { AuthError } from "../src/AuthError.js"
import { ClientConfig } from "../src/ClientConfig.js"
import { DiscoveryCache } from "../src/DiscoveryCache.js"
import { DEFAULT_SUCCESS_PAGE, openerCommand } from "../src/internal/browser.js"
import { PENDING_LIFETIME_MS } from "../src/internal/storage.js"
import { AuthClient, createAuthClient } from "../src/node/AuthClient.js"
import { browser, headless, openSystemBrowser, redirect, testUser, twoPhase, UserAgent } from "../src/node/UserAgent.js"
import { TokenStore, webStorage } from "../src/TokenStore.js"
import { browserUnavailable } from "../src/UserAgent.js"
import { memoryStorage } from "./support/storage.js"
import { rejection, track, world } from "./support/world.js"

const post = (body: string) => ({ method: "POST", headers: { "content-type": "application/json" }, body })
const initialize = post(rpc("initialize"))

describe("system browser with a loopback listener", () => {
  it("listens on 127.0.0.1 with an ephemeral port, shows a closing page, and completes the flow", async () => {
    const pages: Array<{ status: number; body: string; url: string }> = []
    const { as, rs, client } = await world({
      client: {
        userAgent: browser({
          // Stands in for the browser: follows the authorization server's redirect to the listener.
          openBrowser: async (url) => {
            const response = await fetch(url)
            pages.push({ status: response.status, body: await response.text(), url: response.url })
          },
        }),
      },
    })
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    const redirectUri = as.authorizations[0]?.get("redirect_uri") ?? ""
    expect(redirectUri).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/callback$/)
    expect(redirectUri).not.toBe("http://127.0.0.1:0/callback")
    expect(pages).toHaveLength(1)
    expect(pages[0]?.status).toBe(200)
    expect(pages[0]?.body).toBe(DEFAULT_SUCCESS_PAGE)
    expect(pages[0]?.body).toContain("You can close this tab")
    // The listener is gone once the flow is over.
    await expect(fetch(redirectUri)).rejects.toThrow()
  })

  it("reuses the registration on the next authorization although the port changed (RFC 8252 §7.3)", async () => {
    const { as, rs, client } = await world({
      client: { userAgent: browser({ openBrowser: async (url) => void (await fetch(url)).body?.cancel() }) },
    })
    await client.authorize(rs.url)
    await client.authorize(rs.url)
    expect(as.registrations).toHaveLength(1)
    expect(as.authorizations).toHaveLength(2)
  })

  it("answers 404 outside the callback path", async () => {
    const agent = browser({ openBrowser: () => undefined, timeoutMs: 60_000 })
    const session = await Effect.runPromise(agent.open)
    track(() => Effect.runPromise(session.close))
    const other = await fetch(session.redirectUri.replace("/callback", "/favicon.ico"))
    expect(other.status).toBe(404)
    await other.body?.cancel()
    const callback = `${session.redirectUri}?code=c&state=s`
    const [delivered, page] = await Promise.all([
      Effect.runPromise(session.run("https://as.example/authorize?x=1")),
      (async () => {
        const response = await fetch(callback)
        return response.text()
      })(),
    ])
    expect(delivered).toBe(callback)
    expect(page).toBe(DEFAULT_SUCCESS_PAGE)
  })

  it("fails with a typed error when the browser cannot be opened", async () => {
    const agent = browser({
      openBrowser: () => {
        throw new Error("no display")
      },
    })
    const session = await Effect.runPromise(agent.open)
    track(() => Effect.runPromise(session.close))
    const error = await rejection(Effect.runPromise(session.run("https://as.example/authorize?client_id=x")))
    expect(error).toMatchObject({
      step: "authorization",
      reason: "user-agent-failed",
      url: "https://as.example/authorize",
    })
    expect((error as AuthError).message).toBe("could not open the browser: no display")
  })

  it.effect("gives up when no response arrives in time", () =>
    Effect.gen(function* () {
      const agent = browser({ openBrowser: () => undefined, timeoutMs: 20 })
      const session = yield* agent.open
      yield* Effect.addFinalizer(() => session.close)
      let settled = false
      const running = yield* Effect.forkChild(
        session.run("https://as.example/authorize").pipe(
          Effect.onExit(() =>
            Effect.sync(() => {
              settled = true
            }),
          ),
        ),
      )
      yield* TestClock.adjust(19)
      expect(settled).toBe(false)
      yield* TestClock.adjust(1)
      const error = yield* Effect.flip(Fiber.join(running))
      expect(error).toMatchObject({ step: "authorization", reason: "user-agent-failed", url: session.redirectUri })
      expect(error.message).toBe(
        `no authorization response reached ${session.redirectUri} within 0 seconds; complete the login in the browser`,
      )
    }).pipe(Effect.scoped),
  )
})

describe("two-phase for web apps", () => {
  const REDIRECT = "https://app.example/oauth/callback"

  it("begin returns the URL and persists the state; complete finishes from the callback URL", async () => {
    const { as, rs, client } = await world({ client: { userAgent: twoPhase({ redirectUri: REDIRECT }) } })
    const begun = await client.begin(rs.url)
    expect(begun.url.startsWith(`${as.issuer}/authorize?`)).toBe(true)
    expect(new URL(begun.url).searchParams.get("state")).toBe(begun.state)
    const redirect = await fetch(begun.url, { redirect: "manual" })
    const callback = redirect.headers.get("location") ?? ""
    expect(callback.startsWith(`${REDIRECT}?`)).toBe(true)
    const tokens = await client.complete(callback)
    expect(tokens.resource).toBe(rs.url)
    expect((await client.fetch(rs.url, initialize)).status).toBe(200)
    // A replayed callback finds no pending state.
    const replay = await rejection(client.complete(callback))
    expect(replay).toMatchObject({ step: "callback", reason: "state-mismatch", url: REDIRECT })
  })

  it("complete forgets a registration the token endpoint refuses (invalid_client), so the next begin registers anew", async () => {
    const { as, rs, client } = await world({ client: { userAgent: twoPhase({ redirectUri: REDIRECT }) } })
    const begun = await client.begin(rs.url)
    const callback = (await fetch(begun.url, { redirect: "manual" })).headers.get("location") ?? ""
    const lost = new URL(begun.url).searchParams.get("client_id") ?? ""
    as.clients.delete(lost)
    const error = await rejection(client.complete(callback))
    expect(error).toMatchObject({
      step: "token",
      reason: "oauth-error",
      error: "invalid_client",
      status: 401,
      message: `the token endpoint ${as.issuer}/token answered HTTP 401 invalid_client: unknown client`,
    })
    const again = await client.begin(rs.url)
    expect(as.registrations).toHaveLength(2)
    expect(new URL(again.url).searchParams.get("client_id")).not.toBe(lost)
  })

  it("survives a restart between the phases with a file store", async () => {
    const dir = await mkdtemp(join(tmpdir(), "keyway-two-phase-"))
    track(() => rm(dir, { recursive: true, force: true }))
    const store = { file: join(dir, "auth.json") }
    const { rs } = await world()
    const first = createAuthClient({ userAgent: twoPhase({ redirectUri: REDIRECT }), store })
    const begun = await first.begin(rs.url)
    await first.dispose()
    const callback = (await fetch(begun.url, { redirect: "manual" })).headers.get("location") ?? ""
    const second = createAuthClient({ userAgent: twoPhase({ redirectUri: REDIRECT }), store })
    track(second.dispose)
    expect((await second.complete(callback)).resource).toBe(rs.url)
  })

  it("fetch reports interaction-required with the authorization URL", async () => {
    const { as, rs, client } = await world({ client: { userAgent: twoPhase({ redirectUri: REDIRECT }) } })
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "authorization", reason: "interaction-required" })
    expect((error as AuthError).url.startsWith(`${as.issuer}/authorize?`)).toBe(true)
    expect((error as AuthError).message).toBe(
      "the user must authorize at the URL in this error's url; redirect them there, then call complete() with the callback URL",
    )
    // The pending state was kept, so completing from that URL works.
    const callback = (await fetch((error as AuthError).url, { redirect: "manual" })).headers.get("location") ?? ""
    expect((await client.complete(callback)).resource).toBe(rs.url)
  })

  const twoPhaseLayer = AuthClient.layer.pipe(
    Layer.provideMerge(
      Layer.mergeAll(
        ClientConfig.layer(),
        TokenStore.layerMemory,
        DiscoveryCache.layerMemory,
        UserAgent.layerTwoPhase({ redirectUri: REDIRECT }),
      ),
    ),
  )
  const callbackOf = (url: string) =>
    Effect.promise(async () => (await fetch(url, { redirect: "manual" })).headers.get("location") ?? "")

  it.effect("complete refuses a callback for an authorization pending too long", () =>
    Effect.gen(function* () {
      const { rs } = yield* Effect.promise(() => world())
      const client = yield* AuthClient
      const store = yield* TokenStore
      const begun = yield* client.begin(rs.url)
      const callback = yield* callbackOf(begun.url)
      yield* TestClock.adjust(PENDING_LIFETIME_MS + 1)
      const error = yield* Effect.flip(client.complete(callback))
      expect(error).toMatchObject({ step: "callback", reason: "expired", url: REDIRECT })
      expect(error.message).toBe(
        `the authorization response at ${REDIRECT} arrived more than 10 minutes after the request; start the authorization again`,
      )
      expect(yield* store.get(`pending:${begun.state}`)).toBeUndefined()
    }).pipe(Effect.provide(twoPhaseLayer)),
  )

  it.effect("complete accepts a callback arriving exactly at the end of the pending lifetime", () =>
    Effect.gen(function* () {
      const { rs } = yield* Effect.promise(() => world())
      const client = yield* AuthClient
      const begun = yield* client.begin(rs.url)
      const callback = yield* callbackOf(begun.url)
      yield* TestClock.adjust(PENDING_LIFETIME_MS)
      expect((yield* client.complete(callback)).resource).toBe(rs.url)
    }).pipe(Effect.provide(twoPhaseLayer)),
  )

  it("complete refuses a callback without state, with an empty or repeated one, or with an unknown one", async () => {
    const { client } = await world({ client: { userAgent: twoPhase({ redirectUri: REDIRECT }) } })
    expect(await rejection(client.complete(`${REDIRECT}?code=x`))).toMatchObject({
      step: "callback",
      reason: "state-missing",
      url: REDIRECT,
    })
    const empty = await rejection(client.complete(`${REDIRECT}?code=x&state=`))
    expect(empty).toMatchObject({ step: "callback", reason: "state-missing", url: REDIRECT })
    expect((empty as AuthError).message).toBe(
      `the authorization response at ${REDIRECT} carries no state; it was discarded (it may be forged or from another request)`,
    )
    const twice = await rejection(client.complete(`${REDIRECT}?code=x&state=a&state=b`))
    expect(twice).toMatchObject({ step: "callback", reason: "invalid-input", url: REDIRECT })
    expect((twice as AuthError).message).toBe(
      `the authorization response at ${REDIRECT} carries state 2 times; a parameter may appear only once (RFC 6749 §3.1)`,
    )
    const unknown = await rejection(client.complete(`${REDIRECT}?code=x&state=nope`))
    expect(unknown).toMatchObject({ step: "callback", reason: "state-mismatch", url: REDIRECT })
    expect((unknown as AuthError).message).toBe(
      `the authorization response at ${REDIRECT} carries a state that matches no pending authorization; it was discarded (it may be forged, replayed, or from another request)`,
    )
  })
})

describe("system browser opener", () => {
  it("uses $BROWSER with the URL as its last argument, else the platform's opener", () => {
    const url = "https://as.example.com/authorize?x=1"
    expect(openerCommand(url, { BROWSER: "firefox --new-window" }, "linux")).toEqual(["firefox", ["--new-window", url]])
    expect(openerCommand(url, { BROWSER: "  " }, "linux")).toEqual(["xdg-open", [url]])
    expect(openerCommand(url, {}, "darwin")).toEqual(["open", [url]])
    expect(openerCommand(url, {}, "win32")).toEqual(["cmd", ["/c", "start", "", url]])
  })

  it("rejects with the reason when the opener cannot be started", async () => {
    const saved = process.env.BROWSER
    process.env.BROWSER = "/nonexistent/keyway-browser"
    try {
      await expect(openSystemBrowser("https://as.example.com/authorize")).rejects.toThrow(
        "could not start /nonexistent/keyway-browser: spawn /nonexistent/keyway-browser ENOENT",
      )
    } finally {
      if (saved === undefined) delete process.env.BROWSER
      else process.env.BROWSER = saved
    }
  })
})

describe("headless agents keep their cookies", () => {
  /**
   * A sign-in page in miniature: /authorize redirects to the callback when the session cookie is there, else to
   * /login, which sets it (and deletes a stale one) and sends the browser back to /authorize.
   */
  const signInServer = async () => {
    const logins: Array<string | undefined> = []
    const server = await listen((request, url) => {
      const cookie = request.headers.cookie
      if (url.pathname === "/authorize") {
        if (cookie?.includes("session=ok") === true) {
          return { status: 302, headers: { location: `${CALLBACK}?code=c&state=${url.searchParams.get("state")}` } }
        }
        return { status: 302, headers: { location: `/login?state=${url.searchParams.get("state")}` } }
      }
      logins.push(cookie)
      return {
        status: 302,
        headers: {
          location: `/authorize?state=${url.searchParams.get("state")}`,
          "set-cookie": ["session=ok; Path=/; HttpOnly", "stale=1; Max-Age=0"],
        },
      }
    })
    track(server.close)
    return { server, logins }
  }
  const CALLBACK = "http://127.0.0.1/callback"

  it("a later authorization of the same agent finds the session of an earlier one (a step-up signs in once)", async () => {
    const { server, logins } = await signInServer()
    const session = await Effect.runPromise(headless().open)
    const first = await Effect.runPromise(session.run(`${server.origin}/authorize?state=one`))
    const second = await Effect.runPromise(session.run(`${server.origin}/authorize?state=two`))
    expect(first).toBe(`${CALLBACK}?code=c&state=one`)
    expect(second).toBe(`${CALLBACK}?code=c&state=two`)
    expect(logins).toEqual([undefined])
  })

  it("drops a cookie the server expires", async () => {
    const seen: Array<string | undefined> = []
    const server = await listen((request, url) => {
      seen.push(request.headers.cookie)
      if (url.pathname === "/set") return { status: 302, headers: { location: "/clear", "set-cookie": "a=1" } }
      if (url.pathname === "/clear") {
        return {
          status: 302,
          headers: { location: "/check", "set-cookie": "a=; Expires=Thu, 01 Jan 1970 00:00:00 GMT" },
        }
      }
      return { status: 302, headers: { location: CALLBACK } }
    })
    track(server.close)
    const session = await Effect.runPromise(headless().open)
    expect(await Effect.runPromise(session.run(`${server.origin}/set`))).toBe(CALLBACK)
    expect(seen).toEqual([undefined, "a=1", undefined])
  })

  it("the headless agent still refuses a page that needs a person", async () => {
    const server = await listen(() => ({
      status: 200,
      headers: { "content-type": "text/html" },
      body: "<form></form>",
    }))
    track(server.close)
    const session = await Effect.runPromise(headless().open)
    const error = await Effect.runPromise(Effect.flip(session.run(`${server.origin}/authorize?x=1`)))
    expect(error).toMatchObject({ step: "authorization", reason: "interaction-required", status: 200 })
    expect(error.message).toBe(
      `${server.origin}/authorize answered HTTP 200 instead of redirecting; the authorization server needs a person, use the browser user agent`,
    )
  })
})

describe("the test user", () => {
  const page = (form: string) => ({
    status: 200,
    headers: { "content-type": "text/html; charset=utf-8" },
    body: `<!doctype html><html><head><title>Page</title></head><body><main>${form}</main></body></html>`,
  })
  const LOGIN = `<form method="post" action="/login"><input type="hidden" name="csrf_token" value="t&amp;1"><input type="text" name="username" value=""><input type="password" name="password"><button type="submit">Sign in</button></form>`
  const CONSENT = `<form method="post" action="/consent"><input type="hidden" name="csrf_token" value="t2"><button type="submit" name="decision" value="approve">Approve</button><button type="submit" name="decision" value="deny">Deny</button></form>`
  const CALLBACK = "http://127.0.0.1/callback"

  const formServer = async (accept: (username: string, password: string) => boolean) => {
    const posts: Array<{ path: string; body: Record<string, string>; origin: string | undefined }> = []
    const server = await listen((request, url, body) => {
      if (request.method === "POST") {
        const fields = Object.fromEntries(new URLSearchParams(body))
        posts.push({ path: url.pathname, body: fields, origin: request.headers.origin })
        if (url.pathname === "/login") {
          if (!accept(fields.username ?? "", fields.password ?? "")) {
            return page(`<div class="error" role="alert"><p>Wrong username or password.</p></div>${LOGIN}`)
          }
          return { status: 303, headers: { location: "/consent", "set-cookie": "session=s" } }
        }
        return { status: 303, headers: { location: `${CALLBACK}?decision=${fields.decision}` } }
      }
      if (url.pathname === "/consent") return page(CONSENT)
      return request.headers.cookie === "session=s" ? page(CONSENT) : page(LOGIN)
    })
    track(server.close)
    return { server, posts }
  }

  it("signs in, approves, and comes back to the redirect URI; a second authorization skips the login", async () => {
    const { server, posts } = await formServer((u, p) => u === "alice" && p === "secret")
    const session = await Effect.runPromise(testUser({ username: "alice", password: "secret" }).open)
    expect(session.redirectUri).toBe(CALLBACK)
    expect(await Effect.runPromise(session.run(`${server.origin}/authorize`))).toBe(`${CALLBACK}?decision=approve`)
    expect(posts).toEqual([
      {
        path: "/login",
        body: { csrf_token: "t&1", username: "alice", password: "secret" },
        origin: server.origin,
      },
      { path: "/consent", body: { csrf_token: "t2", decision: "approve" }, origin: server.origin },
    ])
    expect(await Effect.runPromise(session.run(`${server.origin}/authorize`))).toBe(`${CALLBACK}?decision=approve`)
    expect(posts.map((post) => post.path)).toEqual(["/login", "/consent", "/consent"])
  })

  it("denies when told to", async () => {
    const { server } = await formServer(() => true)
    const session = await Effect.runPromise(testUser({ username: "a", password: "b", decision: "deny" }).open)
    expect(await Effect.runPromise(session.run(`${server.origin}/authorize`))).toBe(`${CALLBACK}?decision=deny`)
  })

  it("fails with the page's alert when the sign-in is refused", async () => {
    const { server, posts } = await formServer(() => false)
    const session = await Effect.runPromise(testUser({ username: "alice", password: "wrong" }).open)
    const error = await Effect.runPromise(Effect.flip(session.run(`${server.origin}/authorize`)))
    expect(error).toMatchObject({ step: "authorization", reason: "user-agent-failed", url: `${server.origin}/login` })
    expect(error.message).toBe('the test user could not sign in as "alice": Wrong username or password.')
    expect(posts).toHaveLength(1)
  })

  it("fails with interaction-required on a page without a form", async () => {
    const server = await listen(() => page("<p>Choose an account</p>"))
    track(server.close)
    const session = await Effect.runPromise(testUser({ username: "a", password: "b" }).open)
    const error = await Effect.runPromise(Effect.flip(session.run(`${server.origin}/authorize?x=1`)))
    expect(error).toMatchObject({ step: "authorization", reason: "interaction-required", status: 200 })
    expect(error.message).toBe(
      `${server.origin}/authorize answered HTTP 200 instead of redirecting; the test user found no form to answer on "Page"`,
    )
  })
})

describe("redirect agent of web apps", () => {
  const CALLBACK = "https://app.example.com/callback"

  it("navigates to the authorization URL, keeps state and verifier in session storage, and the callback page completes", async () => {
    const local = memoryStorage()
    const session = memoryStorage()
    const navigations: Array<string> = []
    const options = {
      userAgent: redirect({ redirectUri: CALLBACK, navigate: (url: string) => void navigations.push(url) }),
      store: webStorage({ storage: local, pendingStorage: session }),
    }
    const { as, rs } = await world()
    const page = createWebAuthClient(options)
    track(page.dispose)
    const leaving = await rejection(page.fetch(rs.url, initialize))
    expect(leaving).toMatchObject({ step: "authorization", reason: "interaction-required" })
    expect(navigations).toHaveLength(1)
    const authorizationUrl = new URL(navigations[0] ?? "")
    expect(`${authorizationUrl.origin}${authorizationUrl.pathname}`).toBe(`${as.issuer}/authorize`)
    expect(authorizationUrl.searchParams.get("redirect_uri")).toBe(CALLBACK)
    const state = authorizationUrl.searchParams.get("state") ?? ""
    // The pending authorization, with its PKCE verifier, is in the tab's session storage only.
    const pending = JSON.parse(session.getItem(`keyway:pending:${state}`) ?? "null") as { code_verifier: string }
    expect(pending.code_verifier).toMatch(/^[A-Za-z0-9\-._~]{43,128}$/)
    expect(local.keys().some((key) => key.startsWith("keyway:pending:"))).toBe(false)

    // The authorization server sends the browser back to the callback page, which loads a new client.
    const callback = (await fetch(navigations[0] ?? "", { redirect: "manual" })).headers.get("location") ?? ""
    expect(callback.startsWith(`${CALLBACK}?`)).toBe(true)
    const callbackPage = createWebAuthClient(options)
    track(callbackPage.dispose)
    const tokens = await callbackPage.complete(callback)
    expect(tokens.resource).toBe(rs.url)
    expect(session.keys()).toEqual([])
    expect(local.keys()).toContain(`keyway:tokens:${rs.url}`)
    expect((await callbackPage.fetch(rs.url, initialize)).status).toBe(200)
  })

  it("without a user agent, the main entry's client fails the authorization and names the agents to pass", async () => {
    const { rs } = await world()
    const client = createWebAuthClient()
    track(client.dispose)
    const error = await rejection(client.fetch(rs.url, initialize))
    expect(error).toMatchObject({ step: "authorization", reason: "user-agent-failed" })
    expect((error as Error).message).toContain("UserAgent.redirect({ redirectUri })")
    expect((error as Error).message).toContain('"@keyway/client/node"')
  })
})

describe("UserAgent.browserUnavailable (the module function)", () => {
  it.each([
    [{}, "linux", "no display (no DISPLAY or WAYLAND_DISPLAY)"],
    [{ BROWSER: " " }, "linux", "no display (no DISPLAY or WAYLAND_DISPLAY)"],
    [
      { SSH_CONNECTION: "10.0.0.2 50000 10.0.0.1 22" },
      "linux",
      "an SSH session without a display (no DISPLAY or WAYLAND_DISPLAY)",
    ],
    [{ SSH_TTY: "/dev/pts/0" }, "darwin", "an SSH session: a browser would open on the remote machine"],
    [{ BROWSER: "firefox" }, "linux", undefined],
    [{ BROWSER: "firefox", SSH_TTY: "/dev/pts/0" }, "darwin", undefined],
    [{ DISPLAY: ":0" }, "linux", undefined],
    [{ WAYLAND_DISPLAY: "wayland-0" }, "freebsd", undefined],
    [{}, "darwin", undefined],
    [{}, "win32", undefined],
  ] as const)("%j on %s: %s", (env, platform, reason) => {
    expect(browserUnavailable(env, platform)).toBe(reason)
  })

  it("needs an opener on a display when asked to look for one", () => {
    expect(browserUnavailable({ DISPLAY: ":0" }, "linux", () => false)).toBe(
      "no browser opener (xdg-open is not installed)",
    )
    expect(browserUnavailable({ DISPLAY: ":0" }, "linux", (name: string) => name === "xdg-open")).toBeUndefined()
    // $BROWSER names the opener itself.
    expect(browserUnavailable({ BROWSER: "w3m" }, "linux", () => false)).toBeUndefined()
  })
})
