import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { it } from "@effect/vitest"
import { rpc } from "@keyway/testing/peers"
import { Effect, Fiber, Layer } from "effect"
import { TestClock } from "effect/testing"
import { describe, expect } from "vitest"
import { AuthClient, createAuthClient } from "../src/AuthClient.js"
import type { AuthError } from "../src/AuthError.js"
import { ClientConfig } from "../src/ClientConfig.js"
import { DiscoveryCache } from "../src/DiscoveryCache.js"
import { DEFAULT_SUCCESS_PAGE, openerCommand } from "../src/internal/browser.js"
import { PENDING_LIFETIME_MS } from "../src/internal/storage.js"
import { TokenStore } from "../src/TokenStore.js"
import { browser, openSystemBrowser, twoPhase, UserAgent } from "../src/UserAgent.js"
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

  it("complete refuses a callback without state or with an unknown one", async () => {
    const { client } = await world({ client: { userAgent: twoPhase({ redirectUri: REDIRECT }) } })
    expect(await rejection(client.complete(`${REDIRECT}?code=x`))).toMatchObject({
      step: "callback",
      reason: "state-missing",
      url: REDIRECT,
    })
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
