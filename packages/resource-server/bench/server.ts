/**
 * Benchmark server process: one protected endpoint on node:http, in one of the modes
 * - "bare": a plain node:http listener, no Web objects and no authentication (the anchor of the adapter);
 * - "none": no authentication, through the Web adapter (`toNodeListener`);
 * - "keyway": Keyway's `protect()` (a Web handler) through the adapter;
 * - "keyway-node": Keyway's `protectNode()` (a node:http handler) through the same bridge, the README's plain-Node
 *   form: the bridge's checks and authentication, no Web objects;
 * - "check": Keyway's framework-neutral `check()` called from a plain node:http listener (no Web objects);
 * - "jose": jose's `jwtVerify` alone in a plain node:http listener, with the checks Keyway makes and no cache;
 * - "floor": the least any verifier does, in a plain node:http listener: split the token, one ES256 verification with
 *   `node:crypto` (a key object made once, the signature converted to DER, on the thread pool), parse the
 *   payload and compare issuer, audience, expiry and scope; no header checks, no cache. It bounds what a verifier
 *   can reach on this machine;
 * - "floor-sync": "floor" with the verification on the event loop;
 * - "sdk": the MCP SDK's `requireBearerAuth` with a jose verifier, through the adapter;
 * - "keyway-previous", "keyway-node-previous", "check-previous": "keyway", "keyway-node" and "check" with the build
 *   whose index.js is the third argument, for before/after rows.
 * Reads the public key from the setup file written by run.ts, prints one JSON line {port} once listening, and
 * answers every line on stdin with its CPU usage so far (process.cpuUsage, microseconds).
 */
import { createPublicKey, verify } from "node:crypto"
import { readFileSync } from "node:fs"
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { createInterface } from "node:readline"
import { pathToFileURL } from "node:url"
import * as current from "@keyway/resource-server/node"
import { type AuthInfo, requireBearerAuth } from "@modelcontextprotocol/server"
import { createRemoteJWKSet, jwtVerify } from "jose"
import { ISSUER, RESOURCE, type Setup } from "./setup.ts"

const requested = process.argv[2] ?? "none"
const setup = JSON.parse(readFileSync(process.argv[3]!, "utf8")) as Setup
const previousBuild = requested.endsWith("-previous")
// The Keyway modes of another build run as the same modes of this one, with that build's functions.
const mode = requested === "keyway-previous" || !previousBuild ? requested : requested.slice(0, -"-previous".length)
const loaded = previousBuild
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

const body = `{"ok":true}`
const answer = (res: ServerResponse): void => {
  res.writeHead(200, { "content-type": "application/json", "content-length": String(body.length) }).end(body)
}
const refuse = (res: ServerResponse, status: number, headers: Readonly<Record<string, string>>, text: string) => {
  res.writeHead(status, { ...headers, "content-length": String(Buffer.byteLength(text)) }).end(text)
}
// The checks of the Keyway verifier, made by jose alone: algorithm, issuer, audience, `typ`, expiry.
const joseOptions = {
  algorithms: ["ES256"],
  issuer: ISSUER,
  audience: resource,
  typ: "at+jwt",
  requiredClaims: ["exp"],
}

// Keyway's protected resource as every Keyway mode configures it.
const keywayResource = () =>
  createProtectedResource({
    resource,
    authorizationServers: [ISSUER],
    requiredScopes: ["mcp"],
    verifier: jwt({ jwksUri, algorithms: ["ES256"] }),
  })

