/**
 * The built-in user list lives in the configuration file. The server re-reads it when the file changes (so
 * `admin users add|passwd|remove` take effect without a restart), and the admin commands edit it in place.
 *
 * @module
 */
import { readFile, rename, stat, writeFile } from "node:fs/promises"
import { type Config, UserAuthenticator } from "@keyway/authorization-server"
import { parseConfig, type UserConfig } from "./config.js"
import type { Log } from "./logging.js"

/** The library's users of the file's: clear-text passwords hashed with scrypt. */
export const hashUsers = (users: ReadonlyArray<UserConfig>, log?: Log): Promise<ReadonlyArray<Config.UserOptions>> =>
  Promise.all(
    users.map(async (u) => {
      if (u.password !== undefined) {
        log?.(`user ${JSON.stringify(u.username)} has a clear-text password in the configuration; prefer passwordHash`)
      }
      return {
        username: u.username,
        passwordHash: u.passwordHash ?? (await UserAuthenticator.hashPassword(u.password ?? "")),
        ...(u.displayName === undefined ? {} : { displayName: u.displayName }),
      }
    }),
  )

const stampOf = async (file: string): Promise<string | undefined> => {
  const s = await stat(file).catch(() => undefined)
  return s === undefined ? undefined : `${s.mtimeMs}:${s.size}:${s.ino}`
}

/**
 * The sign-in check over the file's users, read again at the first sign-in after the file changed. A file that no
 * longer parses keeps the users as they were (and says so in the log).
 */
export const liveUsers = async (
  file: string,
  initial: ReadonlyArray<Config.UserOptions>,
  log: Log,
): Promise<UserAuthenticator.AuthenticateFn> => {
  let stamp = await stampOf(file)
  let current = UserAuthenticator.fromUsers(initial)
  let reloading: Promise<void> | undefined
  const reload = async (next: string) => {
    try {
      const config = parseConfig(JSON.parse(await readFile(file, "utf8")), file)
      current = UserAuthenticator.fromUsers(await hashUsers(config.users ?? []))
      log(`users reloaded from ${file} (${config.users?.length ?? 0})`)
    } catch (e) {
      log(`warning: users not reloaded, ${file} is not usable: ${(e as Error).message.split("\n").join(" ")}`)
    }
    stamp = next
  }
  return async (credentials) => {
    const now = await stampOf(file)
    if (now !== undefined && now !== stamp) {
      reloading ??= reload(now).finally(() => {
        reloading = undefined
      })
    }
    await reloading
    return current(credentials)
  }
}

/**
 * Changes the file's `users` with `change` and writes it back whole (a temporary file renamed over it, so a server
 * never reads half a file), keeping its mode.
 */
export const editUsers = async (
  file: string,
  change: (users: Array<Record<string, unknown>>) => Array<Record<string, unknown>>,
): Promise<void> => {
  const json = JSON.parse(await readFile(file, "utf8")) as Record<string, unknown>
  const users = Array.isArray(json.users) ? (json.users as Array<Record<string, unknown>>) : []
  const next = { ...json, users: change([...users]) }
  // Whatever the result, it must still be a valid configuration.
  parseConfig(next, file)
  const mode = (await stat(file)).mode & 0o777
  const temporary = `${file}.${process.pid}.tmp`
  await writeFile(temporary, `${JSON.stringify(next, null, 2)}\n`, { mode })
  await rename(temporary, file)
}

/**
 * Reads a new password: from the terminal without echo (asked twice), or the first line of standard input when it is
 * not a terminal (scripts, tests).
 */
export const readPassword = async (prompt: string): Promise<string> => {
  const stdin = process.stdin
  if (!stdin.isTTY) {
    const chunks: Array<Buffer> = []
    for await (const chunk of stdin) chunks.push(chunk as Buffer)
    return (Buffer.concat(chunks).toString("utf8").split(/\r?\n/)[0] ?? "").trimEnd()
  }
  const ask = (question: string) =>
    new Promise<string>((resolve, reject) => {
      process.stderr.write(question)
      let typed = ""
      stdin.setRawMode(true)
      stdin.resume()
      const onData = (data: Buffer) => {
        for (const char of data.toString("utf8")) {
          if (char === "\r" || char === "\n") {
            stdin.off("data", onData)
            stdin.setRawMode(false)
            stdin.pause()
            process.stderr.write("\n")
            resolve(typed)
            return
          }
          if (char === "\u0003") {
            stdin.off("data", onData)
            stdin.setRawMode(false)
            stdin.pause()
            process.stderr.write("\n")
            reject(new Error("interrupted"))
            return
          }
          if (char === "\u007f" || char === "\b") typed = typed.slice(0, -1)
          else typed += char
        }
      }
      stdin.on("data", onData)
    })
  const first = await ask(prompt)
  const again = await ask("Again: ")
  if (first !== again) throw new Error("the passwords differ")
  return first
}
