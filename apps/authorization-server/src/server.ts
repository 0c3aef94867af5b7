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
  Config,
  createAuthorizationServer,
  type Extension,
  NodeServer,
} from "@keyway/authorization-server"
import { Grant, SecureUrl } from "@keyway/core"
import { clientCredentialsGrant } from "@keyway/ext-client-credentials/authorization-server"
import { deviceAuthorization } from "@keyway/ext-device-authorization/authorization-server"
import { dpopAuthorizationServer } from "@keyway/ext-dpop/authorization-server"
import { identityAssertionGrant, identityAssertionIssuer } from "@keyway/ext-enterprise-managed/authorization-server"
import { tokenExchange } from "@keyway/ext-token-exchange/authorization-server"
import { type IssuanceEvent, workloadIdentityGrant } from "@keyway/ext-workload-identity/authorization-server"
import { type AuditLog, openAuditLog } from "./audit.js"
import {
  type AppConfig,
  ConfigFileError,
  DEFAULTS,
  type ExtensionsConfig,
  parseConfig,
  type RateLimitsConfig,
} from "./config.js"
import { isPostgres, redactConnectionString } from "./internal/database.js"
import { defaultLog, type Log, securityEventReceiver, withObservation } from "./logging.js"
import { ServerMetrics, serveMetrics } from "./metrics.js"
import { hashUsers, liveUsers } from "./users.js"

/** A started server. */
export interface RunningAuthorizationServer {
  /** The issuer identifier, e.g. `http://127.0.0.1:9000`. */
  readonly issuer: string
  readonly port: number
  /** The metrics listener's URL (`http://host:port/metrics`), when `metrics` is configured. */
  readonly metricsUrl?: string
  /** Stops listening, closes open connections and the database. */
  readonly close: () => Promise<void>
}