let handler: (request: Request) => Promise<Response>
let listener: ((req: IncomingMessage, res: ServerResponse) => void) | undefined
if (mode === "bare") {
  handler = async () => ok()
  listener = (_req, res) => answer(res)
} else if (mode === "jose") {
  handler = async () => ok()
  const keys = createRemoteJWKSet(new URL(jwksUri))
  listener = (req, res) => {
    const authorization = req.headers.authorization ?? ""
    const token = authorization.startsWith("Bearer ") ? authorization.slice(7) : ""
    jwtVerify(token, keys, joseOptions).then(
      ({ payload }) =>
        String(payload.scope).split(" ").includes("mcp")
          ? answer(res)
          : refuse(res, 403, { "content-type": "application/json" }, `{"error":"insufficient_scope"}`),
      () => refuse(res, 401, { "content-type": "application/json" }, `{"error":"invalid_token"}`),
    )
  }
} else if (mode === "check") {
  handler = async () => ok()
  const protectedResource = keywayResource()
  listener = (req, res) => {
    protectedResource
      .check({
        method: req.method ?? "GET",
        url: req.url ?? "/",
        authorization: req.headers.authorization,
        contentType: req.headers["content-type"],
        contentLength: req.headers["content-length"],
        origin: req.headers.origin,
      })
      .then((outcome) => {
        if (outcome.ok) answer(res)
        else refuse(res, outcome.rejection.status, outcome.rejection.headers, outcome.rejection.body)
      })
  }
} else if (mode === "keyway-node") {
  handler = async () => ok()
  const protectedResource = keywayResource()
  const protectNode = loaded.protectNode ?? current.protectNode
  listener = toNodeListener(protectNode(protectedResource, (_req, res) => answer(res)))
} else if (mode === "floor" || mode === "floor-sync") {
  handler = async () => ok()
  const key = createPublicKey({ key: jwk as import("node:crypto").JsonWebKey, format: "jwk" })
  const sync = mode === "floor-sync"
  const unauthorized = (res: ServerResponse) =>
    refuse(res, 401, { "content-type": "application/json" }, `{"error":"invalid_token"}`)
  const accept = (res: ServerResponse, payloadPart: string) => {
    const claims = JSON.parse(Buffer.from(payloadPart, "base64url").toString()) as Record<string, unknown>
    const fine =
      claims.iss === ISSUER &&
      claims.aud === resource &&
      typeof claims.exp === "number" &&
      claims.exp * 1000 > Date.now() &&
      String(claims.scope).split(" ").includes("mcp")
    if (fine) answer(res)
    else unauthorized(res)
  }
  // An ECDSA signature as R and S side by side (32 bytes each) in DER: node:crypto verifies DER with less CPU.
  const integer = (bytes: Buffer): Buffer => {
    let start = 0
    while (start < bytes.length - 1 && bytes[start] === 0) start++
    const trimmed = bytes.subarray(start)
    return trimmed[0]! >= 0x80 ? Buffer.concat([Buffer.of(0), trimmed]) : trimmed
  }
  const der = (raw: Buffer): Buffer => {
    const r = integer(raw.subarray(0, 32))
    const s = integer(raw.subarray(32))
    return Buffer.concat([Buffer.of(0x30, r.length + s.length + 4, 2, r.length), r, Buffer.of(2, s.length), s])
  }
  listener = (req, res) => {
    const authorization = req.headers.authorization ?? ""
    const token = authorization.startsWith("Bearer ") ? authorization.slice(7) : ""
    const second = token.lastIndexOf(".")
    const first = token.indexOf(".")
    const data = Buffer.from(token.slice(0, second))
    const signature = der(Buffer.from(token.slice(second + 1), "base64url"))
    if (sync) {
      if (verify("sha256", data, key, signature)) accept(res, token.slice(first + 1, second))
      else unauthorized(res)
      return
    }
    verify("sha256", data, key, signature, (error, valid) => {
      if (error === null && valid) accept(res, token.slice(first + 1, second))
      else unauthorized(res)
    })
  }
} else if (mode === "none") {
  handler = async () => ok()
} else if (mode === "keyway" || mode === "keyway-previous") {
  const protectedResource = keywayResource()
  handler = protectedResource.protect(() => ok())
} else {
  // The MCP SDK's gate with a jose verifier doing the same checks as Keyway's (no cache: the SDK has none).
  const keys = createRemoteJWKSet(new URL(jwksUri))
  const verifier = {
    verifyAccessToken: async (token: string): Promise<AuthInfo> => {
      const { payload } = await jwtVerify(token, keys, joseOptions)
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
server.on("request", listener ?? toNodeListener(handler))

process.stdout.write(`${JSON.stringify({ port })}\n`)
createInterface({ input: process.stdin }).on("line", () => {
  const { user, system } = process.cpuUsage()
  process.stdout.write(`${JSON.stringify({ cpu: user + system })}\n`)
})
