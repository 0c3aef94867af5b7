/**
 * The app's configuration: the JSON file's shape (validated with zod, errors naming the field), the command-line
 * flags that override it, and `loadConfig` that combines both.
 *
 * @module
 */
import { readFile } from "node:fs/promises"
import { dirname, resolve } from "node:path"
import { parseArgs } from "node:util"
import { z } from "zod"

/** A user who can sign in on the login page. `passwordHash` (from `UserAuthenticator.hashPassword`) is preferred. */
export interface UserConfig {
  readonly username: string
  /** Clear-text password, hashed with scrypt at start; prefer `passwordHash` in files others can read. */
  readonly password?: string
  readonly passwordHash?: string
  readonly displayName?: string
}

/** A pre-registered client. */
export interface ClientConfig {
  readonly clientId: string
  readonly clientName?: string
  readonly clientSecret?: string
  readonly redirectUris: ReadonlyArray<string>
  readonly tokenEndpointAuthMethod?: "none" | "client_secret_basic" | "client_secret_post" | "private_key_jwt"
  /** The only scopes this client may ask for (space-separated); without it, any scope of the resource. */
  readonly scope?: string
}

/** An MCP server (protected resource) tokens are issued for, with its scopes and their descriptions. */
export interface ResourceConfig {
  readonly uri: string
  readonly name?: string
  readonly scopes: Readonly<Record<string, string>>
}

/** Token and session lifetimes in seconds. */
export interface LifetimesConfig {
  readonly accessToken?: number
  readonly refreshToken?: number
  readonly authorizationCode?: number
  readonly session?: number
}

/** The app's configuration; also the shape of the JSON configuration file. */
export interface AppConfig {
  /** Default `http://<host>:<port>` (http is accepted only on a loopback host, and logged loudly). */
  readonly issuer?: string
  /** Default "127.0.0.1". */
  readonly host?: string
  /** Default 9000; 0 picks a free port. */
  readonly port?: number
  /** Default "./.keyway-data"; the SQLite database is `<dataDir>/keyway.db` (directory created with mode 0700). */
  readonly dataDir?: string
  /** Explicit SQLite file path (overrides `dataDir`). */
  readonly database?: string
  readonly users: ReadonlyArray<UserConfig>
  readonly clients?: ReadonlyArray<ClientConfig>
  readonly resources: ReadonlyArray<ResourceConfig>
  /** Used when an authorization request has no `resource` (older clients). */
  readonly defaultResource?: string
  /** Dynamic client registration (RFC 7591); default true. */
  readonly registration?: boolean
  readonly clientIdMetadataDocuments?: { readonly enabled?: boolean; readonly allowHttpLoopbackClientIds?: boolean }
  readonly lifetimes?: LifetimesConfig
}

/** Defaults of the optional settings. */
export const DEFAULTS = { host: "127.0.0.1", port: 9000, dataDir: "./.keyway-data", databaseFile: "keyway.db" } as const

const nonEmpty = z.string({ error: "must be a string" }).min(1, "must not be empty")
const aString = z.string({ error: "must be a string" })

const port = z
  .number({ error: "must be a number" })
  .int("must be a whole number")
  .min(0, "must be from 0 to 65535")
  .max(65535, "must be from 0 to 65535")

const seconds = z.number({ error: "must be a number" }).int("must be a whole number").positive("must be positive")

const userSchema = z
  .strictObject({
    username: nonEmpty,
    password: nonEmpty.optional(),
    passwordHash: nonEmpty.optional(),
    displayName: aString.optional(),
  })
  .refine((u) => (u.password === undefined) !== (u.passwordHash === undefined), {
    message: "needs exactly one of password and passwordHash",
  })

const clientSchema = z.strictObject({
  clientId: nonEmpty,
  clientName: aString.optional(),
  clientSecret: nonEmpty.optional(),
  redirectUris: z.array(nonEmpty, { error: "must be an array of URLs" }),
  tokenEndpointAuthMethod: z
    .enum(["none", "client_secret_basic", "client_secret_post", "private_key_jwt"], {
      error: "must be one of none, client_secret_basic, client_secret_post, private_key_jwt",
    })
    .optional(),
  scope: aString.optional(),
})

const resourceSchema = z.strictObject({
  uri: nonEmpty,
  name: aString.optional(),
  scopes: z.record(z.string(), aString, {
    error: "must be an object mapping each scope to its description",
  }),
})

