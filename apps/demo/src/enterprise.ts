/**
 * The enterprise-managed authorization demo run (`--scenario enterprise`): two Keyway authorization servers, the
 * enterprise identity provider and the notes MCP server's. The user signs in once at the identity provider; the client
 * then reaches the notes MCP server with an identity assertion, without a consent page of the MCP server's
 * authorization server.
 *
 * @module
 */
import { randomBytes } from "node:crypto"
import { createServer } from "node:http"
import { NOTE_SCOPES, startMcpServer } from "@keyway/app-mcp-server"
import { createAuthorizationServer, NodeServer, UserAuthenticator } from "@keyway/authorization-server"
import { createAuthClient, Extension, UserAgent } from "@keyway/client"
import { Grant } from "@keyway/core"
import { identityAssertionGrant, identityAssertionIssuer } from "@keyway/ext-enterprise-managed/authorization-server"
import { enterpriseManaged, signIn } from "@keyway/ext-enterprise-managed/client"
import { createTransport } from "@keyway/mcp-sdk-client"
import { freePort } from "@keyway/testing"
import { Client } from "@modelcontextprotocol/client"
import type { DemoOptions, DemoResult } from "./flow.js"
import { demoStore, resultText } from "./held.js"
import { Narrator } from "./narrator.js"
import { recordingFetch } from "./recorder.js"
import { Redactor } from "./redact.js"
import { DEMO_USERNAME, LOOPBACK_REDIRECT } from "./stack.js"
import { Progress, Transcript } from "./transcript.js"

/** The client's ID at the identity provider and at the MCP server's authorization server. */
export const ENTERPRISE_CLIENT_ID = "demo-chat"

/** One authorization server of the library on a loopback port (its Node listener, closed with it). */
const serve = async (port: number, options: Parameters<typeof createAuthorizationServer>[0]) => {
  const server = createAuthorizationServer(options)
  const listener = createServer(NodeServer.toNodeListener(server.handler, { publicUrl: options.issuer }))
  await new Promise<void>((resolve, reject) => {
    listener.once("error", reject)
    listener.listen(port, "127.0.0.1", () => resolve())
  })
  return async () => {
    listener.closeAllConnections()
    await new Promise<void>((resolve) => listener.close(() => resolve()))
    await server.close()
  }
}

