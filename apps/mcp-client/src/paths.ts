/**
 * Where keyway-mcp keeps its tokens: `$XDG_CONFIG_HOME/keyway/tokens.json`, or `~/.config/keyway/tokens.json` when
 * XDG_CONFIG_HOME is unset or not absolute (XDG Base Directory Specification).
 *
 * @see {@link https://specifications.freedesktop.org/basedir-spec/latest/ | XDG Base Directory Specification}
 * @module
 */
import { homedir } from "node:os"
import { isAbsolute, join } from "node:path"

/**
 * The token file for an environment and home directory.
 *
 * @see {@link https://specifications.freedesktop.org/basedir-spec/latest/ | XDG Base Directory Specification}
 */
export const tokensFile = (env: NodeJS.ProcessEnv = process.env, home: string = homedir()): string => {
  const xdg = env.XDG_CONFIG_HOME
  const base = xdg !== undefined && xdg !== "" && isAbsolute(xdg) ? xdg : join(home, ".config")
  return join(base, "keyway", "tokens.json")
}