/** The zod schema of {@link AppConfig}: unknown fields are refused so that typos do not go unnoticed. */
export const appConfigSchema = z.strictObject(
  {
    issuer: nonEmpty.optional(),
    host: nonEmpty.optional(),
    port: port.optional(),
    dataDir: nonEmpty.optional(),
    database: nonEmpty.optional(),
    users: z.array(userSchema, { error: "must be an array" }),
    clients: z.array(clientSchema, { error: "must be an array" }).optional(),
    resources: z.array(resourceSchema, { error: "must be an array" }).min(1, "must name at least one MCP server"),
    defaultResource: nonEmpty.optional(),
    registration: z.boolean({ error: "must be true or false" }).optional(),
    clientIdMetadataDocuments: z
      .strictObject({
        enabled: z.boolean({ error: "must be true or false" }).optional(),
        allowHttpLoopbackClientIds: z.boolean({ error: "must be true or false" }).optional(),
      })
      .optional(),
    lifetimes: z
      .strictObject({
        accessToken: seconds.optional(),
        refreshToken: seconds.optional(),
        authorizationCode: seconds.max(60, "must be at most 60").optional(),
        session: seconds.optional(),
      })
      .optional(),
  },
  { error: "must be a JSON object" },
)

/** The configuration (file or object) is invalid; the message names the field of each problem. */
export class ConfigFileError extends Error {
  override readonly name = "ConfigFileError"
}

/** The command line cannot be used; the message says why (exit code 2). */
export class UsageError extends Error {
  override readonly name = "UsageError"
}

const fieldPath = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>((out, key) => {
    if (typeof key === "number") return `${out}[${key}]`
    const name = String(key)
    // Scope names such as notes:read are not identifiers: bracket them.
    if (!/^[A-Za-z_$][\w$]*$/.test(name)) return `${out}[${JSON.stringify(name)}]`
    return out === "" ? name : `${out}.${name}`
  }, "")

const valueAt = (root: unknown, path: ReadonlyArray<PropertyKey>): unknown =>
  path.reduce<unknown>(
    (value, key) =>
      typeof value === "object" && value !== null ? (value as Record<PropertyKey, unknown>)[key] : undefined,
    root,
  )

const describeIssue = (issue: z.core.$ZodIssue, root: unknown): string => {
  if (issue.code === "unrecognized_keys") {
    const where = fieldPath(issue.path)
    const keys = issue.keys.map((k) => `"${k}"`).join(", ")
    return `${where === "" ? "" : `${where}: `}unknown field${issue.keys.length > 1 ? "s" : ""} ${keys}`
  }
  if (issue.code === "invalid_type" && valueAt(root, issue.path) === undefined)
    return `${fieldPath(issue.path)}: is required`
  const where = fieldPath(issue.path)
  return where === "" ? issue.message : `${where}: ${issue.message}`
}

/**
 * Validates a configuration value. `source` names where it came from (the file) in the error message.
 *
 * @throws ConfigFileError listing every problem, one per line, each naming its field.
 */
export const parseConfig = (value: unknown, source: string): AppConfig => {
  const parsed = appConfigSchema.safeParse(value)
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => describeIssue(issue, value))
    throw new ConfigFileError(`invalid configuration in ${source}:\n  ${problems.join("\n  ")}`)
  }
  // zod leaves absent optional fields absent, which is what AppConfig's exact optional properties mean.
  return parsed.data as AppConfig
}

/** Reads and validates a JSON configuration file; relative `dataDir` and `database` are taken from its directory. */
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
    ...(config.database === undefined ? {} : { database: resolve(base, config.database) }),
  }
}

/** The usage text of the CLI. */
export const USAGE = `usage: keyway-authorization-server --config <file.json> [options]

options:
  --config <file>      JSON configuration file (see keyway.example.json)
  --port <n>           port to listen on (default ${DEFAULTS.port}; 0 picks a free port)
  --host <address>     address to listen on (default ${DEFAULTS.host})
  --issuer <url>       issuer URL (default http://<host>:<port>; http only on a loopback host)
  --data-dir <dir>     data directory; the SQLite database is <dir>/${DEFAULTS.databaseFile} (default ${DEFAULTS.dataDir})
  --database <file>    SQLite database file (overrides --data-dir)
  -h, --help           show this help

Flags override the file. Relative paths in the file are taken from the file's directory.`

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
      ...(database === undefined ? {} : { database: resolve(database) }),
    },
  }
}

/**
 * The configuration of a command line: the `--config` file with the flags (`--port`, `--host`, `--issuer`,
 * `--data-dir`, `--database`) overriding it. `--data-dir` also drops a `database` set in the file.
 *
 * @throws UsageError for a bad command line (including `--help`, which has no configuration).
 * @throws ConfigFileError for a missing or invalid file.
 */
export const loadConfig = async (argv: ReadonlyArray<string>): Promise<AppConfig> => {
  const line = parseCommandLine(argv)
  if (line.help) throw new UsageError(USAGE)
  const file = await readConfigFile(line.config)
  const { database: _fileDatabase, ...withoutDatabase } = file
  // A data directory given on the command line wins over a database path from the file.
  const base = line.overrides.dataDir !== undefined && line.overrides.database === undefined ? withoutDatabase : file
  return { ...base, ...line.overrides }
}
