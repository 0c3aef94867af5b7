/**
 * The connected-account demo run (`--scenario connected-account`): the notes MCP server reads the user's repositories
 * at a third-party code host (node-oidc-provider with its own login, and its API), with the user's own account there,
 * connected through MCP URL-mode elicitation and kept in the notes server's encrypted vault. The agent is the default
 * run's Keyway client with URL-mode elicitation declared (`urlElicitation` of `@keyway/mcp-sdk-client`).
 *
 * @module
 */
import { createAuthClient } from "@keyway/client/node"
import { createTransport, urlElicitation } from "@keyway/mcp-sdk-client"
import { Client } from "@modelcontextprotocol/client"
import { Effect } from "effect"
import { TestClock } from "effect/testing"
import { scriptedUser } from "./agent.js"
import type { DemoOptions, DemoResult } from "./flow.js"
import { demoStore, resultText } from "./held.js"
import { firstForm, textOf, titleOf } from "./html.js"
import { CONNECTED_STEPS, type Narrator } from "./narrator.js"
import { type Exchange, recordingFetch, statusText } from "./recorder.js"
import type { Redactor } from "./redact.js"
import { runScripted } from "./run.js"
import { CODE_HOST_TOKEN_TTL } from "./stack.js"

/** The section titles of the connected-account run, in order. */
export const CONNECTED_SECTIONS = {
  connect: "Connect: the agent signs the user in as in the default run, declaring URL-mode elicitation",
  ask: "Call list_code_repositories: the notes server has no Code Host account for the user, so it asks for one",
  follow: "The user follows the link: the connect page, the code host's login and consent, the callback",
  retried: "The retried call: the connection is in the vault, the tool answers",
  silent: "A second call: the vault answers, no elicitation",
  refresh: "The access token expires at the code host: the next call refreshes it there and succeeds",
  disconnect: "Disconnect: the token is revoked at the code host, and the next call asks again",
} as const

const NAME = "Keyway demo client"
const TOOL = { name: "list_code_repositories", arguments: {} }

/** The visible text of a page: its body without styles and scripts, a space where a block (heading, paragraph...) ends. */
const visibleText = (html: string): string =>
  textOf(
    (/<body[^>]*>([\s\S]*?)<\/body>/u.exec(html)?.[1] ?? html)
      .replace(/<style[\s\S]*?<\/style>/gu, "")
      .replace(/<script[\s\S]*?<\/script>/gu, "")
      .replace(
        /<\/(?:h[1-6]|p|div|li|ul|ol|pre|section|header|footer|form|button|label|tr|td|th|br)\s*>|<br\s*\/?>/giu,
        "$& ",
      ),
  )

