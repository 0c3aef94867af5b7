/**
 * The device demo run (`--scenario device`): an agent where no browser can open (a remote shell, a container) gets
 * its tokens with the device authorization grant (RFC 8628). It shows a code and a URI; the demo user, on another
 * device, opens the URI, signs in, types the code and approves; meanwhile the agent polls the token endpoint. The
 * tokens are the code flow's: bound to the notes server, refreshed without the user.
 *
 * @module
 */
import { createAuthClient } from "@keyway/client"
import { Grant } from "@keyway/core"
import { type DeviceCode, deviceAuthorization, printTo } from "@keyway/ext-device-authorization/client"
import { createTransport } from "@keyway/mcp-sdk-client"
import { deferred, type VisitedPage, visitor } from "@keyway/testing"
import { Client } from "@modelcontextprotocol/client"
import type { DemoOptions, DemoResult } from "./flow.js"
import { demoStore, resultText } from "./held.js"
import { dataTexts, textOf } from "./html.js"
import { DEVICE_STEPS, STEPS } from "./narrator.js"
import { recordingFetch } from "./recorder.js"
import { runScripted, type Scripted } from "./run.js"
import { DEVICE_CLIENT_ID } from "./stack.js"

/** The section titles of the device run, in order. */
export const DEVICE_SECTIONS = {
  connect: "Connect: the agent has no browser, so it asks for a device code and shows it to the user",
  user: "On another device: the user opens the URI, signs in, types the code and approves",
  call: "Call a tool: list_notes with the token the device flow obtained",
  refresh: "Refresh: the access token expires, the client refreshes it without the user",
} as const

const NAME = "Keyway demo terminal agent"

/** The text of a page's first `<h1>` (headings may hold markup). */
const headingOf = (page: VisitedPage): string => textOf(/<h1[^>]*>([\s\S]*?)<\/h1>/u.exec(page.html)?.[1] ?? "")

/** The page's first paragraph, as the user reads it. */
const paragraphOf = (page: VisitedPage): string => textOf(/<p>([\s\S]*?)<\/p>/u.exec(page.html)?.[1] ?? "")

/**
 * The demo user on another device, with a browser that keeps cookies (`visitor` of `@keyway/testing`): opens the
 * verification URI, signs in, types the code in lower case without its dash, reads the consent page and approves.
 */
const approveOnAnotherDevice = async (
  { transcript }: Scripted,
  code: DeviceCode,
  user: { readonly username: string; readonly password: string },
): Promise<void> => {
  const browser = visitor()
  const expectPage = (page: VisitedPage, heading: string) => {
    if (headingOf(page) !== heading) {
      throw new Error(
        `the verification page showed "${headingOf(page)}" (HTTP ${page.status}) where the demo user expected "${heading}": ${paragraphOf(page)}`,
      )
    }
  }
  transcript.section(DEVICE_SECTIONS.user)
  transcript.step(DEVICE_STEPS.verification)
  transcript.line(`→ GET ${code.verificationUri}  (typed in by hand on a phone or another computer)`)
  const login = await browser.go(code.verificationUri)
  expectPage(login, "Sign in")
  transcript.line(`  the browser shows "${headingOf(login)}": ${paragraphOf(login)}`)

  transcript.step(STEPS.login)
  const entry = await browser.submit(login, { username: user.username, password: user.password })
  expectPage(entry, "Connect a device")
  transcript.line(`  ${user.username} signs in; the browser shows "${headingOf(entry)}": ${paragraphOf(entry)}`)

  transcript.step(DEVICE_STEPS.code)
  const typed = code.userCode.replace("-", "").toLowerCase()
  transcript.line(
    `  ${user.username} types "${typed}": the code ${code.userCode} in lower case and without its dash; the server compares codes without either`,
  )
  const consent = await browser.submit(entry, { user_code: typed })
  expectPage(consent, `Authorize ${dataTexts(consent.html, "client-name")[0] ?? ""}?`)

  transcript.step(DEVICE_STEPS.consent)
  const first = (name: string) => dataTexts(consent.html, name)[0] ?? "(none)"
  transcript.line("  the browser shows the consent page:")
  transcript.table(
    [
      ["heading", headingOf(consent)],
      ["client", first("client-name")],
      ["resource", first("resource")],
      ...dataTexts(consent.html, "scope").map((scope, i) => [i === 0 ? "scopes" : "", scope] as [string, string]),
      ["code", first("user-code")],
      ["warning", first("remote-warning")],
    ],
    8,
  )
  const done = await browser.submit(consent, { decision: "approve" })
  expectPage(done, "Device connected")
  transcript.line(`  ${user.username} clicks Approve; the browser shows "${headingOf(done)}": ${paragraphOf(done)}`)
  transcript.note("the agent learns of the approval at its next poll")
}

