/**
 * The app's configuration: the JSON file's shape (the library's `Config.configSchema` with the app's own members, errors
 * naming the field), the command-line flags that override it, and `loadConfig` that combines both.
 *
 * Each shape is declared once, as a zod schema extending the library's and the extensions' schemas; the types
 * (`AppConfig`, `UserConfig`, ...) are derived from the schemas, so the types and the rules cannot drift apart.
 *
 * @module
 */
import { readFile } from "node:fs/promises"
import { dirname, resolve } from "node:path"
import { parseArgs } from "node:util"
import { Config, Storage } from "@keyway/authorization-server"
import { Grant, SecureUrl } from "@keyway/core"
import { optionsSchema as clientCredentialsSchema } from "@keyway/ext-client-credentials/authorization-server"
import { optionsSchema as deviceAuthorizationSchema } from "@keyway/ext-device-authorization/authorization-server"
import { optionsSchema as dpopSchema } from "@keyway/ext-dpop/authorization-server"
import {
  optionsSchema as identityAssertionGrantSchema,
  issuerOptionsSchema as identityAssertionIssuerSchema,
} from "@keyway/ext-enterprise-managed/authorization-server"
import { tokenExchangeOptionsSchema } from "@keyway/ext-token-exchange/authorization-server"
import { optionsDataSchema as workloadIdentitySchema } from "@keyway/ext-workload-identity/authorization-server"
import { z } from "zod"
import { databaseProblem, isPostgres } from "./internal/database.js"

/** Defaults of the app's own settings (the library's options take the library's defaults, `Config.defaults`). */
export const DEFAULTS = {
  host: "127.0.0.1",
  port: 9000,
  dataDir: "./.keyway-data",
  databaseFile: "keyway.db",
  registration: true,
} as const

// The app's own members; every member shared with the library takes the library's schema (`Config.configSchema`).
const nonEmpty = z.string({ error: "must be a string" }).min(1, "must not be empty")

const port = z
  .number({ error: "must be a number" })
  .int("must be a whole number")
  .min(0, "must be from 0 to 65535")
  .max(65535, "must be from 0 to 65535")

const database = nonEmpty.superRefine((value, ctx) => {
  const problem = databaseProblem(value)
  if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem })
})

const library = Config.configSchema.shape

const anArray = { error: "must be an array" }
const anObject = { error: "must be an object" }

/**
 * The members of a shape as the library's option types declare them (its `Config` does the same): an optional member
 * may be left out, and where it is given it has a value (`host?: string`, which with `exactOptionalPropertyTypes`
 * does not take `undefined`). Only the type changes: validation still takes a member given as `undefined` as left out.
 */
type ExactShape<S> = { [K in keyof S]: S[K] extends z.ZodOptional<infer T> ? z.ZodExactOptional<T> : S[K] }
const exact = <S extends z.core.$ZodLooseShape>(shape: S): ExactShape<S> => shape as unknown as ExactShape<S>

/**
 * A value as a configuration file holds it and the app reads it, never changing it: arrays read-only, and optional
 * members exact at every depth, as the extensions declare their options (zod infers mutable arrays and
 * `T | undefined` members from their schemas).
 */
type FileData<T> = T extends (...args: never) => unknown
  ? T
  : T extends ReadonlyArray<infer E>
    ? ReadonlyArray<FileData<E>>
    : T extends object
      ? { readonly [K in keyof T]: FileData<Exclude<T[K], undefined>> }
      : T
// The schema as the type of the data it accepts and gives (see FileData); its checks are unchanged.
const fileData = <S extends z.ZodType>(schema: S): z.ZodType<FileData<z.output<S>>, FileData<z.input<S>>> =>
  schema as unknown as z.ZodType<FileData<z.output<S>>, FileData<z.input<S>>>

// A clear-text password as long as a password used alone must be (Config.passwordProblem).
const password = nonEmpty.superRefine((value, ctx) => {
  const problem = Config.passwordProblem(value)
  if (problem !== undefined) ctx.addIssue({ code: "custom", message: problem })
})

