/**
 * URL-mode elicitation on a terminal: shows which server asks, the host, the message and the full URL, asks for
 * consent (y/N on a terminal, `--yes` for automation), opens the browser when there is one, or leaves the printed URL
 * for the user to open.
 *
 * @module
 */
import type { UrlElicitation } from "@keyway/client"
import type { UrlElicitationOptions } from "@keyway/mcp-sdk-client"

/** What the terminal offers. */
export interface Terminal {
  readonly err: (text: string) => void
  /** Asks a question on the terminal and resolves with the answer; undefined when standard input is no terminal. */
  readonly ask: ((question: string) => Promise<string>) | undefined
  /** Opens a URL in the user's browser; undefined when there is none ($BROWSER unset and no display). */
  readonly openBrowser: ((url: string) => Promise<void> | void) | undefined
}

const describe = (prompt: UrlElicitation.Prompt): string =>
  [
    `The MCP server "${prompt.server}" asks you to open a page at ${prompt.host}:`,
    `  ${prompt.message.replace(/\s+/gu, " ").trim()}`,
    `  ${prompt.url}`,
    ...(prompt.punycode
      ? [`  Warning: ${prompt.host} is an internationalized name (punycode); check that it is the site you expect.`]
      : []),
    "",
  ].join("\n")

/** The elicitation options of keyway-mcp: consent on the terminal, the browser or the printed URL. */
export const terminalElicitation = (terminal: Terminal, yes: boolean): UrlElicitationOptions => ({
  consent: async (prompt) => {
    terminal.err(describe(prompt))
    if (yes) return "accept"
    if (terminal.ask === undefined) {
      terminal.err("Not opened: standard input is not a terminal; run with --yes to accept such requests.\n")
      return "decline"
    }
    const answer = (await terminal.ask(`Open it? [y/N] `)).trim().toLowerCase()
    return answer === "y" || answer === "yes" ? "accept" : "decline"
  },
  open: async (url) => {
    const { openBrowser } = terminal
    if (openBrowser === undefined) {
      terminal.err(`No browser here: open the URL above yourself. keyway-mcp continues when the page is done.\n`)
      return
    }
    terminal.err("Opening the page in your browser; keyway-mcp continues when the page is done.\n")
    await openBrowser(url)
  },
})
