/**
 * One flow in a fresh process, started by run.ts: `node bench/flow.ts <scenario> <json>` prints one JSON line with
 * its figures. Scenarios:
 *
 * - `keyway`: Keyway's client (`createAuthClient` from `@keyway/client/node`, its drop-in fetch under the official
 *   SDK's `Client` and Streamable HTTP transport), store in a file when `file` is given, else in memory;
 * - `sdk`: the official SDK's client with its own OAuth (`authProvider`), an in-memory provider as in the SDK's
 *   examples, `finishAuth` with the callback, then a second connect, as an application does;
 * - `warm`: Keyway's client again on the file a previous `keyway` process left, whose access token run.ts marked
 *   expired.
 *
 * Every scenario connects (MCP `initialize`). The clock starts when the application calls `connect` (after the
 * modules are loaded; their load time is reported apart) and stops when the first 2xx answer to an MCP request
 * arrives. Both clients and the scripted user send through the same wire meter (wire.ts). With BENCH_TIMELINE=1 in
 * the environment the line also lists when each request was sent and answered (milliseconds from the start).
 */
import { randomBytes } from "node:crypto"
import { pathToFileURL } from "node:url"
import type {
  OAuthClientMetadata,
  OAuthClientProvider,
  OAuthDiscoveryState,
  StoredOAuthClientInformation,
  StoredOAuthTokens,
} from "@modelcontextprotocol/client"
import { loginAndConsent } from "./user.ts"
import { cpuMicros, figures, meter } from "./wire.ts"

interface Setup {
  readonly mcpUrl: string
  readonly user: { readonly username: string; readonly password: string }
  readonly file?: string
  /** Another build's `node/index.js` to run instead of this package's (run.ts `--previous`). */
  readonly module?: string
}

const REDIRECT_URI = "http://127.0.0.1/callback"
const [scenario = "", raw = "{}"] = process.argv.slice(2)
const setup = JSON.parse(raw) as Setup
const wire = meter()

const loading = performance.now()
const sdk = await import("@modelcontextprotocol/client")
const sdkLoadMs = performance.now() - loading

const keywayFlow = async () => {
  const loadingKeyway = performance.now()
  const { createAuthClient } = (await import(
    setup.module === undefined ? "@keyway/client/node" : pathToFileURL(setup.module).href
  )) as typeof import("@keyway/client/node")
  const Effect = await import("effect/Effect")
  const loadMs = performance.now() - loadingKeyway
  const auth = createAuthClient({
    fetch: wire.fetch,
    clientName: "Keyway bench",
    store: setup.file === undefined ? "memory" : { file: setup.file },
    // The scripted user stands for the system browser with its loopback listener: the redirect comes back to this
    // process (the agent says so, as UserAgent.browser() does).
    userAgent: {
      open: Effect.succeed({
        redirectUri: REDIRECT_URI,
        run: (url: string) => Effect.promise(() => loginAndConsent(wire.fetch, url, setup.user)),
        close: Effect.void,
        inProcess: true,
      }),
    },
  })
  const client = new sdk.Client({ name: "keyway-bench", version: "1.0.0" })
  const transport = new sdk.StreamableHTTPClientTransport(new URL(setup.mcpUrl), { fetch: auth.fetch })
  const startCpu = cpuMicros()
  const start = performance.now()
  await client.connect(transport)
  const result = figures(wire, start, startCpu, setup.mcpUrl)
  await client.close()
  await auth.dispose()
  return { ...result, loadMs }
}

/** The SDK's provider as its examples write one: everything in memory; the "browser" is the scripted user. */
class Provider implements OAuthClientProvider {
  client: StoredOAuthClientInformation | undefined
  stored: StoredOAuthTokens | undefined
  verifier: string | undefined
  discovery: OAuthDiscoveryState | undefined
  callback: URL | undefined
  get redirectUrl(): string {
    return REDIRECT_URI
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: "SDK bench",
      redirect_uris: [REDIRECT_URI],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    }
  }
  state(): string {
    return randomBytes(32).toString("base64url")
  }
  clientInformation() {
    return this.client
  }
  saveClientInformation(info: StoredOAuthClientInformation): void {
    this.client = info
  }
  tokens() {
    return this.stored
  }
  saveTokens(tokens: StoredOAuthTokens): void {
    this.stored = tokens
  }
  async redirectToAuthorization(url: URL): Promise<void> {
    this.callback = new URL(await loginAndConsent(wire.fetch, url.href, setup.user))
  }
  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier
  }
  codeVerifier(): string {
    if (this.verifier === undefined) throw new Error("no code verifier saved")
    return this.verifier
  }
  saveDiscoveryState(state: OAuthDiscoveryState): void {
    this.discovery = state
  }
  discoveryState() {
    return this.discovery
  }
}

const sdkFlow = async () => {
  const provider = new Provider()
  const transportFor = () =>
    new sdk.StreamableHTTPClientTransport(new URL(setup.mcpUrl), { authProvider: provider, fetch: wire.fetch })
  const first = transportFor()
  const startCpu = cpuMicros()
  const start = performance.now()
  try {
    await new sdk.Client({ name: "sdk-bench", version: "1.0.0" }).connect(first)
    throw new Error("the first connect was expected to need an authorization")
  } catch (error) {
    if (!(error instanceof sdk.UnauthorizedError) || provider.callback === undefined) throw error
  }
  await first.finishAuth(provider.callback.searchParams)
  const client = new sdk.Client({ name: "sdk-bench", version: "1.0.0" })
  await client.connect(transportFor())
  const result = figures(wire, start, startCpu, setup.mcpUrl)
  await client.close()
  return { ...result, loadMs: sdkLoadMs }
}

const result = scenario === "sdk" ? await sdkFlow() : await keywayFlow()
process.stdout.write(`${JSON.stringify({ scenario, ...result })}\n`)