// The library's user with its password in either form, instead of the hash alone and a subject of its own.
const userSchema = Config.userSchema
  .pick({ username: true, displayName: true })
  .extend(
    exact({
      /** Clear-text password, hashed with scrypt at start; prefer `passwordHash` in files others can read. */
      password: password.optional(),
      passwordHash: Config.userSchema.shape.passwordHash.optional(),
    }),
  )
  .refine((u) => (u.password === undefined) !== (u.passwordHash === undefined), {
    message: "needs exactly one of password and passwordHash",
  })

/**
 * A user who can sign in on the login page: the library's user (`Config.UserOptions`) with its password given either
 * hashed (`passwordHash`, from `UserAuthenticator.hashPassword`, preferred) or in clear (`password`, hashed with scrypt
 * at start); the `sub` claim is the username.
 *
 * @interface
 */
export type UserConfig = Readonly<z.input<typeof userSchema>>

/**
 * A pre-registered client: the library's `Config.ClientOptions`, all of which a JSON file can hold.
 *
 * @interface
 */
export type ClientConfig = Config.ClientOptions

// Enterprise-managed authorization in either role or both (see EnterpriseManagedConfig).
const enterpriseManagedSchema = z
  .strictObject(
    exact({
      /**
       * The server is the enterprise identity provider: the token exchange of its ID tokens for ID-JAGs naming the MCP
       * authorization servers listed, for the users and scopes the rules allow (`identityAssertionIssuer`'s options;
       * needs `openid`).
       *
       * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-identity-assertion-authz-grant#section-4.3 | Identity Assertion Authorization Grant §4.3}
       */
      identityProvider: fileData(identityAssertionIssuerSchema).optional(),
      /**
       * The server is an MCP authorization server that accepts ID-JAGs from the trusted identity providers with the
       * JWT bearer grant (`identityAssertionGrant`'s options a file can hold: no `fetch` or `warn`).
       *
       * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-identity-assertion-authz-grant#section-4.4 | Identity Assertion Authorization Grant §4.4}
       */
      authorizationServer: fileData(identityAssertionGrantSchema.omit({ fetch: true, warn: true })).optional(),
    }),
    anObject,
  )
  .refine((e) => e.identityProvider !== undefined || e.authorizationServer !== undefined, {
    message: "needs identityProvider, authorizationServer or both",
  })

/**
 * MCP enterprise-managed authorization (`@keyway/ext-enterprise-managed`): users sign in once at the enterprise
 * identity provider, whose ID tokens their clients exchange there for identity assertions (ID-JAGs) that MCP
 * authorization servers accept with the JWT bearer grant. Each member present puts the server in that role, with the
 * extension's options.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/stable/enterprise-managed-authorization.mdx | MCP enterprise-managed authorization}
 * @interface
 */
export type EnterpriseManagedConfig = Readonly<z.input<typeof enterpriseManagedSchema>>

// The MCP authorization extensions the app turns on (see ExtensionsConfig).
const extensionsSchema = z.strictObject(
  exact({
    /** The client credentials grant for configured clients whose `grantTypes` include `client_credentials`. */
    clientCredentials: fileData(clientCredentialsSchema).optional(),
    /**
     * Workload identity federation: the JWT bearer grant for workloads whose JWTs come from the trusted `issuers`
     * (the options of `@keyway/ext-workload-identity` a file can hold; decisions go to the log).
     */
    workloadIdentity: fileData(workloadIdentitySchema).optional(),
    /**
     * The device authorization grant (RFC 8628) for configured clients whose `grantTypes` include
     * `urn:ietf:params:oauth:grant-type:device_code`: the device authorization endpoint, the `/device` page and the
     * grant (the options of `@keyway/ext-device-authorization`: `lifetime`, `interval`, `pagePath`, `entryLimit`).
     */
    deviceAuthorization: fileData(deviceAuthorizationSchema).optional(),
    /** DPoP (RFC 9449): proofs at the token endpoint, access tokens bound to the client's key. */
    dpop: fileData(dpopSchema).optional(),
    /** Enterprise-managed authorization (identity assertions, ID-JAG), in either role or both. */
    enterpriseManaged: enterpriseManagedSchema.optional(),
    /**
     * Token exchange (RFC 8693): the MCP servers named in `clients` exchange their users' tokens for tokens for the
     * downstream APIs their rules name (the options of `@keyway/ext-token-exchange`).
     */
    tokenExchange: fileData(tokenExchangeOptionsSchema).optional(),
  }),
  anObject,
)

