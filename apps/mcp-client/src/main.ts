#!/usr/bin/env node
// First of all: an older Node.js is told what to run instead, before a module that needs a newer one runs.
import "./requireNode.js"
/**
 * keyway-mcp: a command-line MCP client. `list-tools <url>`, `call <url> <tool> [json args]`, `login <url>`,
 * `logout <url>`. Authorization runs in the system browser with a loopback listener (or the command in $BROWSER),
 * headless with `--headless`, or on another device with `--device` (the default where no browser can open); tokens
 * live in the user's config directory, readable by the owner only.
 *
 * @module
 */
import { createInterface } from "node:readline/promises"
import { UserAgent } from "@keyway/client/node"
import { parseCommandLine, USAGE } from "./args.js"
import { runCommand } from "./commands.js"
import { describeError } from "./errors.js"
import { tokensFile } from "./paths.js"

const main = async (): Promise<void> => {
  const { command, options } = parseCommandLine(process.argv.slice(2), process.env)
  if (command.kind === "help") {
    process.stdout.write(`${USAGE}\n`)
    return
  }
  await runCommand(command, options, {
    out: (text) => process.stdout.write(text),
    err: (text) => process.stderr.write(text),
    tokensFile: options.tokens ?? tokensFile(),
    openBrowser: UserAgent.openSystemBrowser,
    browserUnavailable: UserAgent.systemBrowserUnavailable,
    errIsTerminal: process.stderr.isTTY === true,
    elicitation: {
      ask: process.stdin.isTTY
        ? async (question) => {
            const terminal = createInterface({ input: process.stdin, output: process.stderr })
            try {
              return await terminal.question(question)
            } finally {
              terminal.close()
            }
          }
        : undefined,
      openBrowser: UserAgent.systemBrowserUnavailable() === undefined ? UserAgent.openSystemBrowser : undefined,
    },
  })
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`keyway-mcp: ${describeError(error)}\n`)
    process.exit(1)
  },
)