/** The user's browser on the connect pages and at the code host: cookies, redirects, forms; every exchange narrated. */
const connectBrowser = (narrator: Narrator, redactor: Redactor, mcpOrigin: string, password: string) => {
  const jar = new Map<string, Map<string, string>>()
  let last: { url: URL; html: string } | undefined
  const titleFor = (url: URL, method: string): string | undefined => {
    if (url.origin !== mcpOrigin) return CONNECTED_STEPS.provider
    if (url.pathname.endsWith("/callback")) return CONNECTED_STEPS.callback
    if (url.pathname.endsWith("/disconnect")) return CONNECTED_STEPS.disconnect
    return method === "GET" ? CONNECTED_STEPS.connectPage : CONNECTED_STEPS.start
  }
  const send = async (url: URL, method: string, body?: URLSearchParams) => {
    const headers = new Headers()
    const cookies = jar.get(url.host)
    if (cookies !== undefined && cookies.size > 0) {
      headers.set("cookie", [...cookies].map(([k, v]) => `${k}=${v}`).join("; "))
    }
    if (body !== undefined) {
      headers.set("content-type", "application/x-www-form-urlencoded")
      headers.set("origin", url.origin)
      // The connect form's CSRF token and the link's reference are capabilities: never printed.
      for (const name of ["csrf", "ref"]) redactor.add(body.get(name))
    }
    const sent = body?.toString()
    const response = await fetch(url, {
      method,
      headers,
      redirect: "manual",
      ...(sent === undefined ? {} : { body: sent }),
    })
    const text = await response.text()
    for (const line of response.headers.getSetCookie()) {
      const [pair = ""] = line.split(";")
      const eq = pair.indexOf("=")
      if (eq <= 0) continue
      const store = jar.get(url.host) ?? new Map<string, string>()
      store.set(pair.slice(0, eq).trim(), pair.slice(eq + 1).trim())
      jar.set(url.host, store)
    }
    const exchange: Exchange = {
      method,
      url,
      requestHeaders: headers,
      requestBody: sent,
      status: response.status,
      statusText: statusText(response.status, response.statusText),
      responseHeaders: response.headers,
      responseBody: text === "" ? undefined : text,
    }
    narrator.connectExchange(exchange, titleFor(url, method))
    return { exchange, text }
  }
  /** Loads `start` and goes on through redirects and the pages' forms until a page with nothing left to do. */
  const visit = async (start: URL, method = "GET", body?: URLSearchParams): Promise<string> => {
    let next: { url: URL; method: string; body?: URLSearchParams } = {
      url: start,
      method,
      ...(body === undefined ? {} : { body }),
    }
    for (let hop = 0; hop < 20; hop++) {
      const { exchange, text } = await send(next.url, next.method, next.body)
      const location = exchange.responseHeaders.get("location")
      if (exchange.status >= 300 && exchange.status < 400 && location !== null) {
        next = { url: new URL(location, next.url), method: "GET" }
        continue
      }
      const form = firstForm(text)
      const title = titleOf(text) ?? ""
      narrator.pageShown(title, visibleText(text).slice(0, 240))
      last = { url: next.url, html: text }
      // The pages that need the user: the connect page (its button), the code host's login and its consent.
      const input = form?.inputs
      if (form === undefined || exchange.status !== 200 || next.url.pathname.endsWith("/callback")) return text
      const fields = new URLSearchParams([...form.inputs])
      if (input?.has("login") === true) {
        fields.set("login", "alice")
        fields.set("password", password)
        redactor.add(password, { lowEntropy: true })
      }
      next = { url: new URL(form.action, next.url), method: "POST", body: fields }
    }
    throw new Error("more than 20 redirects or pages")
  }
  return {
    open: async (url: string) => {
      await visit(new URL(url))
    },
    /** Presses the button of the page shown last (the completion page's Disconnect). */
    pressLast: async () => {
      if (last === undefined) throw new Error("no page to press a button on")
      const form = firstForm(last.html)
      if (form === undefined) throw new Error("the last page has no form")
      const url = new URL(form.action, last.url)
      const { text } = await send(url, "POST", new URLSearchParams([...form.inputs]))
      return visibleText(text)
    },
  }
}