/**
 * The MCP authorization extensions the app turns on: each member present enables one, with the extension's own
 * options (`{}` for its defaults).
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth | MCP authorization extensions}
 * @interface
 */
export type ExtensionsConfig = Readonly<z.input<typeof extensionsSchema>>

/** An MCP server (protected resource) tokens are issued for: the library's `Config.ResourceOptions`. */
export type ResourceConfig = Config.ResourceOptions

/** Token and session lifetimes in seconds: the library's `Config.TokenLifetimes`. */
export type LifetimesConfig = Config.TokenLifetimes

/**
 * Signing-key rotation, in seconds: the library's `Config.SigningKeyOptions`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5 (JWK Set)}
 */
export type SigningKeysConfig = Config.SigningKeyOptions

/** Background maintenance: the library's `Config.MaintenanceOptions`. */
export type MaintenanceConfig = Config.MaintenanceOptions

// The library's upstream with `subjectFrom` a name only (a file holds no function).
const upstreamSchema = Config.upstreamSchema.extend(
  exact({
    /** `id_token` when `scope` has `openid`, `access_token` otherwise. */
    subjectFrom: Config.subjectSourceNameSchema.optional(),
  }),
)

/**
 * Proxy mode: users sign in at this upstream authorization server (after Keyway's own per-client consent) instead of
 * the local login page. The library's `upstream` option in the forms a JSON file can hold (`subjectFrom` a name, not
 * a function).
 *
 * @see {@link https://modelcontextprotocol.io/specification/2025-11-25/basic/security_best_practices#confused-deputy-problem | MCP 2025-11-25 Security Best Practices: Confused Deputy Problem}
 * @interface
 */
export type UpstreamConfig = Readonly<z.input<typeof upstreamSchema>>

// allowHttpLoopbackIssuer follows from the issuer.
const developmentSchema = Config.developmentSchema.omit({ allowHttpLoopbackIssuer: true })

/**
 * Development relaxations that are not implied by the issuer (the app derives `allowHttpLoopbackIssuer` from it).
 *
 * @interface
 */
export type DevelopmentConfig = Readonly<z.input<typeof developmentSchema>>

const metricsSchema = z.strictObject(
  exact({
    /** Required; 0 picks a free port. Must differ from the public port. */
    port,
    /** Default "127.0.0.1". */
    host: nonEmpty.optional(),
  }),
  { error: "must be an object with port (and host)" },
)

/**
 * Where the metrics listener listens: `GET /metrics` in the Prometheus text format.
 *
 * @interface
 */
export type MetricsConfig = Readonly<z.input<typeof metricsSchema>>

const tracingSchema = z.strictObject(
  exact({
    /** The collector's base URL, e.g. `http://127.0.0.1:4318` (spans go to `<url>/v1/traces`). */
    otlpEndpoint: nonEmpty.refine((v) => /^https?:$/.test(URL.parse(v)?.protocol ?? ""), "must be an http(s) URL"),
    /** The `service.name` resource attribute; default "keyway-authorization-server". */
    serviceName: nonEmpty.optional(),
  }),
  { error: "must be an object with otlpEndpoint" },
)

/**
 * Trace export over OTLP/HTTP (JSON or protobuf, as the collector accepts).
 *
 * @interface
 */
export type TracingConfig = Readonly<z.input<typeof tracingSchema>>

const rateLimitsSchema = Config.rateLimitsDataSchema.extend(
  exact({
    /**
     * Behind a reverse proxy: the header it sets to the client's address (`X-Real-IP`, or `X-Forwarded-For`, whose
     * last entry is taken: the one the proxy appended). Only for a proxy that always writes it, or clients could
     * choose their own address. Without it, the address is the TCP peer's (the proxy's, behind one).
     */
    clientAddressHeader: nonEmpty.regex(/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/, "must be a header name").optional(),
  }),
)

/**
 * Abuse limits as a configuration file holds them: the library's `Config.RateLimitOptions` without the
 * `clientAddress` function, plus `clientAddressHeader`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6585.html#section-4 | RFC 6585 §4 (429 Too Many Requests)}
 * @interface
 */
