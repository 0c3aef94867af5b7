/** The default "you can close this tab" page. */
export const DEFAULT_SUCCESS_PAGE = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Authorization complete</title>
<style>body{font-family:system-ui,sans-serif;max-width:32rem;margin:4rem auto;text-align:center;color:#222}</style>
</head><body><h1>Authorization complete</h1><p>You can close this tab and return to the application.</p></body></html>`

/**
 * The command and arguments that open `url` in the system browser: the command in `$BROWSER` when set (the URL
 * becomes its last argument), else the platform's opener (`open` on macOS, `start` on Windows, `xdg-open` elsewhere).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8252.html#section-4.1 | RFC 8252 §4.1 (use the system browser)}
 */
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

/**
 * Why no system browser can open in this environment, or undefined when one can: `$BROWSER` names one; Windows
 * has one; macOS has one unless this is an SSH session (the page would open on the Mac's own screen); elsewhere a
 * graphical session is needed (`DISPLAY` or `WAYLAND_DISPLAY`) and, when `hasProgram` can tell, `xdg-open`.
 */
export const browserUnavailable = (
  env: Readonly<Record<string, string | undefined>>,
  platform: string,
  hasProgram?: (name: string) => boolean,
): string | undefined => {
  const set = (name: string) => (env[name] ?? "").trim() !== ""
  if (set("BROWSER")) return undefined
  if (platform === "win32") return undefined
  const ssh = set("SSH_CONNECTION") || set("SSH_CLIENT") || set("SSH_TTY")
  if (platform === "darwin") return ssh ? "an SSH session: a browser would open on the remote machine" : undefined
  if (!set("DISPLAY") && !set("WAYLAND_DISPLAY")) {
    return ssh
      ? "an SSH session without a display (no DISPLAY or WAYLAND_DISPLAY)"
      : "no display (no DISPLAY or WAYLAND_DISPLAY)"
  }
  if (hasProgram !== undefined && !hasProgram("xdg-open")) return "no browser opener (xdg-open is not installed)"
  return undefined
}
