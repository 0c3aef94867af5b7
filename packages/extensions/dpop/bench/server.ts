/**
 * Benchmark server process: one protected endpoint on node:http with Keyway's resource server and the DPoP scheme,
 * the issuer's key served as a JWK Set. Prints `{port}` once listening and answers every stdin line with its CPU
 * time so far (microseconds).
 */
import { readFileSync } from "node:fs"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { createInterface } from "node:readline"
import { createProtectedResource, jwt, toNodeListener } from "@keyway/resource-server/node"
import { dpopScheme } from "../dist/resource-server.js"
import { ISSUER, RESOURCE, type Setup } from "./setup.ts"

const setup = JSON.parse(readFileSync(process.argv[2]!, "utf8")) as Setup
const jwksServer = createServer((_req, res) => {
  res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ keys: [setup.issuerJwk] }))
})
await new Promise<void>((resolve) => jwksServer.listen(0, "127.0.0.1", resolve))
const jwksUri = `http://127.0.0.1:${(jwksServer.address() as AddressInfo).port}/jwks`

const server = createServer()
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
const port = (server.address() as AddressInfo).port
const protectedResource = createProtectedResource({
  resource: RESOURCE,
  authorizationServers: [ISSUER],
  requiredScopes: ["mcp"],
  verifier: jwt({ jwksUri, algorithms: ["ES256"] }),
  // htu is compared with the public URL of the resource, as behind a proxy.
  presentationSchemes: [dpopScheme({ publicOrigin: new URL(RESOURCE).origin, window: 300 })],
})
const handler = protectedResource.protect(
  () => new Response(`{"ok":true}`, { headers: { "content-type": "application/json" } }),
)
server.on("request", toNodeListener(handler))
process.stdout.write(`${JSON.stringify({ port })}\n`)
createInterface({ input: process.stdin }).on("line", () => {
  const { user, system } = process.cpuUsage()
  process.stdout.write(`${JSON.stringify({ cpu: user + system })}\n`)
})