/** Runs the device scenario; resolves when the whole flow went as it should. */
export const runDeviceDemo = (options: DemoOptions): Promise<DemoResult> =>
  runScripted(options, { device: true }, async (scripted) => {
    const { stack, transcript, progress, redactor, narrator } = scripted
    const { issuer, mcpUrl } = stack
    const user = stack.users[0] as { username: string; password: string }
    redactor.add(user.password, { lowEntropy: true })

    transcript.title("Keyway demo: an agent without a browser (OAuth 2.0 device authorization grant, RFC 8628)")
    transcript.lines(
      [
        `authorization server  ${issuer}  (SQLite in ${stack.dataDir}; device authorization on, polling interval 1 second)`,
        `MCP server            ${mcpUrl}  (tools list_notes, read_note: notes:read; write_note: notes:write)`,
        `demo user             ${user.username}, on another device`,
        `client                ${DEVICE_CLIENT_ID}: a public client pre-registered for the device grant; Keyway's client with @keyway/ext-device-authorization, no browser`,
        "tokens, device codes, secrets and cookies are shown redacted, with a fingerprint (fp) to tell them apart",
      ],
      2,
    )

    // The user acts once the agent has heard "authorization_pending", so the transcript shows the wait.
    const pending = deferred()
    let approval: Promise<void> | undefined
    let failure: unknown
    // Stops the polling when the demo user fails or the demo is interrupted.
    const stop = new AbortController()
    const interrupt = () => stop.abort()
    options.signal?.addEventListener("abort", interrupt, { once: true })
    const store = demoStore()
    const auth = createAuthClient({
      clientName: NAME,
      clients: [{ issuer, client_id: DEVICE_CLIENT_ID }],
      fetch: recordingFetch(
        (input, init) => globalThis.fetch(input, init),
        (exchange) => {
          narrator.clientExchange(exchange)
          const grant = new URLSearchParams(exchange.requestBody ?? "").get("grant_type")
          if (grant === Grant.DEVICE_CODE && exchange.responseBody?.includes('"authorization_pending"') === true) {
            pending.resolve()
          }
        },
      ),
      store: store.backend,
      extensions: [
        deviceAuthorization({
          signal: stop.signal,
          show: (code) => {
            transcript.note(
              "the agent shows the user, on its terminal (where a terminal can, a QR code of the complete URI follows; not in this transcript):",
            )
            printTo({ write: (text) => transcript.lines(text.trimEnd().split("\n"), 6) })(code)
            progress.update(`waiting for ${user.username} to enter ${code.userCode} on another device`)
            approval = pending.promise
              .then(() => approveOnAnotherDevice(scripted, code, user))
              .catch((error: unknown) => {
                failure = error
                stop.abort()
              })
          },
        }),
      ],
    })
    // How many device authorizations the agent asked for: the refresh must not ask again.
    const asked = () => narrator.exchanges.filter((e) => e.url.href === `${issuer}/device_authorization`).length
    const mcp = new Client({ name: "keyway-demo-device", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } })
    try {
      transcript.section(DEVICE_SECTIONS.connect)
      progress.update("connecting: discovery, device authorization, polling")
      await mcp.connect(createTransport(mcpUrl, auth)).catch(async (error: unknown) => {
        await approval
        throw failure ?? error
      })
      await approval
      const askedBefore = asked()
      const { tools } = await mcp.listTools()
      transcript.line(`tools: ${tools.map((tool) => tool.name).join(", ")}`)

      transcript.section(DEVICE_SECTIONS.call)
      progress.update("calling list_notes")
      const listed = await mcp.callTool({ name: "list_notes", arguments: {} })
      if (listed.isError === true) throw new Error(`list_notes failed: ${resultText(listed)}`)
      transcript.line(`list_notes → ${JSON.stringify(resultText(listed))}`)

      transcript.section(DEVICE_SECTIONS.refresh)
      progress.update("refreshing the access token")
      const before = store.tokens()[0]
      if (before?.refresh_token === undefined) throw new Error("the authorization server issued no refresh token")
      transcript.note(
        `the access token held (scope "${before.scope}") is marked as expired in the client's store, as if its lifetime had run out`,
      )
      store.expireAccessTokens()
      const again = await mcp.callTool({ name: "list_notes", arguments: {} })
      if (again.isError === true) throw new Error(`list_notes failed: ${resultText(again)}`)
      transcript.line(`list_notes → ${JSON.stringify(resultText(again))}`)
      const after = store.tokens()[0]
      if (after === undefined || after.access_token === before.access_token) {
        throw new Error("the client did not refresh the access token")
      }
      if (asked() !== askedBefore) {
        throw new Error("the refresh asked the user again")
      }

      transcript.section("Done")
      transcript.lines(
        [
          `${transcript.stepCount} steps. The agent never opened a browser: it asked for a device code, showed the user a`,
          "short code and where to enter it, and polled while the user signed in and approved on another device, warned",
          "that the request began elsewhere. It got the code flow's tokens, bound to this MCP server, and refreshed them",
          "without the user. No token, device code or secret is printed here.",
        ],
        2,
      )
      return { steps: transcript.stepCount, issuer, mcpUrl }
    } finally {
      options.signal?.removeEventListener("abort", interrupt)
      stop.abort()
      progress.update("shutting down")
      await mcp.close().catch(() => undefined)
      await auth.dispose().catch(() => undefined)
    }
  })
