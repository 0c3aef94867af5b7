/**
 * Opens the system browser: the command in $BROWSER when set (the URL as its last argument), else the platform's
 * opener (open on macOS, start on Windows, xdg-open elsewhere).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-4.1 | RFC 8252 §4.1 (use the system browser)}
 * @module
 */
import { spawn } from "node:child_process"

/** The command and arguments that open a URL. */
export const openerCommand = (
  url: string,
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
): readonly [string, ReadonlyArray<string>] => {
  const configured = env.BROWSER?.trim()
  if (configured !== undefined && configured !== "") {
    const [program = "", ...args] = configured.split(/\s+/u)
    return [program, [...args, url]]
  }
  if (platform === "darwin") return ["open", [url]]
  if (platform === "win32") return ["cmd", ["/c", "start", "", url]]
  return ["xdg-open", [url]]
}

/** Starts the browser; resolves once its process started, rejects when it cannot be started. */
export const openSystemBrowser = (url: string): Promise<void> =>
  new Promise<void>((resolve, reject) => {
    const [program, args] = openerCommand(url)
    const child = spawn(program, [...args], { stdio: "ignore", detached: true })
    child.on("error", (error) => reject(new Error(`could not start ${program}: ${error.message}`)))
    child.on("spawn", () => {
      child.unref()
      resolve()
    })
  })