export type RateLimitsConfig = Readonly<z.input<typeof rateLimitsSchema>>

// The grant types beyond the authorization code and refresh token grants, and the settings under `extensions` that
// serve each (any one of them; with what it needs).
type ExtensionsData = z.output<typeof extensionsSchema>
// A Map, so that a name such as `constructor` is an unknown grant type, not an inherited member.
const grantExtensions: ReadonlyMap<
  string,
  ReadonlyArray<{ readonly field: string; readonly on: (e: ExtensionsData) => boolean; readonly needs: string }>
> = new Map([
  [
    Grant.CLIENT_CREDENTIALS,
    [
      {
        field: "clientCredentials",
        on: (e) => e.clientCredentials !== undefined,
        needs: "{} turns it on with its defaults",
      },
    ],
  ],
  [
    Grant.DEVICE_CODE,
    [
      {
        field: "deviceAuthorization",
        on: (e) => e.deviceAuthorization !== undefined,
        needs: "{} turns it on with its defaults",
      },
    ],
  ],
  [
    Grant.JWT_BEARER,
    [
      {
        field: "workloadIdentity",
        on: (e) => e.workloadIdentity !== undefined,
        needs: "with the issuers whose workload JWTs it trusts",
      },
      {
        field: "enterpriseManaged.authorizationServer",
        on: (e) => e.enterpriseManaged?.authorizationServer !== undefined,
        needs: "with the identity providers whose ID-JAGs it trusts",
      },
    ],
  ],
  [
    Grant.TOKEN_EXCHANGE,
    [
      {
        field: "enterpriseManaged.identityProvider",
        on: (e) => e.enterpriseManaged?.identityProvider !== undefined,
        needs: "with the MCP authorization servers it issues ID-JAGs for",
      },
      {
        field: "tokenExchange",
        on: (e) => e.tokenExchange !== undefined,
        needs: "with the clients that may exchange tokens and their rules",
      },
    ],
  ],
])

/** Why a client may not list grant type `g` with these extensions, or undefined when it may. */
const grantProblem = (g: string, extensions: ExtensionsData | undefined): string | undefined => {
  if (g === Grant.AUTHORIZATION_CODE || g === Grant.REFRESH_TOKEN) return undefined
  const servers = grantExtensions.get(g)
  if (servers === undefined) {
    const known = [...grantExtensions].map(
      ([grant, fields]) => `${grant} with ${fields.map(({ field }) => `extensions.${field}`).join(" or ")}`,
    )
    return `${g} is not a grant type this server serves (${[Grant.AUTHORIZATION_CODE, Grant.REFRESH_TOKEN, ...known].join(", ")})`
  }
  if (servers.some(({ on }) => on(extensions ?? {}))) return undefined
  const needs =
    servers.length === 1
      ? servers[0]?.needs
      : servers.map(({ field, needs }) => `extensions.${field}: ${needs}`).join("; ")
  return `${g} needs ${servers.map(({ field }) => `extensions.${field}`).join(" or ")}, which is not configured (${needs})`
}

/**
 * The zod schema of {@link AppConfig}: the library's options a file can hold (the library's schemas, same names,
 * types, defaults and rules) and the app's own members. Unknown fields are refused so that typos do not go unnoticed.
 */