/** Runs the enterprise scenario; resolves when the whole flow went as it should. */
export const runEnterpriseDemo = async (options: DemoOptions): Promise<DemoResult> => {
  const progress = new Progress(options.err, options.progress ?? "off")
  const redactor = new Redactor()
  const transcript = new Transcript({ write: options.out, redactor, progress, color: options.color ?? false })
  const closers: Array<() => Promise<void>> = []
  try {
    progress.update("starting the identity provider, the authorization server and the MCP server")
    const [idpPort, asPort, mcpPort] = [await freePort(), await freePort(), options.mcpPort ?? (await freePort())]
    const idp = `http://127.0.0.1:${idpPort}`
    const issuer = `http://127.0.0.1:${options.asPort ?? asPort}`
    const mcpUrl = `http://127.0.0.1:${mcpPort}/mcp`
    const password = randomBytes(12).toString("base64url")
    const idpSecret = redactor.add(randomBytes(32).toString("base64url"))
    const clientSecret = redactor.add(randomBytes(32).toString("base64url"))
    redactor.add(password, { lowEntropy: true })
    const development = { allowHttpLoopbackIssuer: true }
    closers.push(
      await serve(idpPort, {
        issuer: idp,
        openid: true,
        development,
        warn: () => {},
        resources: [{ uri: `${idp}/userinfo`, name: "Profile", scopes: { profile: "Your profile" } }],
        defaultResource: `${idp}/userinfo`,
        users: [
          {
            username: DEMO_USERNAME,
            passwordHash: await UserAuthenticator.hashPassword(password),
            displayName: "Alice (demo user)",
          },
        ],
        clients: [
          {
            clientId: ENTERPRISE_CLIENT_ID,
            clientName: "Demo chat client",
            clientSecret: idpSecret,
            redirectUris: [LOOPBACK_REDIRECT],
            grantTypes: ["authorization_code", Grant.TOKEN_EXCHANGE],
          },
        ],
        extensions: [
          identityAssertionIssuer({
            authorizationServers: [
              { issuer, resources: [mcpUrl], clients: { [ENTERPRISE_CLIENT_ID]: ENTERPRISE_CLIENT_ID } },
            ],
            rules: [{ users: [DEMO_USERNAME], resource: mcpUrl, scope: "notes:read notes:write" }],
          }),
        ],
      }),
    )
    closers.push(
      await serve(options.asPort ?? asPort, {
        issuer,
        development,
        warn: () => {},
        resources: [{ uri: mcpUrl, name: "Keyway notes", scopes: NOTE_SCOPES }],
        clients: [
          {
            clientId: ENTERPRISE_CLIENT_ID,
            clientName: "Demo chat client",
            clientSecret,
            redirectUris: [],
            grantTypes: [Grant.JWT_BEARER],
          },
        ],
        extensions: [
          identityAssertionGrant({
            identityProviders: [{ issuer: idp, jwksUri: `${idp}/jwks` }],
            // The demo's identity provider serves its keys over http on loopback.
            development: { allowHttpLoopbackJwks: true },
            warn: () => {},
          }),
        ],
      }),
    )
    let narrator: Narrator | undefined
    const mcp = await startMcpServer({
      authorizationServer: issuer,
      port: mcpPort,
      log: (line) => narrator?.serverLog("MCP server", line),
    })
    closers.push(() => mcp.close())
    narrator = new Narrator(transcript, redactor, { mcpUrl, issuer })

    transcript.title("Keyway demo: enterprise-managed authorization (sign in once at the identity provider)")
    transcript.lines(
      [
        `identity provider     ${idp}  (Keyway's authorization server: OpenID Connect, identity assertions)`,
        `authorization server  ${issuer}  (the MCP server's; trusts the identity provider's assertions)`,
        `MCP server            ${mcpUrl}  (tools list_notes, read_note: notes:read; write_note: notes:write)`,
        `client                ${ENTERPRISE_CLIENT_ID}: registered at both; the identity provider lets ${DEMO_USERNAME} reach the notes server`,
        "tokens and secrets are shown redacted, with a fingerprint (fp) to tell them apart",
      ],
      2,
    )

    transcript.section("Sign in once, at the identity provider (OpenID Connect authorization code flow)")
    progress.update("signing in at the identity provider")
    const signedIn = await signIn({
      issuer: idp,
      clientId: ENTERPRISE_CLIENT_ID,
      clientSecret: idpSecret,
      userAgent: UserAgent.testUser({ username: DEMO_USERNAME, password }),
    })
    redactor.add(signedIn.idToken)
    transcript.line(`${DEMO_USERNAME} signed in on the identity provider's login page; the client holds an ID token:`)
    const { iss, sub, aud, nonce, auth_time } = signedIn.claims
    transcript.json({
      iss,
      sub,
      aud,
      nonce: typeof nonce === "string" ? redactor.show(nonce, { lowEntropy: true }) : nonce,
      auth_time,
    })
    transcript.note("validated: signature by the identity provider's keys, iss, aud = the client, exp, nonce")

    const store = demoStore()
    const extensions = [
      enterpriseManaged({
        identityProvider: { tokenEndpoint: `${idp}/token`, clientId: ENTERPRISE_CLIENT_ID, clientSecret: idpSecret },
        idToken: () => signedIn.idToken,
        clients: { issuer, clientId: ENTERPRISE_CLIENT_ID, clientSecret },
      }),
    ]
    const auth = createAuthClient({
      clientName: "Keyway demo chat client",
      extensions,
      fetch: recordingFetch(
        (input, init) => globalThis.fetch(input, init),
        (exchange) => narrator?.clientExchange(exchange),
      ),
      store: store.backend,
    })
    const client = new Client(
      { name: "keyway-demo-enterprise", version: "1.0.0" },
      { capabilities: Extension.capabilities(extensions), versionNegotiation: { mode: "auto" } },
    )
    try {
      transcript.section(
        "Connect: discovery, the token exchange at the identity provider, the assertion at the MCP server's authorization server",
      )
      progress.update("connecting: discovery, token exchange, JWT bearer grant")
      await client.connect(createTransport(mcpUrl, auth))
      const { tools } = await client.listTools()
      transcript.line(`tools: ${tools.map((tool) => tool.name).join(", ")}`)

      transcript.section("Call a tool: list_notes needs notes:read, which the identity provider's rules allow")
      progress.update("calling list_notes")
      const listed = await client.callTool({ name: "list_notes", arguments: {} })
      transcript.line(`list_notes → ${JSON.stringify(resultText(listed))}`)

      transcript.section("Done")
      transcript.lines(
        [
          `${transcript.stepCount} steps. The user signed in once, at the identity provider. The client exchanged the ID token`,
          "there for an identity assertion naming the MCP server's authorization server, the MCP server and the client, and",
          "presented it with the JWT bearer grant: no consent page of the MCP server's authorization server, no registration.",
          "No token or secret is printed here.",
        ],
        2,
      )
      return { steps: transcript.stepCount, issuer, mcpUrl }
    } finally {
      progress.update("shutting down")
      await client.close().catch(() => undefined)
      await auth.dispose().catch(() => undefined)
    }
  } finally {
    for (const close of closers.reverse()) await close().catch(() => undefined)
    progress.stop()
    options.onSecrets?.(redactor.secrets())
  }
}