/** Options of {@link startAuthorizationServer}. */
export interface StartOptions {
  /** Receives readable one-line events; stderr with the time by default. */
  readonly log?: (line: string) => void
  /**
   * The configuration file the configuration came from: its users are then read again whenever it changes, so that
   * `admin users` commands take effect without a restart.
   */
  readonly configFile?: string
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
export const storageOf = async (
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

/** A workload identity decision as one log line (never the assertion or the token). */
const describeIssuance = (event: IssuanceEvent): string => {
  const who = [
    event.issuer === undefined ? undefined : `issuer ${JSON.stringify(event.issuer)}`,
    event.subject === undefined ? undefined : `workload ${JSON.stringify(event.subject)}`,
  ].filter((part) => part !== undefined)
  const what =
    event.outcome === "issued"
      ? `token issued: scope ${JSON.stringify(event.scope ?? "")}, resource ${event.resource ?? "?"}`
      : `refused: ${event.error ?? "?"} (${event.description ?? ""})`
  return `workload identity ${what}${who.length === 0 ? "" : `, ${who.join(", ")}`}`
}

/** The extensions the file turns on, in a fixed order; their decisions and warnings go to the app's log. */
export const extensionsOf = (
  config: ExtensionsConfig,
  log: Log,
): ReadonlyArray<Extension.AuthorizationServerExtension> => [
  ...(config.clientCredentials === undefined ? [] : [clientCredentialsGrant(config.clientCredentials)]),
  ...(config.deviceAuthorization === undefined ? [] : [deviceAuthorization(config.deviceAuthorization)]),
  ...(config.workloadIdentity === undefined
    ? []
    : [
        workloadIdentityGrant({
          ...config.workloadIdentity,
          log: (event) => log(describeIssuance(event)),
          warn: (message) => log(message.replace(/^\[keyway\] /, "warning: ")),
        }),
      ]),
  ...(config.dpop === undefined ? [] : [dpopAuthorizationServer(config.dpop)]),
  ...(config.enterpriseManaged?.identityProvider === undefined
    ? []
    : [identityAssertionIssuer(config.enterpriseManaged.identityProvider)]),
  ...(config.tokenExchange === undefined ? [] : [tokenExchange(config.tokenExchange)]),
  ...(config.enterpriseManaged?.authorizationServer === undefined
    ? []
    : [
        identityAssertionGrant({
          ...config.enterpriseManaged.authorizationServer,
          warn: (message) => log(message.replace(/^\[keyway\] /, "warning: ")),
        }),
      ]),
]

/** Every grant type the token endpoint serves: the authorization code and refresh grants, and the extensions'. */
export const grantTypesOf = (
  extensions: ReadonlyArray<Extension.AuthorizationServerExtension>,
): ReadonlyArray<string> => [
  ...new Set([
    Grant.AUTHORIZATION_CODE,
    Grant.REFRESH_TOKEN,
    ...extensions.flatMap((e) => (e.grants ?? []).map((g) => g.grantType)),
  ]),
]

const HEALTH_PATHS = new Set(["/health/live", "/health/ready"])

/**
 * `/health/live` (the process answers) and `/health/ready` (the database answers and a key can sign: 200, else 503),
 * at the root of the listener whatever the issuer's path; undefined for any other request.
 */
const health = (
  request: Request,
  server: AuthorizationServer.AuthorizationServerInstance,
): Promise<Response> | undefined => {
  const path = new URL(request.url).pathname
  if (!HEALTH_PATHS.has(path)) return undefined
  const answer = (status: number, body: object) =>
    new Response(request.method === "HEAD" ? null : JSON.stringify(body), {
      status,
      headers: { "content-type": "application/json", "cache-control": "no-store" },
    })
  if (request.method !== "GET" && request.method !== "HEAD") {
    return Promise.resolve(new Response(null, { status: 405, headers: { allow: "GET, HEAD" } }))
  }
  if (path === "/health/live") return Promise.resolve(answer(200, { status: "ok" }))
  return server.readiness().then((r) =>
    answer(r.ready ? 200 : 503, {
      status: r.ready ? "ok" : "unavailable",
      checks: { database: r.database, signingKey: r.signingKey },
    }),
  )
}

const describeError = (e: unknown): string =>
  typeof e === "object" && e !== null && "message" in e ? String((e as { message: unknown }).message) : String(e)

/**
 * Starts the server. The configuration is validated first ({@link ConfigFileError} naming the field); an issuer the
 * library refuses (http on a non-loopback host, a bad resource URI, ...) is a {@link ConfigFileError} too, and so is
 * a database that serves another issuer. A port that cannot be listened on is a plain error (the environment's).
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
  const passwords = await hashUsers(config.users ?? [], log)
  // The file's users are read again when it changes (admin users commands), unless users sign in upstream.
  const authenticate =
    options.configFile === undefined || config.upstream !== undefined
      ? undefined
      : await liveUsers(options.configFile, passwords, log)
  let extensions: ReadonlyArray<Extension.AuthorizationServerExtension>
  try {
    extensions = config.extensions === undefined ? [] : extensionsOf(config.extensions, log)
  } catch (e) {
    throw new ConfigFileError(`invalid configuration: ${describeError(e)}`)
  }
  const metrics = config.metrics === undefined ? undefined : new ServerMetrics(grantTypesOf(extensions))
  // The OpenTelemetry SDK is loaded only when traces are exported.
  const tracing = config.tracing === undefined ? undefined : (await import("./tracing.js")).tracingLayer(config.tracing)
  const audit: AuditLog | undefined =
    config.auditLog === undefined ? undefined : openAuditLog(resolve(config.auditLog), "server")

  // Listen first: with port 0 the issuer is known only once the port is.
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
  let allow: (pathname: string) => string | undefined = () => undefined
  // Request URLs come from the issuer, never from a caller's Host header.
  let publicUrl = config.issuer ?? `http://${urlHost(host)}`
  const http = await NodeServer.listen((request) => handler(request), {
    host,
    port: config.port ?? DEFAULTS.port,
    publicUrl: () => publicUrl,
    allow: (pathname) => (HEALTH_PATHS.has(pathname) ? "GET, HEAD" : allow(pathname)),
  })
  const issuer = config.issuer ?? `http://${urlHost(host)}:${http.port}`
  publicUrl = issuer
  const issuerUrl = new URL(issuer)
  let server: ReturnType<typeof createAuthorizationServer>
  try {
    server = createAuthorizationServer({
      issuer,
      ...(config.previousIssuer === undefined ? {} : { previousIssuer: config.previousIssuer }),
      resources: config.resources,
      users: passwords,
      ...(authenticate === undefined ? {} : { authenticate }),
      ...(config.clients === undefined ? {} : { clients: config.clients }),
      ...(config.defaultResource === undefined ? {} : { defaultResource: config.defaultResource }),
      ...(config.clientIdMetadataDocuments === undefined
        ? {}
        : { clientIdMetadataDocuments: config.clientIdMetadataDocuments }),
      ...(config.lifetimes === undefined ? {} : { lifetimes: config.lifetimes }),
      ...(config.rememberConsentFor === undefined ? {} : { rememberConsentFor: config.rememberConsentFor }),
      ...(config.openid === undefined ? {} : { openid: config.openid }),
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
      ...(extensions.length === 0 ? {} : { extensions }),
      ...(metrics === undefined ? {} : { onStorageOperation: metrics.storage }),
      // Log lines, metrics and the audit log all come from the events the endpoints report.
      onSecurityEvent: securityEventReceiver({
        log,
        ...(metrics === undefined ? {} : { metrics: metrics.event }),
        ...(audit === undefined ? {} : { audit: audit.write }),
      }),
      ...(tracing === undefined ? {} : { tracing }),
      warn: (message) => log(message.replace(/^\[keyway\] /, "warning: ")),
    })
  } catch (e) {
    audit?.close()
    await http.close()
    throw new ConfigFileError(`invalid configuration: ${describeError(e)}`)
  }
  try {
    // Opens the database, stores the configured clients and creates the signing key before the first request.
    await server.ready()
  } catch (e) {
    audit?.close()
    await http.close()
    await server.close()
    // A database that serves another issuer is a configuration mistake; a database that fails is not.
    throw e instanceof Config.ConfigError ? new ConfigFileError(`invalid configuration: ${e.message}`) : e
  }
  let metricsListener: Awaited<ReturnType<typeof serveMetrics>> | undefined
  if (config.metrics !== undefined && metrics !== undefined) {
    try {
      metricsListener = await serveMetrics(metrics.text, {
        host: config.metrics.host ?? DEFAULTS.host,
        port: config.metrics.port,
      })
    } catch (e) {
      audit?.close()
      await http.close()
      await server.close()
      // The environment's doing (a port in use, an address not on this machine), like the public port's: exit code 1.
      throw new Error(`metrics: cannot listen: ${describeError(e)}`)
    }
  }
  const observed = withObservation(server.handler, issuer, {
    log,
    ...(metrics === undefined ? {} : { request: metrics.request }),
  })
  // Health checks are answered before the request log, which they would flood.
  handler = (request) => health(request, server) ?? observed(request)
  allow = server.allow
  log(`database ${described}`)
  log(
    `listening on ${http.url}, issuer ${server.issuer}; resources ${config.resources.map((r) => r.uri).join(", ")}; ` +
      `dynamic registration ${(config.registration ?? DEFAULTS.registration) ? "on" : "off"}` +
      (config.upstream === undefined ? "" : `; users sign in at the upstream ${config.upstream.issuer}`),
  )
  if (metricsListener !== undefined) log(`metrics on ${metricsListener.url}/metrics`)
  if (audit !== undefined) log(`audit log ${resolve(config.auditLog ?? "")}`)
  if (config.tracing !== undefined) log(`traces exported over OTLP to ${config.tracing.otlpEndpoint}`)
  let closing: Promise<void> | undefined
  return {
    issuer: server.issuer,
    port: http.port,
    ...(metricsListener === undefined ? {} : { metricsUrl: `${metricsListener.url}/metrics` }),
    close: () => {
      closing ??= (async () => {
        await http.close()
        await metricsListener?.close()
        await server.close()
        audit?.close()
        log("stopped")
      })()
      return closing
    },
  }
}
