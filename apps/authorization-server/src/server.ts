/**
 * Starts the authorization server of an {@link AppConfig}: SQLite storage in the data directory (or PostgreSQL),
 * passwords hashed at start, a node:http listener, and readable logs.
 *
 * @module
 */
import { mkdir } from "node:fs/promises"
import { dirname, join, resolve } from "node:path"
import {
  type AuthorizationServer,
  type Config,
  createAuthorizationServer,
  type Extension,
  NodeServer,
  UserAuthenticator,
} from "@keyway/authorization-server"
import { SecureUrl } from "@keyway/core"
import { clientCredentialsGrant } from "@keyway/ext-client-credentials/authorization-server"
import { dpopAuthorizationServer } from "@keyway/ext-dpop/authorization-server"
import {
  type AppConfig,
  ConfigFileError,
  DEFAULTS,
  type ExtensionsConfig,
  parseConfig,
  type RateLimitsConfig,
} from "./config.js"
import { isPostgres, redactConnectionString } from "./internal/database.js"
import { defaultLog, type Log, withRequestLog } from "./logging.js"

/** A started server. */
export interface RunningAuthorizationServer {
  /** The issuer identifier, e.g. `http://127.0.0.1:9000`. */
  readonly issuer: string
  readonly port: number
  /** Stops listening, closes open connections and the database. */
  readonly close: () => Promise<void>
}

/** Options of {@link startAuthorizationServer}. */
export interface StartOptions {
  /** Receives readable one-line events; stderr with the time by default. */
  readonly log?: (line: string) => void
}

const urlHost = (host: string): string => (host.includes(":") && !host.startsWith("[") ? `[${host}]` : host)

/** The SQLite file of a configuration; its directory is created owner-only when missing. */
const databaseFile = async (config: AppConfig): Promise<string> => {
  const file =
    config.database === undefined
      ? join(resolve(config.dataDir ?? DEFAULTS.dataDir), DEFAULTS.databaseFile)
      : resolve(config.database)
  await mkdir(dirname(file), { recursive: true, mode: 0o700 })
  return file
}

/** The library's storage option of a configuration, and how the log names it (never with a password). */
const storageOf = async (
  config: AppConfig,
): Promise<{ readonly storage: AuthorizationServer.StorageOption; readonly described: string }> => {
  if (isPostgres(config.database)) {
    const schema = config.databaseSchema
    return {
      storage: {
        type: "postgres",
        connectionString: config.database,
        ...(schema === undefined ? {} : { schema }),
      },
      described: `${redactConnectionString(config.database)}${schema === undefined ? "" : ` (schema ${schema})`}`,
    }
  }
  const file = await databaseFile(config)
  return { storage: { type: "sqlite", path: file }, described: file }
}

const users = async (config: AppConfig, log: Log) =>
  Promise.all(
    (config.users ?? []).map(async (u) => {
      if (u.password !== undefined) {
        log(`user ${JSON.stringify(u.username)} has a clear-text password in the configuration; prefer passwordHash`)
      }
      return {
        username: u.username,
        passwordHash: u.passwordHash ?? (await UserAuthenticator.hashPassword(u.password ?? "")),
        ...(u.displayName === undefined ? {} : { displayName: u.displayName }),
      }
    }),
  )

/**
 * The library's `rateLimits` from the file's: `clientAddressHeader` becomes the `clientAddress` function, reading the
 * last entry of that header (the one the proxy in front wrote).
 */
export const rateLimits = (config: RateLimitsConfig | false): Config.RateLimitOptions | false => {
  if (config === false) return false
  const { clientAddressHeader, ...limits } = config
  if (clientAddressHeader === undefined) return limits
  return {
    ...limits,
    clientAddress: (request) => {
      const entries = request.headers.get(clientAddressHeader)?.split(",") ?? []
      const last = entries.at(-1)?.trim()
      return last === undefined || last === "" ? undefined : last
    },
  }
}

/** The extensions the file turns on, in a fixed order. */
export const extensionsOf = (config: ExtensionsConfig): ReadonlyArray<Extension.AuthorizationServerExtension> => [
  ...(config.clientCredentials === undefined ? [] : [clientCredentialsGrant(config.clientCredentials)]),
  ...(config.dpop === undefined ? [] : [dpopAuthorizationServer(config.dpop)]),
]