export const appConfigSchema = z
  .strictObject(
    exact({
      /** Default `http://<host>:<port>` (http is accepted only on a loopback host, and logged loudly). */
      issuer: library.issuer.optional(),
      previousIssuer: library.previousIssuer,
      /** Default "127.0.0.1". */
      host: nonEmpty.optional(),
      /** Default 9000; 0 picks a free port. */
      port: port.optional(),
      /** Default "./.keyway-data"; the SQLite database is `<dataDir>/keyway.db` (directory created with mode 0700). */
      dataDir: nonEmpty.optional(),
      /**
       * Explicit SQLite file path, or a PostgreSQL connection string (`postgres://…` or `postgresql://…`) for several
       * instances sharing one database; either overrides `dataDir`.
       */
      database: database.optional(),
      /** The PostgreSQL schema holding Keyway's tables (created when absent); `public` by default. */
      databaseSchema: Storage.postgresSchemaName.optional(),
      /** Required, except in proxy mode (`upstream`), where users sign in upstream. */
      users: fileData(z.array(userSchema, anArray)).optional(),
      clients: library.clients,
      resources: library.resources,
      defaultResource: library.defaultResource,
      /** Dynamic client registration (RFC 7591); on by default in the app (off by default in the library). */
      registration: library.registration,
      clientIdMetadataDocuments: z.strictObject(Config.clientIdMetadataDocumentsSchema.shape).optional(),
      lifetimes: library.lifetimes,
      rememberConsentFor: library.rememberConsentFor,
      openid: library.openid,
      signingKeys: library.signingKeys,
      maintenance: library.maintenance,
      /**
       * Abuse limits: the library's `rateLimits` in the forms a JSON file can hold, `false` to turn them all off;
       * instead of the `clientAddress` function, `clientAddressHeader` names the header a reverse proxy in front of
       * the app writes the client's address in.
       */
      rateLimits: Config.switchable(rateLimitsSchema).optional(),
      /**
       * The secret login sessions are signed with (see the library's `sessionSecret`). `loadConfig` also takes it from
       * the environment variable `KEYWAY_SESSION_SECRET`.
       */
      sessionSecret: library.sessionSecret,
      upstream: upstreamSchema.optional(),
      development: developmentSchema.optional(),
      /** MCP authorization extensions (see {@link ExtensionsConfig}); none by default. */
      extensions: extensionsSchema.optional(),
      /** Prometheus metrics on a listener of their own; off by default, and never on the public port. */
      metrics: metricsSchema.optional(),
      /**
       * A file to append one JSON line per security event to (created with mode 0600); relative to the configuration
       * file's directory. Off by default.
       */
      auditLog: nonEmpty.optional(),
      /** OpenTelemetry traces of every endpoint, exported over OTLP/HTTP; off by default (and then free). */
      tracing: tracingSchema.optional(),
    }),
    { error: "must be a JSON object" },
  )
  .superRefine((config, ctx) => {
    for (const [i, client] of (config.clients ?? []).entries()) {
      for (const g of client.grantTypes ?? []) {
        const problem = grantProblem(g, config.extensions)
        if (problem !== undefined)
          ctx.addIssue({ code: "custom", path: ["clients", i, "grantTypes"], message: problem })
      }
    }
    if (config.databaseSchema !== undefined && !isPostgres(config.database)) {
      ctx.addIssue({
        code: "custom",
        path: ["databaseSchema"],
        message: "needs a PostgreSQL database (postgres://… in database)",
      })
    }
    if (config.metrics !== undefined && config.metrics.port !== 0 && config.metrics.port === config.port) {
      ctx.addIssue({ code: "custom", path: ["metrics", "port"], message: "must differ from port (the public port)" })
    }
    if (config.development?.allowHttpLoopbackUpstream === true) {
      if (config.upstream === undefined || SecureUrl.transportOf(config.upstream.issuer) !== "http-loopback") {
        ctx.addIssue({
          code: "custom",
          path: ["development", "allowHttpLoopbackUpstream"],
          message: "is only for an http upstream.issuer on a loopback host (127.0.0.1, [::1] or localhost)",
        })
      }
    }
  })

/**
 * The app's configuration; also the shape of the JSON configuration file. The library's options that a file can hold
 * (same names, types, defaults and rules, see `Config.ConfigOptions`), plus what is the app's own: where to listen,
 * where the data lives, users with clear-text passwords, and `registration` on by default.
 *
 * @interface
 */
export type AppConfig = Readonly<z.input<typeof appConfigSchema>>

/** The configuration (file or object) is invalid; the message names the field of each problem. */
export class ConfigFileError extends Error {
  override readonly name = "ConfigFileError"
}

/** The command line cannot be used; the message says why (exit code 2). */
export class UsageError extends Error {
  override readonly name = "UsageError"
}

/**
 * Validates a configuration value. `source` names where it came from (the file) in the error message.
 *
 * @throws ConfigFileError listing every problem, one per line, each naming its field.
 */
