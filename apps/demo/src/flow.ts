/**
 * The demo run: starts the stack, drives Keyway's client through the whole MCP authorization flow with the official
 * MCP SDK client on top, and prints the transcript; always shuts the stack down.
 *
 * @module
 */

import { createAuthClient, UserAgent } from "@keyway/client/node"
import { createTransport } from "@keyway/mcp-sdk-client"
import { Client } from "@modelcontextprotocol/client"
import { narrated, scriptedUser } from "./agent.js"
import { demoStore, resultText } from "./held.js"
import { recordingFetch } from "./recorder.js"
import { runScripted } from "./run.js"
import type { Write } from "./transcript.js"

/** Options of {@link runDemo}. */
export interface DemoOptions {
  /** The transcript (stdout). */
  readonly out: Write
  /** Progress and notices (stderr). */
  readonly err: Write
  /** Spinner on a terminal, plain lines otherwise, or nothing. */
  readonly progress?: "spinner" | "lines" | "off"
  /** ANSI styling of the transcript. */
  readonly color?: boolean
  /** Login and consent in a real browser instead of the scripted demo user. */
  readonly browser?: boolean
  /** How the browser is opened (default: $BROWSER, else the platform's opener). */
  readonly openBrowser?: (url: string) => Promise<void> | void
  readonly asPort?: number
  readonly mcpPort?: number
  /** Aborting stops the run and shuts the stack down. */
  readonly signal?: AbortSignal
  /** Test hook: every credential the run saw, called once at the end (even on failure). */
  readonly onSecrets?: (secrets: ReadonlyArray<string>) => void
}

/** What a successful run reports. */
export interface DemoResult {
  readonly steps: number
  readonly issuer: string
  readonly mcpUrl: string
}

const NAME = "Keyway demo client"

/** Runs the demo; resolves when the whole flow succeeded, rejects with the first failure. */
export const runDemo = (options: DemoOptions): Promise<DemoResult> =>
  runScripted(options, {}, async ({ stack, transcript, progress, redactor, narrator }) => {
    const { issuer, mcpUrl } = stack
    const user = stack.users[0] as { username: string; password: string }
    redactor.add(user.password, { lowEntropy: true })

    transcript.title("Keyway demo: MCP authorization, end to end")
    transcript.lines(
      [
        `authorization server  ${issuer}  (SQLite in ${stack.dataDir})`,
        `MCP server            ${mcpUrl}  (tools list_notes, read_note: notes:read; write_note: notes:write)`,
        `demo user             ${user.username}`,
        `client                ${NAME}: Keyway's client under the official MCP SDK v2 client, in memory`,
        "tokens, codes, verifiers, secrets and cookies are shown redacted, with a fingerprint (fp) to tell them apart",
      ],
      2,
    )

    const store = demoStore()
    const userAgent = options.browser
      ? narrated(
          UserAgent.browser({
            openBrowser: async (url) => {
              progress.around(() =>
                options.err(
                  `\nOpening the authorization page in your browser. Sign in as ${user.username} with the password ${user.password}, then Approve.\nIf no browser opens, visit:\n  ${url}\n\n`,
                ),
              )
              // Without a browser to start, the person can still open the URL printed above.
              await Promise.resolve((options.openBrowser ?? UserAgent.openSystemBrowser)(url)).catch((error: unknown) =>
                progress.around(() =>
                  options.err(
                    `${error instanceof Error ? error.message : String(error)}; open the URL above yourself.\n`,
                  ),
                ),
              )
            },
          }),
          narrator,
        )
      : scriptedUser({ narrator, username: user.username, password: user.password })
    const auth = createAuthClient({
      clientName: NAME,
      fetch: recordingFetch(
        (input, init) => globalThis.fetch(input, init),
        (exchange) => narrator.clientExchange(exchange),
      ),
      store: store.backend,
      userAgent,
    })
    const mcp = new Client({ name: "keyway-demo", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } })
    try {
      transcript.section("Connect: the first MCP request carries no token")
      progress.update(
        options.browser
          ? "waiting for login and consent in the browser"
          : "connecting: discovery, registration, login, consent, token",
      )
      await mcp.connect(createTransport(mcpUrl, auth))
      progress.update("listing the tools")
      const { tools } = await mcp.listTools()
      transcript.line(`tools: ${tools.map((tool) => tool.name).join(", ")}`)

      transcript.section("Call a read tool: list_notes needs notes:read, which the token has")
      progress.update("calling list_notes")
      const listed = await mcp.callTool({ name: "list_notes", arguments: {} })
      transcript.line(`list_notes → ${JSON.stringify(resultText(listed))}`)

      transcript.section("Call write_note: it needs notes:write, so the server answers 403 and the client steps up")
      progress.update(options.browser ? "step-up: waiting for consent in the browser" : "calling write_note (step-up)")
      const written = await mcp.callTool({
        name: "write_note",
        arguments: { title: "Hello", text: "Written by the Keyway demo after a step-up to notes:write." },
      })
      if (written.isError === true) throw new Error(`write_note failed: ${resultText(written)}`)
      transcript.line(`write_note → ${JSON.stringify(resultText(written))}`)
      const id = /#([\w-]+)/u.exec(resultText(written))?.[1] ?? "1"

      transcript.section("Refresh: the access token expires, the client refreshes before the next call")
      progress.update("refreshing the access token")
      const before = store.tokens()[0]
      if (before?.refresh_token === undefined) throw new Error("the authorization server issued no refresh token")
      transcript.note(
        `the access token held (scope "${before.scope}") is marked as expired in the client's store, as if its lifetime had run out`,
      )
      store.expireAccessTokens()
      const read = await mcp.callTool({ name: "read_note", arguments: { id } })
      if (read.isError === true) throw new Error(`read_note failed: ${resultText(read)}`)
      transcript.line(`read_note → ${JSON.stringify(resultText(read))}`)
      const after = store.tokens()[0]
      if (after === undefined || after.access_token === before.access_token) {
        throw new Error("the client did not refresh the access token")
      }

      transcript.section("Done")
      transcript.lines(
        [
          `${transcript.stepCount} steps. From one 401 the client discovered the protected resource and its authorization`,
          "server, registered itself, obtained a token bound to this MCP server with PKCE, stepped up when a tool needed",
          "more scope, and refreshed with a rotated refresh token. No token travelled in a URL; none is printed here.",
        ],
        2,
      )
      return { steps: transcript.stepCount, issuer, mcpUrl }
    } finally {
      progress.update("shutting down")
      await mcp.close().catch(() => undefined)
      await auth.dispose().catch(() => undefined)
    }
  })
