import { it } from "@effect/vitest"
import { type Listening, listen } from "@keyway/testing/peers"
import { Effect, Exit, Fiber } from "effect"
import { TestClock } from "effect/testing"
import { afterEach, describe, expect } from "vitest"
import { createUrlElicitation, makeCompletions, prompt } from "../src/UrlElicitation.js"
import { headless, redirect, testUser, twoPhase } from "../src/UserAgent.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

/** A connect page: /connect redirects to /login (a sign-in form), which posts to /done, a page saying it is done. */
const connectPage = async (): Promise<Listening & { readonly visits: Array<string> }> => {
  const visits: Array<string> = []
  const peer = await listen((request, url, body) => {
    visits.push(`${request.method} ${url.pathname}${body === "" ? "" : ` ${body}`}`)
    if (url.pathname === "/connect") return { status: 302, headers: { location: "/login" } }
    if (url.pathname === "/login") {
      return {
        status: 200,
        headers: { "content-type": "text/html" },
        body: '<form method="post" action="/done"><input name="username"><input type="password" name="password"><button>Sign in</button></form>',
      }
    }
    if (url.pathname === "/done")
      return { status: 200, headers: { "content-type": "text/html" }, body: "<p>Connected</p>" }
    return { status: 404, body: "Not Found" }
  })
  cleanups.push(peer.close)
  return { ...peer, visits }
}

describe("the prompt", () => {
  it("shows the server, the host in ASCII with punycode flagged, the full URL and the message", () => {
    expect(
      prompt({
        server: "files",
        message: "Connect your drive",
        url: "https://bücher.example:8443/connect?id=-1",
        elicitationId: "-e1",
      }),
    ).toEqual({
      prompt: {
        server: "files",
        host: "xn--bcher-kva.example:8443",
        url: "https://xn--bcher-kva.example:8443/connect?id=-1",
        message: "Connect your drive",
        elicitationId: "-e1",
        punycode: true,
      },
    })
    expect(prompt({ server: "files", message: "m", url: "https://connect.example/x" })).toMatchObject({
      prompt: { host: "connect.example", punycode: false },
    })
  })

  it("allows http on a loopback host only", () => {
    expect(prompt({ server: "s", message: "m", url: "http://127.0.0.1:8080/connect" })).toMatchObject({
      prompt: { host: "127.0.0.1:8080" },
    })
    expect(prompt({ server: "s", message: "m", url: "http://localhost/connect" })).toMatchObject({
      prompt: { host: "localhost" },
    })
    expect(prompt({ server: "files", message: "m", url: "http://connect.example/x" })).toEqual({
      refused:
        "files asked to open http://connect.example, which is neither https nor http on a loopback host; it was not opened",
    })
    expect(prompt({ server: "files", message: "m", url: "javascript:alert(1)" })).toEqual({
      refused:
        "files asked to open javascript://, which is neither https nor http on a loopback host; it was not opened",
    })
  })

  it("refuses a URL with a user name or password, and a string that is not a URL", () => {
    expect(prompt({ server: "files", message: "m", url: "https://bank.example@evil.example/" })).toEqual({
      refused:
        "files asked to open a URL with a user name or password before its host (evil.example); it was not opened",
    })
    expect(prompt({ server: "files", message: "m", url: "not a url" })).toEqual({
      refused: 'files asked to open "not a url", which is not a URL',
    })
  })
})

