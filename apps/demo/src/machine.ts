/**
 * The machine-to-machine demo runs (`--scenario client-credentials`, `--scenario workload-identity`): no user, no
 * browser; the client obtains tokens with an extension grant and is narrated like the default run.
 *
 * @module
 */
import { createAuthClient, Extension, isAuthError } from "@keyway/client"
import { clientCredentials } from "@keyway/ext-client-credentials/client"
import { createTransport } from "@keyway/mcp-sdk-client"
import { Client } from "@modelcontextprotocol/client"
import type { Scenario } from "./cli.js"
import type { DemoOptions, DemoResult } from "./flow.js"
import { demoStore, resultText } from "./held.js"
import { Narrator } from "./narrator.js"
import { recordingFetch } from "./recorder.js"
import { Redactor } from "./redact.js"
import { MACHINE_CLIENT_ID, type Stack, startStack } from "./stack.js"
import { Progress, Transcript } from "./transcript.js"

/** The machine-to-machine scenarios. */
export type MachineScenario = Exclude<Scenario, "default" | "enterprise">

/** Runs a machine-to-machine scenario; resolves when the whole flow went as it should. */
export const runMachineDemo = async (_scenario: MachineScenario, options: DemoOptions): Promise<DemoResult> => {
  const progress = new Progress(options.err, options.progress ?? "off")
  const redactor = new Redactor()
  const transcript = new Transcript({ write: options.out, redactor, progress, color: options.color ?? false })
  let narrator: Narrator | undefined
  let stack: Stack | undefined
  const onAbort = () => {
    void stack?.close().catch(() => undefined)
  }
  options.signal?.addEventListener("abort", onAbort, { once: true })
  try {
    progress.update("starting the authorization server and the MCP server")
    stack = await startStack({
      ...(options.asPort === undefined ? {} : { asPort: options.asPort }),
      ...(options.mcpPort === undefined ? {} : { mcpPort: options.mcpPort }),
      machineClient: true,
      log: (source, line) => narrator?.serverLog(source, line),
    })
    if (options.signal?.aborted === true) throw new Error("interrupted")
    const { issuer, mcpUrl } = stack
    for (const client of stack.clients) if (client.client_secret !== undefined) redactor.add(client.client_secret)
    const machine = stack.clients.find((c) => c.client_id === MACHINE_CLIENT_ID)
    if (machine?.client_secret === undefined) throw new Error("the stack has no machine client")
    narrator = new Narrator(transcript, redactor, { mcpUrl, issuer })

    transcript.title("Keyway demo: a machine client with OAuth client credentials (no user, no browser)")
    transcript.lines(
      [
        `authorization server  ${issuer}  (SQLite in ${stack.dataDir}; client credentials extension on)`,
        `MCP server            ${mcpUrl}  (tools list_notes, read_note: notes:read; write_note: notes:write)`,
        `client                ${MACHINE_CLIENT_ID}: pre-registered for client_credentials, client_secret_basic, allowed notes:read only`,
        "the client is Keyway's client with @keyway/ext-client-credentials, under the official MCP SDK v2 client",
        "tokens and secrets are shown redacted, with a fingerprint (fp) to tell them apart",
      ],
      2,
    )

    const store = demoStore()
    const extensions = [clientCredentials({ issuer, clientId: MACHINE_CLIENT_ID, clientSecret: machine.client_secret })]
    const auth = createAuthClient({
      clientName: "Keyway demo machine client",
      extensions,
      fetch: recordingFetch(
        (input, init) => globalThis.fetch(input, init),
        (exchange) => narrator?.clientExchange(exchange),
      ),
      store: store.backend,
    })
    // The extension is declared in the client capabilities (with every request on the 2026-07-28 wire).
    const mcp = new Client(
      { name: "keyway-demo-machine", version: "1.0.0" },
      { capabilities: Extension.capabilities(extensions), versionNegotiation: { mode: "auto" } },
    )
    try {
      transcript.section(
        "Connect: the first MCP request carries no token; the client uses its own credentials, no user",
      )
      progress.update("connecting: discovery, client credentials, token")
      await mcp.connect(createTransport(mcpUrl, auth))
      const { tools } = await mcp.listTools()
      transcript.line(`tools: ${tools.map((tool) => tool.name).join(", ")}`)

      transcript.section("Call a read tool: list_notes needs notes:read, which the token has")
      progress.update("calling list_notes")
      const listed = await mcp.callTool({ name: "list_notes", arguments: {} })
      transcript.line(`list_notes → ${JSON.stringify(resultText(listed))}`)

      transcript.section("Call write_note: it needs notes:write, which this machine client was never allowed")
      progress.update("calling write_note (refused)")
      const refused = await mcp
        .callTool({ name: "write_note", arguments: { title: "Nightly", text: "from the machine client" } })
        .then(
          () => undefined,
          (error: unknown) => error,
        )
      const cause = (refused as { cause?: unknown } | undefined)?.cause ?? refused
      if (!isAuthError(cause) || cause.reason !== "insufficient-scope") {
        throw new Error(`write_note should have been refused with insufficient-scope, got ${String(refused)}`)
      }
      transcript.note(
        `the client stops with a typed error (${cause.step}/${cause.reason}) instead of asking for more scope: a machine client does not step up unless configured to (stepUp), and its operator allowed it notes:read only`,
      )

      transcript.section(
        "Renewal: the access token nears its expiry; the client obtains a new one with its credentials",
      )
      progress.update("renewing the access token")
      const before = store.tokens()[0]
      if (before === undefined) throw new Error("the client holds no token")
      if (before.refresh_token !== undefined) throw new Error("a client credentials grant issued a refresh token")
      transcript.note(
        "the access token held has no refresh token (client credentials issue none); it is marked as expiring in 30 seconds in the client's store",
      )
      store.nearExpiry()
      const again = await mcp.callTool({ name: "list_notes", arguments: {} })
      transcript.line(`list_notes → ${JSON.stringify(resultText(again))}`)
      const after = store.tokens()[0]
      if (after === undefined || after.access_token === before.access_token) {
        throw new Error("the client did not obtain a new access token")
      }

      transcript.section("Done")
      transcript.lines(
        [
          `${transcript.stepCount} steps. From one 401 the client discovered the protected resource and its authorization`,
          "server, and obtained a token bound to this MCP server with its own pre-registered credentials: no registration,",
          "no user, no browser, no refresh token. It stayed within the scope its operator allowed and renewed its token",
          "before it expired. No token or secret is printed here.",
        ],
        2,
      )
      return { steps: transcript.stepCount, issuer, mcpUrl }
    } finally {
      progress.update("shutting down")
      await mcp.close().catch(() => undefined)
      await auth.dispose().catch(() => undefined)
    }
  } catch (error) {
    if (options.signal?.aborted === true) throw new Error("interrupted")
    throw error
  } finally {
    options.signal?.removeEventListener("abort", onAbort)
    await stack?.close().catch(() => undefined)
    progress.stop()
    options.onSecrets?.(redactor.secrets())
  }
}