/** Runs the connected-account scenario; resolves when every step went as it should. */
export const runConnectedDemo = async (
  options: DemoOptions & {
    /** Test hook: every token the code host issued, called once at the end (even on failure). */
    readonly onCodeHostTokens?: (tokens: ReadonlyArray<string>) => void
  },
): Promise<DemoResult> => {
  // The notes server's connections read this clock: moved on, it lets a Code Host token's lifetime pass at once.
  const clock = await Effect.runPromise(Effect.scoped(TestClock.make({ warningDelay: "1 hour" })))
  await Effect.runPromise(clock.setTime(Date.now()))
  return runScripted(options, { connected: { clock } }, async ({ stack, transcript, progress, redactor, narrator }) => {
    const { issuer, mcpUrl, codeHost } = stack
    if (codeHost === undefined) throw new Error("the stack has no code host")
    const user = stack.users[0] as { username: string; password: string }
    redactor.add(user.password, { lowEntropy: true })
    const mcpOrigin = new URL(mcpUrl).origin

    transcript.title("Keyway demo: the user's own account at a third party, through URL-mode elicitation")
    transcript.lines(
      [
        `authorization server  ${issuer}  (the MCP server's; it knows nothing of the code host)`,
        `MCP server            ${mcpUrl}  (notes; list_code_repositories reads the user's Code Host account; connect pages at ${mcpOrigin}/connect/)`,
        `code host             ${codeHost.issuer}  (a third party: node-oidc-provider with its own login; its API at ${codeHost.apiBase})`,
        `demo user             ${user.username}, at both`,
        `client                ${NAME}: the default run's agent, with URL-mode elicitation declared`,
        "tokens, codes, verifiers, secrets, cookies and the connect link's reference are shown redacted",
      ],
      2,
    )

    const store = demoStore()
    const auth = createAuthClient({
      clientName: NAME,
      fetch: recordingFetch(
        (input, init) => globalThis.fetch(input, init),
        (exchange) => narrator.clientExchange(exchange),
      ),
      store: store.backend,
      userAgent: scriptedUser({ narrator, username: user.username, password: user.password }),
    })
    const browser = connectBrowser(narrator, redactor, mcpOrigin, user.password)
    let decision: "accept" | "decline" = "accept"
    const asked: Array<string> = []
    const mcp = new Client({ name: "keyway-demo", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } })
    const elicit = urlElicitation(mcp, {
      consent: (prompt) => {
        asked.push(prompt.url)
        redactor.add(new URL(prompt.url).searchParams.get("ref"))
        transcript.note("the notes server answers with a URL-mode elicitation; the agent shows the user:", 4)
        transcript.table(
          [
            ["server", prompt.server],
            ["host", prompt.host],
            ["url", prompt.url],
            ["message", prompt.message],
          ],
          8,
        )
        transcript.line(`  ${user.username} answers ${decision}`)
        return decision
      },
      open: async (url) => {
        transcript.section(CONNECTED_SECTIONS.follow)
        await browser.open(url)
        transcript.section(CONNECTED_SECTIONS.retried)
        transcript.note(
          "the agent answers accept and retries the call (MCP 2026-07-28: the answer rides the retry); the notes server finds the connection the callback stored",
        )
      },
    })
    const call = async (label: string) => {
      const result = await elicit.callTool(TOOL)
      if (result.isError === true) throw new Error(`${label}: ${resultText(result)}`)
      transcript.line(`list_code_repositories → ${JSON.stringify(resultText(result))}`)
      return result
    }
    try {
      transcript.section(CONNECTED_SECTIONS.connect)
      progress.update("connecting: discovery, registration, login, consent, token")
      await mcp.connect(createTransport(mcpUrl, auth))
      const { tools } = await mcp.listTools()
      transcript.line(`tools: ${tools.map((tool) => tool.name).join(", ")}`)

      transcript.section(CONNECTED_SECTIONS.ask)
      progress.update("calling list_code_repositories: elicitation, connect, retry")
      await call("the first call")
      if (asked.length !== 1 || codeHost.counts.codes !== 1) throw new Error("the first call did not connect once")

      transcript.section(CONNECTED_SECTIONS.silent)
      progress.update("calling list_code_repositories again")
      await call("the second call")
      if (asked.length !== 1) throw new Error("the second call asked again")

      transcript.section(CONNECTED_SECTIONS.refresh)
      progress.update("expiring the access token at the code host")
      const expired = await codeHost.expireAccessTokens()
      await Effect.runPromise(clock.adjust(`${CODE_HOST_TOKEN_TTL} seconds`))
      transcript.note(
        `the code host ends its ${expired} access token(s) (their lifetime, ${CODE_HOST_TOKEN_TTL} s, is over), and the notes server's clock moves on as much`,
      )
      const refreshes = codeHost.counts.refreshes
      await call("the call after expiry")
      if (codeHost.counts.refreshes !== refreshes + 1 || asked.length !== 1) {
        throw new Error("the call after expiry did not refresh at the code host")
      }

      transcript.section(CONNECTED_SECTIONS.disconnect)
      progress.update("disconnecting")
      transcript.note("the user presses Disconnect on the page the connection ended on")
      const revocations = codeHost.counts.revocations
      const shown = await browser.pressLast()
      transcript.line(`  the browser shows: ${shown}`)
      if (codeHost.counts.revocations <= revocations) throw new Error("the code host saw no revocation")
      decision = "decline"
      const again = await elicit.callTool(TOOL)
      if (asked.length < 2 || again.isError !== true) throw new Error("the call after disconnecting did not ask again")
      transcript.line(`list_code_repositories → ${JSON.stringify(resultText(again))}  (isError)`)

      transcript.section("Done")
      transcript.lines(
        [
          `${transcript.stepCount} steps. The notes server asked the agent to send the user to a page of its own, ran the`,
          "code host's OAuth flow there (PKCE, state bound to the user and this browser), kept the tokens encrypted in",
          "its vault, answered later calls silently, refreshed at the code host when the token expired, and revoked it",
          "there on disconnect. The agent never saw a Code Host token; none is printed here.",
        ],
        2,
      )
      return { steps: transcript.stepCount, issuer, mcpUrl }
    } finally {
      progress.update("shutting down")
      options.onCodeHostTokens?.(codeHost.issuedTokens())
      await mcp.close().catch(() => undefined)
      await auth.dispose().catch(() => undefined)
    }
  })
}