describe("presenting an elicitation", () => {
  it("opens the URL in the headless user agent after consent, and answers accept", async () => {
    const page = await connectPage()
    const shown: Array<string> = []
    const elicit = createUrlElicitation({
      userAgent: headless(),
      consent: (p) => {
        shown.push(`${p.server} ${p.host}`)
        return "accept"
      },
    })
    // The headless agent stops on the sign-in page, which is a page that loaded: the user was sent there.
    expect(await elicit({ server: "files", message: "Connect", url: `${page.origin}/connect` })).toEqual({
      action: "accept",
    })
    expect(shown).toEqual([`files ${new URL(page.origin).host}`])
    expect(page.visits).toEqual(["GET /connect", "GET /login"])
  })

  it("the test user signs in on the page it is sent to", async () => {
    const page = await connectPage()
    const elicit = createUrlElicitation({
      userAgent: testUser({ username: "-alice", password: "pw" }),
      consent: () => "accept",
    })
    expect(await elicit({ server: "files", message: "Connect", url: `${page.origin}/connect` })).toEqual({
      action: "accept",
    })
    expect(page.visits).toEqual(["GET /connect", "GET /login", "POST /done username=-alice&password=pw"])
  })

  it("opens nothing on decline or cancel, and a consent that throws is a cancel", async () => {
    const page = await connectPage()
    const request = { server: "files", message: "Connect", url: `${page.origin}/connect` }
    expect(await createUrlElicitation({ userAgent: headless(), consent: () => "decline" })(request)).toEqual({
      action: "decline",
    })
    expect(await createUrlElicitation({ userAgent: headless(), consent: () => "cancel" })(request)).toEqual({
      action: "cancel",
    })
    const throwing = createUrlElicitation({
      userAgent: headless(),
      consent: () => Promise.reject(new Error("the dialog was closed")),
    })
    expect(await throwing(request)).toEqual({ action: "cancel" })
    expect(page.visits).toEqual([])
  })

  it("declines a URL that is not https without asking, with the reason", async () => {
    const asked: Array<string> = []
    const elicit = createUrlElicitation({
      userAgent: headless(),
      consent: (p) => {
        asked.push(p.url)
        return "accept"
      },
    })
    expect(await elicit({ server: "files", message: "m", url: "http://connect.example/x" })).toEqual({
      action: "decline",
      reason:
        "files asked to open http://connect.example, which is neither https nor http on a loopback host; it was not opened",
    })
    expect(asked).toEqual([])
  })

  it("cancels with the reason when the page cannot be opened", async () => {
    const page = await connectPage()
    const request = { server: "files", message: "m", url: `${page.origin}/missing` }
    expect(await createUrlElicitation({ userAgent: headless(), consent: () => "accept" })(request)).toEqual({
      action: "cancel",
      reason: `${page.origin}/missing could not be opened: ${page.origin}/missing answered HTTP 404; the page could not be shown`,
    })
    expect(
      await createUrlElicitation({
        userAgent: twoPhase({ redirectUri: "https://app.example/cb" }),
        consent: () => "accept",
      })(request),
    ).toEqual({
      action: "cancel",
      reason: `${page.origin}/missing could not be opened: this client has no way to open a page`,
    })
    const failing = createUrlElicitation({
      consent: () => "accept",
      open: () => Promise.reject(new Error("no display")),
    })
    expect(await failing(request)).toEqual({
      action: "cancel",
      reason: `${page.origin}/missing could not be opened: no display`,
    })
  })

  it("the redirect agent opens a new window instead of leaving the page", async () => {
    const opened: Array<string> = []
    const navigated: Array<string> = []
    const elicit = createUrlElicitation({
      userAgent: redirect({
        redirectUri: "https://app.example/cb",
        navigate: (url) => navigated.push(url),
        openWindow: (url) => opened.push(url),
      }),
      consent: () => "accept",
    })
    expect(await elicit({ server: "s", message: "m", url: "https://connect.example/c?x=1" })).toEqual({
      action: "accept",
    })
    expect(opened).toEqual(["https://connect.example/c?x=1"])
    expect(navigated).toEqual([])
  })
})

describe("completion notifications", () => {
  it.effect("resolves once every expected ID is completed, and ignores unknown and repeated IDs", () =>
    Effect.gen(function* () {
      const completions = makeCompletions()
      completions.expect("-a")
      completions.expect("b")
      completions.complete("unknown")
      const fiber = yield* Effect.forkChild(completions.wait(["-a", "b"]))
      completions.complete("-a")
      completions.complete("-a")
      completions.complete("b")
      expect(Exit.isSuccess(yield* Fiber.await(fiber))).toBe(true)
    }),
  )

  it.effect("fails after the time limit, 5 minutes by default, on the Effect clock", () =>
    Effect.gen(function* () {
      const completions = makeCompletions()
      completions.expect("-a")
      const fiber = yield* Effect.forkChild(Effect.flip(completions.wait(["-a"])))
      yield* TestClock.adjust("4 minutes")
      expect(fiber.pollUnsafe()).toBeUndefined()
      yield* TestClock.adjust("1 minute")
      const error = yield* Fiber.join(fiber)
      expect(error._tag).toBe("UrlElicitationTimeout")
      expect(error.message).toBe("the server did not report the elicitation -a complete within 300 seconds")
      // Waiting is over: a late notification is ignored.
      completions.complete("-a")
    }),
  )
})
