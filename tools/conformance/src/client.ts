#!/usr/bin/env node
/**
 * The conformance client: an MCP client built on @keyway/client (headless user agent) and the official MCP SDK v2
 * client, meeting the client contract of `@modelcontextprotocol/conformance`: the MCP server URL is the last
 * argument; `MCP_CONFORMANCE_SCENARIO`, `MCP_CONFORMANCE_PROTOCOL_VERSION` and `MCP_CONFORMANCE_CONTEXT` come from
 * the environment. It connects, lists the tools, calls the first one, and exits 0; any failure is printed as one
 * line on stderr with exit code 1.
 *
 * @see {@link https://github.com/modelcontextprotocol/conformance | MCP conformance suite}
 * @module
 */
import { createPrivateKey } from "node:crypto"
import { createAuthClient, Extension, isAuthError, UserAgent } from "@keyway/client"
import { clientCredentials } from "@keyway/ext-client-credentials/client"
import { dpop } from "@keyway/ext-dpop/client"
import { enterpriseManaged } from "@keyway/ext-enterprise-managed/client"
import { workloadIdentity } from "@keyway/ext-workload-identity/client"
import { createTransport } from "@keyway/mcp-sdk-client"
import { Client } from "@modelcontextprotocol/client"
import { type ConformanceContext, parseContext } from "./context.js"

/**
 * The client ID metadata document URL the suite expects a CIMD-capable client to use as its `client_id`.
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/authorization#client-id-metadata-documents | MCP client ID metadata documents}
 */
export const CLIENT_METADATA_URL = "https://conformance-test.local/client-metadata.json"

/** Protocol revisions that use the stateless wire (no initialize handshake). */
const MODERN_REVISIONS = new Set(["2026-07-28"])

const privateKeyOf = (context: ConformanceContext) => {
  if (context.private_key_pem === undefined) return undefined
  const alg = context.signing_algorithm ?? "ES256"
  return { key: createPrivateKey(context.private_key_pem) as unknown as CryptoKey, alg }
}

const main = async (): Promise<void> => {
  const serverUrl = process.argv.at(-1)
  if (serverUrl === undefined || process.argv.length < 3) {
    throw new Error("usage: keyway-conformance-client <mcp-server-url>")
  }
  const context = parseContext(process.env.MCP_CONFORMANCE_CONTEXT)
  const protocolVersion = process.env.MCP_CONFORMANCE_PROTOCOL_VERSION
  const { client_id: clientId, client_secret: clientSecret } = context
  // The client credentials scenarios configure a machine client; the suite's context does not name the authorization
  // server, so the credentials are bound to whichever one discovery finds (a real deployment names its issuer).
  const machine = context.name?.startsWith("auth/client-credentials") === true && clientId !== undefined
  const extensions: Array<Extension.ClientExtension> = []
  if (machine) {
    extensions.push(
      clientCredentials({
        issuer: () => true,
        clientId,
        ...(clientSecret !== undefined ? { clientSecret } : {}),
        ...(context.private_key_pem !== undefined
          ? { privateKey: { key: context.private_key_pem, alg: context.signing_algorithm ?? "ES256" } }
          : {}),
      }),
    )
  }
  // A workload's JWT in the context means workload identity federation: the JWT bearer grant, no client of its own.
  if (context.valid_jwt !== undefined) extensions.push(workloadIdentity({ assertion: context.valid_jwt }))
  // Enterprise-managed authorization (SEP-990): the suite plays the identity provider and hands over the user's ID
  // token; the credentials at the MCP authorization server are bound to whichever one discovery finds.
  const idToken = context.idp_id_token
  if (idToken !== undefined && context.idp_client_id !== undefined && clientId !== undefined) {
    extensions.push(
      enterpriseManaged({
        identityProvider: {
          clientId: context.idp_client_id,
          ...(context.idp_issuer !== undefined ? { issuer: context.idp_issuer } : {}),
          ...(context.idp_token_endpoint !== undefined ? { tokenEndpoint: context.idp_token_endpoint } : {}),
        },
        idToken: () => idToken,
        clients: { issuer: () => true, clientId, ...(clientSecret !== undefined ? { clientSecret } : {}) },
      }),
    )
  }
  // The DPoP scenarios: sender-constrained tokens, with the servers' nonces (RFC 9449).
  if (process.env.MCP_CONFORMANCE_SCENARIO?.startsWith("auth/dpop") === true) extensions.push(dpop())
  const privateKeyJwt = machine ? undefined : privateKeyOf(context)
  const auth = createAuthClient({
    extensions,
    clientName: "keyway-conformance-client",
    clientMetadataUrl: CLIENT_METADATA_URL,
    userAgent: UserAgent.headless(),
    // Credentials handed over by the suite play the part of a user entering a pre-registered client: they are bound
    // to whichever issuer discovery finds, since the context does not name one.
    ...(clientId !== undefined && !machine
      ? {
          askClientInformation: async ({ issuer }) => ({
            issuer,
            client_id: clientId,
            ...(clientSecret !== undefined ? { client_secret: clientSecret } : {}),
            ...(privateKeyJwt !== undefined ? { token_endpoint_auth_method: "private_key_jwt" as const } : {}),
          }),
        }
      : {}),
    ...(privateKeyJwt !== undefined ? { privateKeyJwt } : {}),
  })
  const client = new Client(
    { name: "keyway-conformance-client", version: "0.0.0" },
    {
      // The extensions in use, declared in the capabilities (sent with every request on the 2026-07-28 wire).
      capabilities: Extension.capabilities(extensions),
      ...(protocolVersion !== undefined && MODERN_REVISIONS.has(protocolVersion)
        ? { versionNegotiation: { mode: { pin: protocolVersion } } }
        : {}),
    },
  )
  try {
    await client.connect(createTransport(serverUrl, auth))
    const { tools } = await client.listTools()
    const first = tools[0]
    if (first !== undefined) await client.callTool({ name: first.name, arguments: {} })
  } finally {
    await client.close().catch(() => undefined)
    await auth.dispose()
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    const scenario = process.env.MCP_CONFORMANCE_SCENARIO ?? "(no scenario)"
    const detail = isAuthError(error)
      ? `${error.step}/${error.reason}: ${error.message}`
      : error instanceof Error
        ? error.message
        : String(error)
    process.stderr.write(`keyway-conformance-client [${scenario}]: ${detail}\n`)
    process.exit(1)
  },
)