export const parseConfig = (value: unknown, source: string): AppConfig => {
  const parsed = appConfigSchema.safeParse(value)
  const issues: Array<z.core.$ZodIssue> = parsed.success ? [] : [...parsed.error.issues]
  // users may be left out only in proxy mode; checked here so that it is reported along with every other problem.
  const fields = typeof value === "object" && value !== null && !Array.isArray(value) ? (value as object) : undefined
  if (fields !== undefined && !("users" in fields) && !("upstream" in fields)) {
    issues.push({ code: "custom", path: ["users"], message: "is required", input: undefined })
  }
  if (issues.length > 0) {
    // In the order of the fields of the schema, problems of the whole object (unknown fields) last.
    const order = Object.keys(appConfigSchema.shape)
    const rank = (issue: z.core.$ZodIssue) => {
      const i = order.indexOf(String(issue.path[0]))
      return i < 0 ? order.length : i
    }
    const problems = issues.sort((a, b) => rank(a) - rank(b)).map((issue) => Config.describeIssue(issue, value))
    throw new ConfigFileError(`invalid configuration in ${source}:\n  ${problems.join("\n  ")}`)
  }
  if (!parsed.success) throw new ConfigFileError(`invalid configuration in ${source}`)
  return parsed.data
}

/**
 * Reads and validates a JSON configuration file; relative `dataDir` and (SQLite) `database` are taken from its
 * directory.
 */
export const readConfigFile = async (file: string): Promise<AppConfig> => {
  let text: string
  try {
    text = await readFile(file, "utf8")
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code
    throw new ConfigFileError(
      code === "ENOENT" ? `configuration file ${file} does not exist` : `cannot read ${file}: ${(e as Error).message}`,
    )
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    throw new ConfigFileError(`configuration file ${file} is not valid JSON: ${(e as Error).message}`)
  }
  const config = parseConfig(json, file)
  const base = dirname(resolve(file))
  return {
    ...config,
    ...(config.dataDir === undefined ? {} : { dataDir: resolve(base, config.dataDir) }),
    ...(config.database === undefined || isPostgres(config.database)
      ? {}
      : { database: resolve(base, config.database) }),
    ...(config.auditLog === undefined ? {} : { auditLog: resolve(base, config.auditLog) }),
  }
}

/** The environment variable holding the session secret, so that it need not sit in the file. */
export const SESSION_SECRET_VARIABLE = "KEYWAY_SESSION_SECRET"

/** The usage text of the CLI. */
export const USAGE = `usage: keyway-authorization-server --config <file.json> [options]
       keyway-authorization-server admin --config <file.json> <command> [--json]

options:
  --config <file>      JSON configuration file (see keyway.example.json)
  --port <n>           port to listen on (default ${DEFAULTS.port}; 0 picks a free port)
  --host <address>     address to listen on (default ${DEFAULTS.host})
  --issuer <url>       issuer URL (default http://<host>:<port>; http only on a loopback host)
  --data-dir <dir>     data directory; the SQLite database is <dir>/${DEFAULTS.databaseFile} (default ${DEFAULTS.dataDir})
  --database <db>      SQLite database file, or a PostgreSQL connection string
                       (postgres://user@host:port/database; overrides --data-dir)
  -h, --help           show this help

environment:
  ${SESSION_SECRET_VARIABLE}   sessionSecret (at least 32 random characters); overrides the file
  PGPASSWORD              the PostgreSQL password, so that it need not appear in the connection string

admin commands (operator actions on the database, seen at once by running servers; admin --help for more):
  clients list | show | add | update | remove | rotate-secret
  grants list | revoke
  keys list | rotate | retire | revoke
  users list | add | passwd | remove

Flags and the environment override the file. Relative paths in the file are taken from the file's directory.`

/** What the command line asks for. */
export type CommandLine =
  | { readonly help: true }
  | {
      readonly help: false
      readonly config: string
      readonly overrides: Pick<AppConfig, "port" | "host" | "issuer" | "dataDir" | "database">
    }

const parsePort = (raw: string): number => {
  if (!/^\d+$/.test(raw) || Number(raw) > 65535) {
    throw new UsageError(`--port must be a whole number from 0 to 65535, got "${raw}"`)
  }
  return Number(raw)
}

