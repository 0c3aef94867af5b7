/**
 * The machine-to-machine demo runs (`--scenario client-credentials`, `--scenario workload-identity`): no user, no
 * browser; the client obtains tokens with an extension grant and is narrated like the default run.
 *
 * @module
 */
import { createAuthClient, Extension, isAuthError } from "@keyway/client"
import { clientCredentials } from "@keyway/ext-client-credentials/client"
import { workloadIdentity } from "@keyway/ext-workload-identity/client"
import { createTransport } from "@keyway/mcp-sdk-client"
import { Client } from "@modelcontextprotocol/client"
import type { Scenario } from "./cli.js"
import type { DemoOptions, DemoResult } from "./flow.js"
import { demoStore, resultText } from "./held.js"
import { recordingFetch } from "./recorder.js"
import { runScripted, type Scripted } from "./run.js"
import { MACHINE_CLIENT_ID } from "./stack.js"
import { startWorkloadPlatform, WORKLOAD_SUBJECT } from "./workload.js"

/** The machine-to-machine scenarios. */
export type MachineScenario = Exclude<Scenario, "default" | "enterprise" | "downstream">

/** What differs between the machine scenarios. */
interface Machine {
  readonly title: string
  readonly lines: ReadonlyArray<string>
  readonly extension: Extension.ClientExtension
  /** How the client gets its credentials, for the first section's title. */
  readonly credentials: string
  /** Extra steps after the first tool call. */
  readonly afterConnect?: () => Promise<void>
  readonly summary: ReadonlyArray<string>
}

/** The steps every machine scenario shows: connect, read, a write refused for scope, renewal before expiry. */
const script = async ({ stack, transcript, progress, narrator }: Scripted, machine: Machine): Promise<DemoResult> => {
  const { issuer, mcpUrl } = stack
  transcript.title(machine.title)
  transcript.lines(machine.lines, 2)
  const store = demoStore()
  const extensions = [machine.extension]
  const auth = createAuthClient({
    clientName: "Keyway demo machine client",
    extensions,
    fetch: recordingFetch(
      (input, init) => globalThis.fetch(input, init),
      (exchange) => narrator.clientExchange(exchange),
    ),
    store: store.backend,
  })
  // The extension is declared in the client capabilities (with every request on the 2026-07-28 wire).
  const mcp = new Client(
    { name: "keyway-demo-machine", version: "1.0.0" },
    { capabilities: Extension.capabilities(extensions), versionNegotiation: { mode: "auto" } },
  )
  try {
    transcript.section(`Connect: the first MCP request carries no token; the client uses ${machine.credentials}`)
    progress.update("connecting: discovery, the extension's grant, token")
    await mcp.connect(createTransport(mcpUrl, auth))
    const { tools } = await mcp.listTools()
    transcript.line(`tools: ${tools.map((tool) => tool.name).join(", ")}`)

    transcript.section("Call a read tool: list_notes needs notes:read, which the token has")
    progress.update("calling list_notes")
    const listed = await mcp.callTool({ name: "list_notes", arguments: {} })
    transcript.line(`list_notes → ${JSON.stringify(resultText(listed))}`)
    await machine.afterConnect?.()

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
      `the client stops with a typed error (${cause.step}/${cause.reason}) instead of asking for more scope: a machine client does not step up, and its operator allowed it notes:read only`,
    )

    transcript.section("Renewal: the access token nears its expiry; the client obtains a new one on its own")
    progress.update("renewing the access token")
    const before = store.tokens()[0]
    if (before === undefined) throw new Error("the client holds no token")
    if (before.refresh_token !== undefined) throw new Error("a machine grant issued a refresh token")
    transcript.note(
      "the access token held has no refresh token (these grants issue none); it is marked as expiring in 30 seconds in the client's store",
    )
    store.nearExpiry()
    const again = await mcp.callTool({ name: "list_notes", arguments: {} })
    transcript.line(`list_notes → ${JSON.stringify(resultText(again))}`)
    const after = store.tokens()[0]
    if (after === undefined || after.access_token === before.access_token) {
      throw new Error("the client did not obtain a new access token")
    }

    transcript.section("Done")
    transcript.lines([`${transcript.stepCount} steps. ${machine.summary[0] ?? ""}`, ...machine.summary.slice(1)], 2)
    return { steps: transcript.stepCount, issuer, mcpUrl }
  } finally {
    progress.update("shutting down")
    await mcp.close().catch(() => undefined)
    await auth.dispose().catch(() => undefined)
  }
}

