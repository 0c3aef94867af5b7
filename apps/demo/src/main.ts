#!/usr/bin/env node
// First of all: an older Node.js is told what to run instead, before a module that needs a newer one runs.
import "./requireNode.js"
/**
 * `npm run demo`: the CLI. The transcript (or, with --serve, the one JSON line) goes to stdout, everything else to
 * stderr.
 *
 * @module
 */
import { isAuthError } from "@keyway/client"
import { parseCommandLine, USAGE, UsageError } from "./cli.js"
import { runConnectedDemo } from "./connected.js"
import { runDeviceDemo } from "./device.js"
import { runDownstreamDemo } from "./downstream.js"
import { runDpopDemo } from "./dpop.js"
import { runEnterpriseDemo } from "./enterprise.js"
import { runDemo } from "./flow.js"
import { runMachineDemo } from "./machine.js"
import { runServe } from "./serve.js"

const out = (text: string) => {
  process.stdout.write(text)
}
const err = (text: string) => {
  process.stderr.write(text)
}

const describe = (error: unknown): string => {
  if (isAuthError(error)) {
    const details = [error.error, error.status === undefined ? undefined : `HTTP ${error.status}`].filter(Boolean)
    return `${error.step} failed (${error.reason}${details.length > 0 ? `, ${details.join(", ")}` : ""}): ${error.message}`
  }
  return error instanceof Error ? error.message : String(error)
}

const main = async (): Promise<number> => {
  let command: ReturnType<typeof parseCommandLine>
  try {
    command = parseCommandLine(process.argv.slice(2))
  } catch (error) {
    if (!(error instanceof UsageError)) throw error
    err(`keyway-demo: ${error.message}\n\n${USAGE}`)
    return 2
  }
  if (command.kind === "help") {
    out(USAGE)
    return 0
  }
  const controller = new AbortController()
  let signalled = false
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) {
      err(`keyway-demo: ${signal} again, exiting without waiting for the servers to stop\n`)
      process.exit(130)
    }
    signalled = true
    controller.abort()
  }
  process.on("SIGINT", onSignal)
  process.on("SIGTERM", onSignal)
  const ports = {
    ...(command.asPort === undefined ? {} : { asPort: command.asPort }),
    ...(command.mcpPort === undefined ? {} : { mcpPort: command.mcpPort }),
  }
  if (command.kind === "serve") {
    try {
      await runServe({ out, err, signal: controller.signal, ...ports })
      return 0
    } catch (error) {
      err(`keyway-demo: could not serve: ${describe(error)}\n`)
      return 1
    }
  }
  const color = process.stdout.isTTY === true && process.env.NO_COLOR === undefined
  try {
    const options = {
      out,
      err,
      color,
      progress: process.stderr.isTTY === true ? ("spinner" as const) : ("lines" as const),
      browser: command.browser,
      signal: controller.signal,
      ...ports,
    }
    if (command.scenario === "default") await runDemo(options)
    else if (command.scenario === "enterprise") await runEnterpriseDemo(options)
    else if (command.scenario === "dpop") await runDpopDemo(options)
    else if (command.scenario === "downstream") await runDownstreamDemo(options)
    else if (command.scenario === "connected-account") await runConnectedDemo(options)
    else if (command.scenario === "device") await runDeviceDemo(options)
    else await runMachineDemo(command.scenario, options)
    return 0
  } catch (error) {
    if (signalled) {
      err("keyway-demo: interrupted; the servers were stopped\n")
      return 130
    }
    err(`\nkeyway-demo: the demo failed: ${describe(error)}\n`)
    return 1
  }
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    err(`keyway-demo: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`)
    process.exit(1)
  },
)
