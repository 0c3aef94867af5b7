/**
 * keyway-authorization-server: `--config <file.json>` plus flags; logs to stderr; stops cleanly on SIGINT/SIGTERM.
 * Exit codes: 0 stopped by a signal, 1 failed while running or starting, 2 bad command line or configuration.
 * `keyway-authorization-server admin <command>` runs an operator command instead (see `admin.ts`). Loaded by `main.ts`
 * once the Node.js version is known to be recent enough.
 *
 * @module
 */
import { resolve } from "node:path"
import { runAdmin } from "./admin.js"
import { ConfigFileError, loadConfig, parseCommandLine, USAGE, UsageError } from "./config.js"
import { defaultLog } from "./logging.js"
import { type RunningAuthorizationServer, startAuthorizationServer } from "./server.js"

const fail = (code: number, message: string): never => {
  process.stderr.write(`keyway-authorization-server: ${message}\n`)
  process.exit(code)
}

const main = async (): Promise<void> => {
  const argv = process.argv.slice(2)
  if (argv[0] === "admin") {
    const result = await runAdmin(argv.slice(1))
    process.stdout.write(result.stdout)
    process.stderr.write(result.stderr)
    process.exitCode = result.code
    return
  }
  if (parseCommandLine(argv).help) {
    process.stdout.write(`${USAGE}\n`)
    return
  }
  const config = await loadConfig(argv, process.env)
  // Signals are handled from the start: one arriving while the server starts stops it once it is up.
  let running: RunningAuthorizationServer | undefined
  let stopping = false
  const finish = (server: RunningAuthorizationServer) =>
    server.close().then(
      () => process.exit(0),
      (error: unknown) => fail(1, `could not stop cleanly: ${(error as Error).message}`),
    )
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return
    stopping = true
    defaultLog(`${signal} received, stopping`)
    if (running !== undefined) finish(running)
  }
  process.on("SIGINT", stop)
  process.on("SIGTERM", stop)
  const line = parseCommandLine(argv)
  running = await startAuthorizationServer(config, {
    log: defaultLog,
    ...(line.help ? {} : { configFile: resolve(line.config) }),
  })
  if (stopping) finish(running)
}

main().catch((error: unknown) => {
  if (error instanceof UsageError) fail(2, `${error.message}\n\n${USAGE}`)
  if (error instanceof ConfigFileError) fail(2, error.message)
  fail(1, error instanceof Error ? error.message : String(error))
})
