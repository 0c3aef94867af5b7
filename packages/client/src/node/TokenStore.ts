/**
 * Token storage on Node.js: one owner-only JSON file (`node:fs`), with every store of the main entry besides.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1 (token storage)}
 * @module
 */
import { chmod, mkdir, open, readFile, rename, unlink } from "node:fs/promises"
import { dirname, join } from "node:path"
import { Layer } from "effect"
import { type Backend, fromBackend, TokenStore } from "../TokenStore.js"

export * from "../TokenStore.js"

interface FileShape {
  readonly version: 1
  readonly entries: Record<string, unknown>
}

/**
 * A backend in one JSON file, readable and writable by its owner only (mode 0600). Every write goes to a temporary
 * file in the same directory that is then renamed over the old one, so a crash never leaves a half-written file.
 * Writes from one process are serialised; the file is read once, on first use.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1}
 */
export const file = (path: string): Backend => {
  let loaded: Promise<Map<string, unknown>> | undefined
  let queue: Promise<void> = Promise.resolve()

  const load = (): Promise<Map<string, unknown>> => {
    loaded ??= readFile(path, "utf8").then(
      (text) => {
        const parsed = JSON.parse(text) as Partial<FileShape>
        return new Map(Object.entries(parsed.entries ?? {}))
      },
      (error: NodeJS.ErrnoException) => {
        if (error.code === "ENOENT") return new Map<string, unknown>()
        throw error
      },
    )
    return loaded
  }

  const persist = async (entries: Map<string, unknown>): Promise<void> => {
    await mkdir(dirname(path), { recursive: true, mode: 0o700 })
    const temp = join(dirname(path), `.${crypto.randomUUID()}.tmp`)
    const body: FileShape = { version: 1, entries: Object.fromEntries(entries) }
    const handle = await open(temp, "wx", 0o600)
    try {
      await handle.writeFile(JSON.stringify(body, null, 2))
      await handle.sync()
    } finally {
      await handle.close()
    }
    try {
      await rename(temp, path)
    } catch (error) {
      await unlink(temp).catch(() => undefined)
      throw error
    }
    // rename keeps the temp file's mode; chmod again in case a umask or a pre-existing file interfered.
    await chmod(path, 0o600)
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