const parseIssuer = (raw: string): string => {
  const url = URL.parse(raw)
  if (url === null || (url.protocol !== "https:" && url.protocol !== "http:")) {
    throw new UsageError(`--issuer must be an http(s) URL, got "${raw}"`)
  }
  return raw
}

const parseDatabase = (raw: string): string => {
  const problem = databaseProblem(raw)
  // The value is not repeated: a connection string may hold a password.
  if (problem !== undefined) throw new UsageError(`--database ${problem}`)
  return isPostgres(raw) ? raw : resolve(raw)
}

/** Parses the flags (after the program name). */
export const parseCommandLine = (argv: ReadonlyArray<string>): CommandLine => {
  let values: Record<string, string | boolean | undefined>
  try {
    values = parseArgs({
      args: [...argv],
      options: {
        config: { type: "string" },
        port: { type: "string" },
        host: { type: "string" },
        issuer: { type: "string" },
        "data-dir": { type: "string" },
        database: { type: "string" },
        help: { type: "boolean", short: "h" },
      },
      strict: true,
      allowPositionals: false,
    }).values
  } catch (e) {
    throw new UsageError((e as Error).message)
  }
  if (values.help === true) return { help: true }
  const str = (name: string): string | undefined => {
    const v = values[name]
    if (v === "") throw new UsageError(`--${name} must not be empty`)
    return typeof v === "string" ? v : undefined
  }
  const config = str("config")
  if (config === undefined) throw new UsageError("--config <file.json> is required")
  const port = str("port")
  const host = str("host")
  const issuer = str("issuer")
  const dataDir = str("data-dir")
  const database = str("database")
  return {
    help: false,
    config,
    overrides: {
      ...(port === undefined ? {} : { port: parsePort(port) }),
      ...(host === undefined ? {} : { host }),
      ...(issuer === undefined ? {} : { issuer: parseIssuer(issuer) }),
      ...(dataDir === undefined ? {} : { dataDir: resolve(dataDir) }),
      ...(database === undefined ? {} : { database: parseDatabase(database) }),
    },
  }
}

/**
 * The configuration of a command line: the `--config` file with the flags (`--port`, `--host`, `--issuer`,
 * `--data-dir`, `--database`) and the environment (`KEYWAY_SESSION_SECRET`) overriding it. `--data-dir` also drops a
 * `database` set in the file; a flag choosing SQLite drops the file's `databaseSchema`.
 *
 * @throws UsageError for a bad command line (including `--help`, which has no configuration).
 * @throws ConfigFileError for a missing or invalid file, or an unusable `KEYWAY_SESSION_SECRET`.
 */
export const loadConfig = async (
  argv: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<AppConfig> => {
  const line = parseCommandLine(argv)
  if (line.help) throw new UsageError(USAGE)
  const secret = env[SESSION_SECRET_VARIABLE]
  // Checked before the file is read, by the library's rule for sessionSecret: an empty or short value is a mistake
  // (an unset shell variable), not "none". The value is not repeated, only its length.
  const secretProblem = secret === undefined ? undefined : library.sessionSecret.safeParse(secret).error?.issues[0]
  if (secret !== undefined && secretProblem !== undefined) {
    throw new ConfigFileError(
      `invalid configuration: ${SESSION_SECRET_VARIABLE} ${secretProblem.message} (got ${secret.length})`,
    )
  }
  const file = await readConfigFile(line.config)
  const { database: _fileDatabase, databaseSchema: _fileSchema, ...withoutDatabase } = file
  const { dataDir, database } = line.overrides
  let base: AppConfig = file
  if (dataDir !== undefined || database !== undefined) {
    // Storage chosen on the command line: a data directory wins over a database path from the file, and a schema
    // only means something on PostgreSQL.
    base = {
      ...withoutDatabase,
      ...(database === undefined ? {} : { database }),
      ...(file.databaseSchema !== undefined && isPostgres(database) ? { databaseSchema: file.databaseSchema } : {}),
    }
  }
  return {
    ...base,
    ...line.overrides,
    ...(secret === undefined ? {} : { sessionSecret: secret }),
  }
}
