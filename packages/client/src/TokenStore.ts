/**
 * Where the client keeps tokens, client registrations and pending authorizations: in memory, in one owner-only JSON
 * file, or in a store of your own.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1 (token storage)}
 * @module
 */
import { randomUUID } from "node:crypto"
import { chmod, mkdir, open, readFile, rename, unlink } from "node:fs/promises"
import { dirname, join } from "node:path"
import { Context, Effect, Layer } from "effect"

/**
 * A key-value store of JSON values. Implement these three methods to keep the client's state anywhere.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1}
 */
export interface Backend {
  readonly get: (key: string) => Promise<unknown>
  readonly set: (key: string, value: unknown) => Promise<void>
  readonly delete: (key: string) => Promise<void>
}

/**
 * The tokens held for one MCP server, with the absolute expiry and the scope actually granted.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-5.1 | RFC 6749 §5.1}
 */
export interface Tokens {
  readonly access_token: string
  /** `Bearer`, or the type an extension accepted for it (`DPoP`, RFC 9449 §5). */
  readonly token_type: string
  readonly refresh_token?: string
  /** Milliseconds since the epoch; absent when the server gave no lifetime. */
  readonly expires_at?: number
  /** The granted scope (the requested one when the server did not say otherwise, RFC 6749 §5.1). */
  readonly scope: string
  /** The resource the token was issued for, exactly as the protected resource metadata published it. */
  readonly resource: string
  /** The issuer of the authorization server that issued the token. */
  readonly issuer: string
  /** The client the tokens were issued to; absent for tokens obtained without one (workload identity federation). */
  readonly client_id?: string
  /**
   * The token endpoint of the issuer's validated metadata when the tokens were obtained, so that a refresh (after a
   * restart too) needs no new discovery. Absent in tokens stored by earlier versions: those refresh after discovery.
   */
  readonly token_endpoint?: string
  /** True when the authorization server was found by the 2025-03-26 fallback (refresh finds it the same way). */
  readonly legacy?: boolean
  /** Milliseconds since the epoch. */
  readonly obtained_at: number
}

/**
 * The state of an authorization request between its start and its callback (two-phase flows persist it).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9207.html#section-2.4 | RFC 9207 §2.4}
 */
export interface Pending {
  readonly state: string
  readonly code_verifier: string
  /** The issuer recorded from validated metadata before redirecting. */
  readonly issuer: string
  readonly iss_parameter_supported: boolean
  readonly redirect_uri: string
  readonly resource: string
  readonly scope: string
  readonly client_id: string
  readonly server: string
  /** True when the authorization server was found by the 2025-03-26 fallback. */
  readonly legacy?: boolean
  readonly created_at: number
}

/**
 * The client's storage as an Effect service.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1}
 */
export class TokenStore extends Context.Service<
  TokenStore,
  {
    readonly get: (key: string) => Effect.Effect<unknown>
    readonly set: (key: string, value: unknown) => Effect.Effect<void>
    readonly delete: (key: string) => Effect.Effect<void>
  }
>()("@keyway/client/TokenStore") {
  /** A store over any {@link Backend}. */
  static readonly layerBackend = (backend: Backend): Layer.Layer<TokenStore> =>
    Layer.succeed(TokenStore, fromBackend(backend))
  /** A store that lives as long as the process. */
  static readonly layerMemory: Layer.Layer<TokenStore> = Layer.sync(TokenStore, () => fromBackend(memory()))
  /** A store in one JSON file with owner-only permissions. */
  static readonly layerFile = (path: string): Layer.Layer<TokenStore> =>
    Layer.sync(TokenStore, () => fromBackend(file(path)))
}

/** Wraps a {@link Backend} as the {@link TokenStore} service. */
const fromBackend = (backend: Backend): TokenStore["Service"] =>
  TokenStore.of({
    get: (key) => Effect.promise(() => backend.get(key)),
    set: (key, value) => Effect.promise(() => backend.set(key, value)),
    delete: (key) => Effect.promise(() => backend.delete(key)),
  })

/**
 * An in-memory backend. Values are copied in and out, so callers never share mutable state with the store.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-7.1 | OAuth 2.1 §7.1}
 */
export const memory = (): Backend => {
  const entries = new Map<string, string>()
  return {
    get: async (key) => {
      const value = entries.get(key)
      return value === undefined ? undefined : (JSON.parse(value) as unknown)
    },
    set: async (key, value) => {
      entries.set(key, JSON.stringify(value))
    },
    delete: async (key) => {
      entries.delete(key)
    },
  }
}

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
    const temp = join(dirname(path), `.${randomUUID()}.tmp`)
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
