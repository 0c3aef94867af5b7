/**
 * Token storage on Node.js: one owner-only JSON file (`node:fs`), with every store of the main entry besides.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1 (token storage)}
 * @module
 */
import { randomUUID } from "node:crypto"
import { mkdir, open, readFile, rename, unlink } from "node:fs/promises"
import { dirname, join } from "node:path"
import * as Layer from "effect/Layer"
import { type Backend, fromBackend, TokenStore } from "../TokenStore.js"

export * from "../TokenStore.js"

interface FileShape {
  readonly version: 1
  readonly entries: Record<string, unknown>
}

/**
 * A backend in one JSON file, readable and writable by its owner only (mode 0600). Every write goes to a temporary
 * file in the same directory that is then renamed over the old one, so a crash never leaves a half-written file.
 * Writes from one process are serialised; the file is read once, on first use, and when it is missing its directory
 * (owner-only, mode 0700) is made then, ahead of the first write.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1}
 */
export const file = (path: string): Backend => {
  let loaded: Promise<Map<string, unknown>> | undefined
  let queue: Promise<void> = Promise.resolve()
  /** The directory being made because the file was missing when read; settles, never fails (see {@link load}). */
  let directory: Promise<void> | undefined

  const load = (): Promise<Map<string, unknown>> => {
    loaded ??= readFile(path, "utf8").then(
      (text) => {
        const parsed = JSON.parse(text) as Partial<FileShape>
        return new Map(Object.entries(parsed.entries ?? {}))
      },
      (error: NodeJS.ErrnoException) => {
        if (error.code !== "ENOENT") throw error
        // No file yet, so a write will follow: its directory (owner-only, when missing) is made now, while the
        // caller goes on, rather than on the first write, where a cold start waits for it (milliseconds on a busy
        // disk). A failure is left to the first write, which makes the directory again and reports it.
        directory = mkdir(dirname(path), { recursive: true, mode: 0o700 }).then(
          () => undefined,
          () => undefined,
        )
        return new Map<string, unknown>()
      },
    )
    return loaded
  }

  /** The temporary file, created owner-only; the directory (owner-only) is made when it is missing. */
  const create = async (temp: string) => {
    await directory
    try {
      return await open(temp, "wx", 0o600)
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error
      await mkdir(dirname(path), { recursive: true, mode: 0o700 })
      return await open(temp, "wx", 0o600)
    }
  }

  // Crash safety: the new content goes to a temporary file in the same directory, is flushed to disk (fsync), and
  // only then renamed over the old file, so the file is always the previous or the new content, never a torn one.
  const persist = async (entries: Map<string, unknown>): Promise<void> => {
    const temp = join(dirname(path), `.${randomUUID()}.tmp`)
    const body: FileShape = { version: 1, entries: Object.fromEntries(entries) }
    const handle = await create(temp)
    try {
      // The mode is set on the file before it takes the path (open's mode is subject to the umask), and rename
      // keeps it.
      await handle.chmod(0o600)
      await handle.writeFile(JSON.stringify(body, null, 2))
      await handle.sync()
    } catch (error) {
      await handle.close()
      await unlink(temp).catch(() => undefined)
      throw error
    }
    await handle.close()
    try {
      await rename(temp, path)
    } catch (error) {
      await unlink(temp).catch(() => undefined)
      throw error
    }
  }

  const mutate = (change: (entries: Map<string, unknown>) => void): Promise<void> => {
    const next = queue.then(async () => {
      const entries = await load()
      change(entries)
      await persist(entries)
    })
    queue = next.catch(() => undefined)
    return next
  }

  return {
    get: async (key) => {
      await queue
      const value = (await load()).get(key)
      return value === undefined ? undefined : structuredClone(value)
    },
    set: (key, value) => mutate((entries) => entries.set(key, structuredClone(value))),
    delete: (key) =>
      mutate((entries) => {
        entries.delete(key)
      }),
  }
}

/**
 * A store in one JSON file with owner-only permissions, as a layer; see {@link file}.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1}
 */
export const layerFile = (path: string): Layer.Layer<TokenStore> =>
  Layer.sync(TokenStore, () => fromBackend(file(path)))
