/**
 * Benchmark server process: one protected endpoint on node:http, in one of the modes "none", "keyway", "sdk", or
 * "keyway-previous" (Keyway loaded from the build whose index.js is the third argument, for before/after rows).
 * Reads the public key from the setup file written by run.ts, prints one JSON line {port} once listening, and
 * answers every line on stdin with its CPU usage so far (process.cpuUsage, microseconds).
 */
import { readFileSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { createInterface } from "node:readline"
import { pathToFileURL } from "node:url"
import * as current from "@keyway/resource-server/node"
import { type AuthInfo, requireBearerAuth } from "@modelcontextprotocol/server"
import { createRemoteJWKSet, jwtVerify } from "jose"
import { ISSUER, RESOURCE, type Setup } from "./setup.ts"

const mode = process.argv[2] ?? "none"
const setup = JSON.parse(readFileSync(process.argv[3]!, "utf8")) as Setup
const loaded =
  mode === "keyway-previous"
    ? ((await import(pathToFileURL(process.argv[4]!).href)) as Partial<typeof current>)
    : current
const { createProtectedResource, jwt } = loaded as typeof current
// Builds from before the node:http server moved to `/node` export it from their main entry; later ones do not, and
// the bridge is the same `@keyway/http/node` listener either way.
const toNodeListener = loaded.toNodeListener ?? current.toNodeListener
const jwk = setup.publicJwk
const resource = RESOURCE
const jwksServer = createServer((_req, res) => {
  res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [jwk] }))
})
await new Promise<void>((resolve) => jwksServer.listen(0, "127.0.0.1", resolve))
const jwksUri = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/jwks`

const server = createServer()
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
const port = (server.address() as AddressInfo).port

const ok = () => new Response(`{"ok":true}`, { headers: { "content-type": "application/json" } })

let handler: (request: Request) => Promise<Response>
if (mode === "none") {
  handler = async () => ok()
} else if (mode === "keyway" || mode === "keyway-previous") {
  const protectedResource = createProtectedResource({
    resource,
    authorizationServers: [ISSUER],
    requiredScopes: ["mcp"],
    verifier: jwt({ jwksUri, algorithms: ["ES256"] }),
  })
  handler = protectedResource.protect(() => ok())
} else {
  // The MCP SDK's gate with a jose verifier doing the same checks as Keyway's (no cache: the SDK has none).
  const keys = createRemoteJWKSet(new URL(jwksUri))
  const verifier = {
    verifyAccessToken: async (token: string): Promise<AuthInfo> => {
      const { payload } = await jwtVerify(token, keys, {
        algorithms: ["ES256"],
        issuer: ISSUER,
        audience: resource,
        typ: "at+jwt",
        requiredClaims: ["exp"],
      })
      return {
        token,
        clientId: String(payload.client_id),
        scopes: String(payload.scope).split(" "),
        expiresAt: payload.exp as number,
        resource: new URL(resource),
      }
    },
  }
  const gate = requireBearerAuth({
    verifier,
    requiredScopes: ["mcp"],
    expectedResource: new URL(resource),
    resourceMetadataUrl: `http://127.0.0.1:${port}/.well-known/oauth-protected-resource/mcp`,
  })
  handler = async (request) => {
    const auth = await gate(request)
    return auth instanceof Response ? auth : ok()
  }
}
server.on("request", toNodeListener(handler))

process.stdout.write(`${JSON.stringify({ port })}\n`)
createInterface({ input: process.stdin }).on("line", () => {
  const { user, system } = process.cpuUsage()
  process.stdout.write(`${JSON.stringify({ cpu: user + system })}\n`)
})
