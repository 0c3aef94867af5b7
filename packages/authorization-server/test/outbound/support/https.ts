/**
 * Real HTTPS servers on 127.0.0.1 for the outbound-guard and client-metadata tests, with a throw-away self-signed
 * certificate (generated once per test process with the openssl CLI; Node cannot issue X.509 certificates itself).
 */
import { execFileSync } from "node:child_process"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import type { IncomingMessage, ServerResponse } from "node:http"
import { createServer, type Server } from "node:https"
import type { AddressInfo } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"

/** Test host names are under this domain; the certificate covers `*.keyway.test`, localhost and 127.0.0.1. */
export const DOMAIN = "keyway.test"

let cached: { readonly key: string; readonly cert: string } | undefined

/** The test certificate and key (PEM). The certificate is its own CA: pass `cert` as the guard's `ca`. */
export const certificate = (): { readonly key: string; readonly cert: string } => {
  if (cached !== undefined) return cached
  const dir = mkdtempSync(join(tmpdir(), "keyway-tls-"))
  try {
    const key = join(dir, "key.pem")
    const cert = join(dir, "cert.pem")
    execFileSync(
      "openssl",
      [
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:P-256",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=keyway test",
        "-addext",
        `subjectAltName=DNS:*.${DOMAIN},DNS:localhost,IP:127.0.0.1,IP:::1`,
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-keyout",
        key,
        "-out",
        cert,
      ],
      { stdio: "ignore" },
    )
    cached = { key: readFileSync(key, "utf8"), cert: readFileSync(cert, "utf8") }
    return cached
  } finally {
    rmSync(dir, { recursive: true, force: true })
  }
}

/** A request the server saw. */
export interface Seen {
  readonly host: string | undefined
  readonly path: string
  readonly servername: string | undefined
}

/** A running HTTPS test server. */
export interface TestServer {
  readonly port: number
  /** `https://<name>.keyway.test:<port>` */
  readonly origin: (name: string) => string
  /** Every request, in order. */
  readonly requests: Array<Seen>
  /** TCP connections accepted. */
  readonly connections: () => number
  readonly close: () => Promise<void>
}

export type Handler = (request: IncomingMessage, response: ServerResponse) => void

/** Starts an HTTPS server on 127.0.0.1, port 0. */
export const startServer = async (handler: Handler): Promise<TestServer> => {
  const { key, cert } = certificate()
  const requests: Array<Seen> = []
  let connections = 0
  const server: Server = createServer({ key, cert }, (request, response) => {
    const socket = request.socket as { servername?: string | false }
    requests.push({
      host: request.headers.host,
      path: request.url ?? "",
      servername: typeof socket.servername === "string" ? socket.servername : undefined,
    })
    // The client may hang up early (size cap, time cap); that is expected, not a server failure.
    response.on("error", () => undefined)
    handler(request, response)
  })
  server.on("connection", (socket) => {
    connections++
    socket.on("error", () => undefined)
  })
  server.on("tlsClientError", () => undefined)
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    port,
    origin: (name) => `https://${name}.${DOMAIN}:${port}`,
    requests,
    connections: () => connections,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** Writes a JSON body with the given extra headers. */
export const sendJson = (
  response: ServerResponse,
  body: unknown,
  headers: Record<string, string> = {},
  status = 200,
): void => {
  const text = JSON.stringify(body)
  response.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...headers,
  })
  response.end(text)
}