const describeError = (e: unknown): string =>
  typeof e === "object" && e !== null && "message" in e ? String((e as { message: unknown }).message) : String(e)

/**
 * Starts the server. The configuration is validated first ({@link ConfigFileError} naming the field); an issuer the
 * library refuses (http on a non-loopback host, a bad resource URI, ...) is a {@link ConfigFileError} too.
 */
export const startAuthorizationServer = async (
  input: AppConfig,
  options: StartOptions = {},
): Promise<RunningAuthorizationServer> => {
  const log = options.log ?? defaultLog
  const config = parseConfig(input, "the configuration")
  const host = config.host ?? DEFAULTS.host
  if (config.issuer === undefined && !SecureUrl.isLoopbackHost(host)) {
    throw new ConfigFileError(
      `invalid configuration: issuer is required when host (${host}) is not a loopback address; set an https issuer`,
    )
  }
  const { storage, described } = await storageOf(config)
  const passwords = await users(config, log)

  // Listen first: with port 0 the issuer is known only once the port is.
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
  let allow: (pathname: string) => string | undefined = () => undefined
  // Request URLs come from the issuer, never from a caller's Host header.
  let publicUrl = config.issuer ?? `http://${urlHost(host)}`
  const http = await NodeServer.listen((request) => handler(request), {
    host,
    port: config.port ?? DEFAULTS.port,
    publicUrl: () => publicUrl,
    allow: (pathname) => allow(pathname),
  })
  const issuer = config.issuer ?? `http://${urlHost(host)}:${http.port}`
  publicUrl = issuer
  const issuerUrl = new URL(issuer)
  let server: ReturnType<typeof createAuthorizationServer>
  try {
    server = createAuthorizationServer({
      issuer,
      resources: config.resources,
      users: passwords,
      ...(config.clients === undefined ? {} : { clients: config.clients }),
      ...(config.defaultResource === undefined ? {} : { defaultResource: config.defaultResource }),
      ...(config.clientIdMetadataDocuments === undefined
        ? {}
        : { clientIdMetadataDocuments: config.clientIdMetadataDocuments }),
      ...(config.lifetimes === undefined ? {} : { lifetimes: config.lifetimes }),
      ...(config.rememberConsentFor === undefined ? {} : { rememberConsentFor: config.rememberConsentFor }),
      ...(config.signingKeys === undefined ? {} : { signingKeys: config.signingKeys }),
      ...(config.maintenance === undefined ? {} : { maintenance: config.maintenance }),
      ...(config.rateLimits === undefined ? {} : { rateLimits: rateLimits(config.rateLimits) }),
      ...(config.sessionSecret === undefined ? {} : { sessionSecret: config.sessionSecret }),
      ...(config.upstream === undefined ? {} : { upstream: config.upstream }),
      registration: config.registration ?? DEFAULTS.registration,
      development: {
        allowHttpLoopbackIssuer: SecureUrl.transportOf(issuerUrl) === "http-loopback",
        ...(config.development?.allowHttpLoopbackUpstream === undefined
          ? {}
          : { allowHttpLoopbackUpstream: config.development.allowHttpLoopbackUpstream }),
      },
      storage,
      ...(config.extensions === undefined ? {} : { extensions: extensionsOf(config.extensions) }),
      warn: (message) => log(message.replace(/^\[keyway\] /, "warning: ")),
    })
  } catch (e) {
    await http.close()
    throw new ConfigFileError(`invalid configuration: ${describeError(e)}`)
  }
  try {
    // Opens the database, stores the configured clients and creates the signing key before the first request.
    await server.ready()
  } catch (e) {
    await http.close()
    await server.close()
    throw e
  }
  handler = withRequestLog(server.handler, issuer, log)
  allow = server.allow
  log(`database ${described}`)
  log(
    `listening on ${http.url}, issuer ${server.issuer}; resources ${config.resources.map((r) => r.uri).join(", ")}; ` +
      `dynamic registration ${(config.registration ?? DEFAULTS.registration) ? "on" : "off"}` +
      (config.upstream === undefined ? "" : `; users sign in at the upstream ${config.upstream.issuer}`),
  )
  let closing: Promise<void> | undefined
  return {
    issuer: server.issuer,
    port: http.port,
    close: () => {
      closing ??= (async () => {
        await http.close()
        await server.close()
        log("stopped")
      })()
      return closing
    },
  }
}