const runClientCredentials = (options: DemoOptions): Promise<DemoResult> =>
  runScripted(options, { machineClient: true }, (scripted) => {
    const { issuer, mcpUrl, dataDir } = scripted.stack
    const machine = scripted.stack.clients.find((c) => c.client_id === MACHINE_CLIENT_ID)
    if (machine?.client_secret === undefined) throw new Error("the stack has no machine client")
    return script(scripted, {
      title: "Keyway demo: a machine client with OAuth client credentials (no user, no browser)",
      lines: [
        `authorization server  ${issuer}  (SQLite in ${dataDir}; client credentials extension on)`,
        `MCP server            ${mcpUrl}  (tools list_notes, read_note: notes:read; write_note: notes:write)`,
        `client                ${MACHINE_CLIENT_ID}: pre-registered for client_credentials, client_secret_basic, allowed notes:read only`,
        "the client is Keyway's client with @keyway/ext-client-credentials, under the official MCP SDK v2 client",
        "tokens and secrets are shown redacted, with a fingerprint (fp) to tell them apart",
      ],
      extension: clientCredentials({ issuer, clientId: MACHINE_CLIENT_ID, clientSecret: machine.client_secret }),
      credentials: "its own pre-registered credentials, no user",
      summary: [
        "From one 401 the client discovered the protected resource and its authorization",
        "server, and obtained a token bound to this MCP server with its own pre-registered credentials: no registration,",
        "no user, no browser, no refresh token. It stayed within the scope its operator allowed and renewed its token",
        "before it expired. No token or secret is printed here.",
      ],
    })
  })

const runWorkloadIdentity = async (options: DemoOptions): Promise<DemoResult> => {
  const platform = await startWorkloadPlatform()
  try {
    return await runScripted(
      options,
      { workloadIssuer: { issuer: platform.issuer, jwksUri: platform.jwksUri, subject: WORKLOAD_SUBJECT } },
      (scripted) => {
        const { issuer, mcpUrl, dataDir } = scripted.stack
        const { transcript, narrator, redactor } = scripted
        let last: string | undefined
        return script(scripted, {
          title: "Keyway demo: a workload with the JWT its platform issued it (workload identity federation)",
          lines: [
            `authorization server  ${issuer}  (SQLite in ${dataDir}; trusts the workload issuer below)`,
            `MCP server            ${mcpUrl}  (tools list_notes, read_note: notes:read; write_note: notes:write)`,
            `workload platform     ${platform.issuer}  (keys at ${platform.jwksUri}; plays Kubernetes or SPIFFE)`,
            `workload              ${WORKLOAD_SUBJECT}: no client ID, no secret; allowed notes:read only`,
            "the client is Keyway's client with @keyway/ext-workload-identity, under the official MCP SDK v2 client",
            "tokens and the workload's JWTs are shown redacted, with a fingerprint (fp) to tell them apart",
          ],
          extension: workloadIdentity({
            // The platform mints a short-lived JWT for the authorization server's token endpoint on each request.
            assertion: async ({ tokenEndpoint }) => {
              const minted = await platform.mint(tokenEndpoint)
              redactor.add(minted.jwt)
              last = minted.jwt
              transcript.note(
                `the workload platform issues a fresh JWT for the token endpoint: ${JSON.stringify(minted.claims)}`,
              )
              return minted.jwt
            },
          }),
          credentials: "the JWT its platform issued it, no client ID",
          afterConnect: async () => {
            if (last === undefined) throw new Error("no workload JWT was presented")
            transcript.section("Replay: the same workload JWT presented again is refused (its jti is spent)")
            const url = `${issuer}/token`
            const replay = await recordingFetch(
              (input, init) => globalThis.fetch(input, init),
              (exchange) => narrator.clientExchange(exchange),
            )(url, {
              method: "POST",
              headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
              body: new URLSearchParams({
                grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer",
                assertion: last,
                resource: mcpUrl,
              }).toString(),
            })
            if (replay.status !== 400) throw new Error(`a replayed workload JWT was answered ${replay.status}`)
          },
          summary: [
            "From one 401 the client discovered the protected resource and its authorization",
            "server, and exchanged the JWT its workload platform issued it for a token bound to this MCP server: no client",
            "ID, no secret, no registration, no user. A replayed JWT was refused, the scope stayed within what the operator's",
            "rule allows, and a new JWT bought a new token before the old one expired. No token or JWT is printed here.",
          ],
        })
      },
    )
  } finally {
    await platform.close()
  }
}

/** Runs a machine-to-machine scenario; resolves when the whole flow went as it should. */
export const runMachineDemo = (scenario: MachineScenario, options: DemoOptions): Promise<DemoResult> =>
  scenario === "client-credentials" ? runClientCredentials(options) : runWorkloadIdentity(options)
