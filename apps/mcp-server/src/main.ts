#!/usr/bin/env node
// First of all: an older Node.js is told what to run instead, before a module that needs a newer one runs.
import "./requireNode.js"
/**
 * keyway-mcp-server: `--authorization-server <issuer>` (required), `--port`, `--host`, `--path`, `--public-url`,
 * `--metrics-port`, `--metrics-host`. Answers `/health/live` and `/health/ready`. Logs to stderr; stops
 * cleanly on SIGINT/SIGTERM. Exit codes: 0 stopped by a signal, 1 failed, 2 bad command line.
 *
 * @module
 */
import { parseArgs } from "node:util"
import { type RunningMcpServer, startMcpServer } from "./server.js"

const USAGE = `usage: keyway-mcp-server --authorization-server <issuer> [options]

options:
  --authorization-server <url>  issuer URL of the authorization server (required)
  --port <n>                    port to listen on (default 9100; 0 picks a free port)
  --host <address>              address to listen on (default 127.0.0.1)
  --path <path>                 path of the MCP endpoint (default /mcp)
  --public-url <url>            the MCP endpoint as clients reach it, e.g. behind a TLS proxy
                                (default http://<host>:<port><path>); request URLs never come from Host
  --metrics-port <n>            serve Prometheus metrics at /metrics on this port (off by default; 0 picks one)
  --metrics-host <address>      address of the metrics listener (default 127.0.0.1)
  -h, --help                    show this help

The MCP endpoint URL (--public-url, or http://<host>:<port><path>) is the resource the authorization server must know.`

class UsageError extends Error {}

const log = (line: string) => {
  process.stderr.write(`${new Date().toISOString()} ${line}\n`)
}

const parse = (argv: ReadonlyArray<string>) => {
  let values: Record<string, string | boolean | undefined>
  try {
    values = parseArgs({
      args: [...argv],
      options: {
        "authorization-server": { type: "string" },
        port: { type: "string" },
        host: { type: "string" },
        path: { type: "string" },
        "public-url": { type: "string" },
        "metrics-port": { type: "string" },
        "metrics-host": { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    }).values
  } catch (e) {
    throw new UsageError((e as Error).message)
  }
  if (values.help === true) return undefined
  const issuer = values["authorization-server"]
  if (typeof issuer !== "string") throw new UsageError("--authorization-server <issuer> is required")
  const url = URL.parse(issuer)
  if (url === null || (url.protocol !== "https:" && url.protocol !== "http:")) {
    throw new UsageError(`--authorization-server must be an http(s) URL, got "${issuer}"`)
  }
  const port = values.port
  if (typeof port === "string" && (!/^\d+$/.test(port) || Number(port) > 65535)) {
    throw new UsageError(`--port must be a whole number from 0 to 65535, got "${port}"`)
  }
  const metricsPort = values["metrics-port"]
  if (typeof metricsPort === "string" && (!/^\d+$/.test(metricsPort) || Number(metricsPort) > 65535)) {
    throw new UsageError(`--metrics-port must be a whole number from 0 to 65535, got "${metricsPort}"`)
  }
  const metricsHost = values["metrics-host"]
  if (typeof metricsHost === "string" && metricsPort === undefined) {
    throw new UsageError("--metrics-host needs --metrics-port")
  }
  if (metricsPort !== undefined && metricsPort !== "0" && metricsPort === port) {
    throw new UsageError("--metrics-port must differ from --port (the public port)")
  }
  const path = values.path
  if (typeof path === "string" && !path.startsWith("/")) {
    throw new UsageError(`--path must start with "/", got "${path}"`)
  }
  const publicUrl = values["public-url"]
  if (typeof publicUrl === "string") {
    const parsed = URL.parse(publicUrl)
    if (parsed === null || (parsed.protocol !== "https:" && parsed.protocol !== "http:")) {
      throw new UsageError(`--public-url must be an http(s) URL, got "${publicUrl}"`)
    }
  }
  return {
    authorizationServer: issuer,
    ...(typeof publicUrl === "string" ? { publicUrl } : {}),
    ...(typeof port === "string" ? { port: Number(port) } : {}),
    ...(typeof values.host === "string" ? { host: values.host } : {}),
    ...(typeof path === "string" ? { path } : {}),
    ...(typeof metricsPort === "string"
      ? {
          metrics: {
            port: Number(metricsPort),
            ...(typeof metricsHost === "string" ? { host: metricsHost } : {}),
          },
        }
      : {}),
  }
}

const main = async (): Promise<void> => {
  const options = parse(process.argv.slice(2))
  if (options === undefined) {
    process.stdout.write(`${USAGE}\n`)
    return
  }
  // Signals are handled from the start: one arriving while the server starts stops it once it is up.
  let running: RunningMcpServer | undefined
  let stopping = false
  const finish = (server: RunningMcpServer) =>
    server.close().then(
      () => process.exit(0),
      () => process.exit(1),
    )
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return
    stopping = true
    log(`${signal} received, stopping`)
    if (running !== undefined) finish(running)
  }
  process.on("SIGINT", stop)
  process.on("SIGTERM", stop)
  running = await startMcpServer({ ...options, log })
  if (stopping) finish(running)
}

main().catch((error: unknown) => {
  const usage = error instanceof UsageError
  process.stderr.write(
    `keyway-mcp-server: ${error instanceof Error ? error.message : String(error)}${usage ? `\n\n${USAGE}` : ""}\n`,
  )
  process.exit(usage ? 2 : 1)
})
