#!/usr/bin/env node
/**
 * `keyway-doctor <mcp-server-url>`: diagnoses the server and prints the report (text, or JSON with `--json`), writes
 * the HTML report with `--html <file>`, and exits 0 (every check passes, warnings allowed), 1 (a check fails) or 2
 * (bad arguments, or the MCP server could not be diagnosed).
 *
 * @module
 */
import { writeFile } from "node:fs/promises"
import { diagnose } from "./diagnose.js"
import { parseArguments, USAGE, UsageError } from "./internal/args.js"
import { formatHtml } from "./report/html.js"
import { formatJson } from "./report/json.js"
import { formatText, useColor } from "./report/text.js"
import { exitCode } from "./report/verdict.js"

const main = async (): Promise<number> => {
  let command: ReturnType<typeof parseArguments>
  try {
    command = parseArguments(process.argv.slice(2), process.env)
  } catch (e) {
    if (!(e instanceof UsageError)) throw e
    process.stderr.write(`keyway-doctor: ${e.message}\n`)
    return 2
  }
  if (command.kind === "help") {
    process.stdout.write(USAGE)
    return 0
  }
  let diagnosis: Awaited<ReturnType<typeof diagnose>>
  try {
    diagnosis = await diagnose(command.target, command.options)
  } catch (e) {
    // A bug or an environment the doctor cannot work in (no browser for --login, say) is "could not run", not a
    // verdict on the server.
    process.stderr.write(`keyway-doctor: could not run: ${e instanceof Error ? e.message : String(e)}\n`)
    return 2
  }
  if (command.html !== undefined) {
    try {
      await writeFile(command.html, formatHtml(diagnosis))
    } catch (e) {
      process.stderr.write(
        `keyway-doctor: cannot write ${command.html}: ${e instanceof Error ? e.message : String(e)}\n`,
      )
      return 2
    }
  }
  process.stdout.write(
    command.json ? formatJson(diagnosis) : formatText(diagnosis, { color: useColor(process.stdout, process.env) }),
  )
  return exitCode(diagnosis)
}

process.exitCode = await main()
