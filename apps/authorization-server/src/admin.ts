/**
 * `keyway-authorization-server admin <command>`: operator actions on the database of a configuration (SQLite or
 * PostgreSQL), safe while servers run on it: they read the database on every request, so a change is seen at once.
 * Listings print aligned columns, or JSON with `--json`. Exit codes as the server's: 0 done, 1 failed (the database),
 * 2 bad input (the message names the field or flag).
 *
 * @module
 */

import { resolve } from "node:path"
import { Administration, Config, Storage, UserAuthenticator } from "@keyway/authorization-server"
import { Clock, Effect, type Layer } from "effect"
import { openAuditLog } from "./audit.js"
import { type AppConfig, loadConfig, UsageError } from "./config.js"
import type { AuditEvent } from "./logging.js"
import { storageOf } from "./server.js"
import { editUsers, readPassword } from "./users.js"

/** The usage text of `admin`. */
export const ADMIN_USAGE = `usage: keyway-authorization-server admin --config <file.json> [--data-dir <dir> | --database <db>] <command> [--json]

commands:
  clients list                            every stored client
  clients show <client-id>
  clients add --redirect-uri <uri> [--redirect-uri <uri> ...] [--name <name>]
              [--auth-method none|client_secret_basic|client_secret_post] [--scope <scope>] [--client-id <id>]
                                          prints a generated secret once (stored only as a hash)
  clients update <client-id> [--name <name>] [--redirect-uri <uri> ...] [--scope <scope>]
  clients remove <client-id>              removes the client and revokes its grants
  clients rotate-secret <client-id>       prints a new secret once; the old one stops working
  grants list [--user <subject>] [--client <client-id>]
  grants revoke <grant-id> | grants revoke [--user <subject>] [--client <client-id>]
                                          revokes refresh tokens and records the access tokens as revoked
  keys list
  keys rotate                             a new key, published now, signing after signingKeys.publishAhead
  keys retire <kid>                       a key that no longer signs leaves the JWK Set once its tokens expired
  keys revoke <kid>                       a compromised key leaves the JWK Set at once (a new one signs if needed)
  users list                              the configuration file's users
  users add <username> [--display-name <name>]
                                          asks for the password (without echo; from standard input when it is
                                          not a terminal) and stores its scrypt hash in the configuration file
  users passwd <username>                 a new password, the same way
  users remove <username>                 removes the user and revokes their grants

--json prints JSON instead of columns. Clients from the configuration file are changed in the file.
IDs may begin with -; one that begins with -- goes after --, as in: keys retire -- <kid>.`

/** What an admin command printed and how it ends. */
export interface AdminResult {
  readonly code: 0 | 1 | 2
  readonly stdout: string
  readonly stderr: string
}

/** A failure that ends the command with exit code 2 (bad input) and this message. */
class InputError extends Error {
  override readonly name = "InputError"
}

type Stores = Storage.Stores

const FLAGS = {
  config: { type: "string" },
  "data-dir": { type: "string" },
  database: { type: "string" },
  json: { type: "boolean" },
  "redirect-uri": { type: "string", multiple: true },
  name: { type: "string" },
  "auth-method": { type: "string" },
  scope: { type: "string" },
  "client-id": { type: "string" },
  user: { type: "string" },
  client: { type: "string" },
  "display-name": { type: "string" },
  help: { type: "boolean", short: "h" },
} as const

/** The values of the flags given, by flag name. */
export type Values = {
  readonly [K in keyof typeof FLAGS]?: (typeof FLAGS)[K] extends { multiple: true }
    ? Array<string>
    : (typeof FLAGS)[K]["type"] extends "boolean"
      ? boolean
      : string
}

/** What an `admin` command line says: the flags' values and the other words (the command and its argument). */
export interface AdminArguments {
  readonly values: Values
  readonly positionals: ReadonlyArray<string>
}

/**
 * Parses `admin`'s arguments. A flag's value is the argument after it whatever it begins with (or the text after
 * `--flag=`), and an argument that begins with a single `-` is a word of the command, not a flag (only `-h` is):
 * client IDs, key IDs and grant IDs are base64url, so one in 64 begins with `-`. `--` ends the flags, for an argument
 * that begins with `--`.
 *
 * @throws UsageError for an unknown flag, a flag without its value, or a value given to a switch.
 */
export const parseAdminArgs = (argv: ReadonlyArray<string>): AdminArguments => {
  const values: Record<string, string | boolean | Array<string>> = {}
  const positionals: Array<string> = []
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string
    if (arg === "--") {
      positionals.push(...argv.slice(i + 1))
      break
    }
    if (arg === "-h") {
      values.help = true
      continue
    }
    if (!arg.startsWith("--")) {
      positionals.push(arg)
      continue
    }
    const equals = arg.indexOf("=")
    const name = equals < 0 ? arg.slice(2) : arg.slice(2, equals)
    if (!Object.hasOwn(FLAGS, name)) {
      throw new UsageError(`unknown option --${name} (an argument that begins with -- goes after "--")`)
    }
    const flag: { readonly type: "string" | "boolean"; readonly multiple?: boolean } = FLAGS[name as keyof typeof FLAGS]
    if (flag.type === "boolean") {
      if (equals >= 0) throw new UsageError(`--${name} takes no value`)
      values[name] = true
      continue
    }
    const value = equals >= 0 ? arg.slice(equals + 1) : argv[++i]
    if (value === undefined) throw new UsageError(`--${name} needs a value`)
    if (flag.multiple === true) {
      const previous = values[name]
      values[name] = [...(Array.isArray(previous) ? previous : []), value]
    } else {
      values[name] = value
    }
  }
  return { values: values as Values, positionals }
}

/** Every flag a command accepts besides `--config`, `--data-dir`, `--database` and `--json`. */
const ACCEPTS: Record<string, ReadonlyArray<keyof typeof FLAGS>> = {
  "clients add": ["redirect-uri", "name", "auth-method", "scope", "client-id"],
  "clients update": ["redirect-uri", "name", "scope"],
  "grants list": ["user", "client"],
  "grants revoke": ["user", "client"],
  "users add": ["display-name"],
}
/** How many positional arguments (after the two words of the command) each command takes. */
const ARGUMENTS: Record<string, string | undefined> = {
  "clients list": undefined,
  "clients show": "client-id",
  "clients add": undefined,
  "clients update": "client-id",
  "clients remove": "client-id",
  "clients rotate-secret": "client-id",
  "grants list": undefined,
  "grants revoke": "grant-id?",
  "keys list": undefined,
  "keys rotate": undefined,
  "keys retire": "kid",
  "keys revoke": "kid",
  "users list": undefined,
  "users add": "username",
  "users passwd": "username",
  "users remove": "username",
}

const iso = (seconds: number | undefined): string =>
  seconds === undefined ? "-" : new Date(seconds * 1000).toISOString().replace(/\.000Z$/, "Z")

/** Aligned columns with a header row. */
const table = (header: ReadonlyArray<string>, rows: ReadonlyArray<ReadonlyArray<string>>): string => {
  if (rows.length === 0) return "(none)\n"
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? "").length)))
  const line = (cells: ReadonlyArray<string>) =>
    cells
      .map((c, i) => (i === cells.length - 1 ? c : c.padEnd(widths[i] ?? 0)))
      .join("  ")
      .trimEnd()
  return `${[line(header), ...rows.map(line)].join("\n")}\n`
}

/** A client as printed: never a hash; the fields extensions declare beside the others, as the client registered them. */
const clientView = (c: Storage.Client) => {
  const { client_secret_hash: _secret, registration_access_token_hash: _token, extension_metadata, ...metadata } = c
  return { ...metadata, ...extension_metadata, has_secret: c.client_secret_hash !== undefined }
}

const keyView = (k: Storage.SigningKey, now: number, signing: string | undefined) => ({
  kid: k.kid,
  alg: k.alg,
  status: k.status,
  state:
    k.kid === signing
      ? "signing"
      : k.retires_at !== undefined && k.retires_at <= now
        ? "unpublished"
        : k.status === "active" && k.activates_at > now
          ? "waiting"
          : "published",
  created_at: k.created_at,
  activates_at: k.activates_at,
  ...(k.retires_at === undefined ? {} : { retires_at: k.retires_at }),
})

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`

// Effect's Clock, as everywhere time is read.
const nowSeconds = Effect.map(Clock.currentTimeMillis, (millis) => Math.floor(millis / 1000))

/** The access-token lifetime of a configuration, in seconds. */
const accessTokenTtl = (config: AppConfig): number =>
  config.lifetimes?.accessToken ?? Config.defaults.lifetimes.accessToken

/** The library's rotation policy of a configuration (what `keys` commands need). */
const policyOf = (config: AppConfig) => ({
  ...Config.defaults.signingKeys,
  ...config.signingKeys,
  accessTokenTtl: accessTokenTtl(config),
  algorithm: "ES256" as const,
})

const storageLayer = async (config: AppConfig): Promise<Layer.Layer<Stores, Storage.StorageError>> => {
  const { storage } = await storageOf(config)
  if (storage.type === "postgres") {
    return Storage.layerPostgres({
      connectionString: storage.connectionString,
      max: 2,
      ...(storage.schema === undefined ? {} : { schema: storage.schema }),
    })
  }
  if (storage.type === "sqlite") return Storage.layerSqlite({ path: storage.path })
  throw new InputError("the configuration names no database")
}

type Failure =
  | Storage.StorageError
  | Storage.ClientNotFound
  | Storage.KeyNotFound
  | Administration.AdminInputError
  | InputError

/** Failures that mean the input was wrong (naming nothing, or unusable) become an {@link InputError} (exit code 2). */
const asInput = <A, R>(program: Effect.Effect<A, Failure, R>) =>
  Effect.mapError(program, (e): InputError | Storage.StorageError => {
    if (e instanceof InputError || e._tag === "StorageError") return e
    if (e._tag === "ClientNotFound") return new InputError(`no client ${e.client_id}`)
    if (e._tag === "KeyNotFound") return new InputError(`no signing key ${e.kid}`)
    return new InputError(`${FIELD_FLAGS[e.field] ?? e.field}: ${e.message}`)
  })

// How a library field is named on the command line.
const FIELD_FLAGS: Record<string, string> = {
  redirect_uris: "--redirect-uri",
  token_endpoint_auth_method: "--auth-method",
  client_id: "client-id",
  kid: "kid",
}

const AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"] as const

const secretLine = (secret: string | undefined) =>
  secret === undefined ? "" : `client_secret  ${secret}\n(the secret is shown only now; it is stored as a hash)\n`

/** Runs one command with the stores open; what it prints. */
const execute = (
  command: string,
  argument: string | undefined,
  values: Values,
  config: AppConfig,
  record: (event: AuditEvent) => void,
): Effect.Effect<string, InputError | Storage.StorageError, Stores> =>
  Effect.gen(function* () {
    const asJson = values.json === true
    const clients = yield* Storage.ClientStore
    const grants = yield* Storage.GrantStore
    const keys = yield* Storage.KeyStore
    const id = argument ?? ""
    switch (command) {
      case "clients list": {
        const now = yield* nowSeconds
        const all = (yield* clients.list()).filter(
          (c) => c.expires_at === undefined || c.origin !== "metadata-document" || c.expires_at > now,
        )
        if (asJson) return json(all.map(clientView))
        return table(
          ["CLIENT_ID", "ORIGIN", "AUTH", "NAME", "REDIRECT_URIS"],
          all.map((c) => [
            c.client_id,
            c.origin,
            c.token_endpoint_auth_method,
            c.client_name ?? "-",
            c.redirect_uris.join(" "),
          ]),
        )
      }
      case "clients show": {
        const client = clientView(yield* asInput(clients.get(id, yield* nowSeconds)))
        if (asJson) return json(client)
        return Object.entries(client)
          .map(([k, v]) => `${k.padEnd(27)}${Array.isArray(v) ? v.join(" ") : String(v)}\n`)
          .join("")
      }
      case "clients add": {
        const method = values["auth-method"]
        if (method !== undefined && !(AUTH_METHODS as ReadonlyArray<string>).includes(method)) {
          return yield* Effect.fail(new InputError(`--auth-method: must be one of ${AUTH_METHODS.join(", ")}`))
        }
        const added = yield* asInput(
          Administration.addClient({
            redirectUris: values["redirect-uri"] ?? [],
            ...(values["client-id"] === undefined ? {} : { clientId: values["client-id"] }),
            ...(values.name === undefined ? {} : { clientName: values.name }),
            ...(method === undefined ? {} : { tokenEndpointAuthMethod: method as Administration.AdminAuthMethod }),
            ...(values.scope === undefined ? {} : { scope: values.scope }),
          }),
        )
        record({
          event: "client_registered",
          client_id: added.client.client_id,
          client_name: added.client.client_name,
          token_endpoint_auth_method: added.client.token_endpoint_auth_method,
          redirect_uris: added.client.redirect_uris,
        })
        if (asJson) {
          return json({
            ...clientView(added.client),
            ...(added.secret === undefined ? {} : { client_secret: added.secret }),
          })
        }
        return `client_id      ${added.client.client_id}\n${secretLine(added.secret)}`
      }
      case "clients update": {
        const updated = yield* asInput(
          Administration.updateClient(id, {
            ...(values["redirect-uri"] === undefined ? {} : { redirectUris: values["redirect-uri"] }),
            ...(values.name === undefined ? {} : { clientName: values.name }),
            ...(values.scope === undefined ? {} : { scope: values.scope }),
          }),
        )
        record({ event: "client_updated", client_id: updated.client_id, redirect_uris: updated.redirect_uris })
        return asJson ? json(clientView(updated)) : `updated client ${updated.client_id}\n`
      }
      case "clients remove": {
        const revoked = yield* asInput(Administration.removeClient(id))
        record({ event: "client_removed", client_id: id, revoked_grants: revoked })
        return asJson
          ? json({ removed: id, revoked_grants: revoked })
          : `removed client ${id}; revoked ${revoked.length} grant(s)\n`
      }
      case "clients rotate-secret": {
        const rotated = yield* asInput(Administration.rotateClientSecret(id))
        record({ event: "client_secret_rotated", client_id: id })
        return asJson
          ? json({ client_id: id, client_secret: rotated.secret })
          : `client_id      ${id}\n${secretLine(rotated.secret)}`
      }
      case "grants list": {
        const found = yield* grants.listGrants({
          ...(values.user === undefined ? {} : { subject: values.user }),
          ...(values.client === undefined ? {} : { client_id: values.client }),
        })
        if (asJson) return json(found)
        return table(
          ["GRANT_ID", "USER", "CLIENT_ID", "RESOURCE", "SCOPE", "CREATED", "LAST_USED"],
          found.map((g) => [
            g.grant_id,
            g.subject,
            g.client_id,
            g.resource,
            g.scope,
            iso(g.created_at),
            iso(g.last_used_at),
          ]),
        )
      }
      case "grants revoke": {
        if (argument === undefined && values.user === undefined && values.client === undefined) {
          return yield* Effect.fail(new InputError("grants revoke needs a grant ID, --user or --client"))
        }
        if (argument !== undefined && (values.user !== undefined || values.client !== undefined)) {
          return yield* Effect.fail(new InputError("grants revoke takes a grant ID or --user/--client, not both"))
        }
        const revoked = yield* Administration.revokeGrants(
          argument !== undefined
            ? { grantId: argument }
            : {
                ...(values.user === undefined ? {} : { subject: values.user }),
                ...(values.client === undefined ? {} : { client_id: values.client }),
              },
        )
        if (argument !== undefined && revoked.length === 0) {
          return yield* Effect.fail(new InputError(`no grant ${argument} (or it is revoked already)`))
        }
        record({ event: "grants_revoked", grant_ids: revoked, user: values.user, client_id: values.client })
        if (asJson) return json({ revoked })
        // A resource server that verifies JWTs itself learns nothing of the revocation; say so, with the bound.
        const stillValid =
          revoked.length === 0
            ? ""
            : `JWT access tokens already issued stay usable until they expire (at most ${accessTokenTtl(config)} seconds: ` +
              "lifetimes.accessToken) unless the resource server introspects them\n"
        return `revoked ${revoked.length} grant(s)${revoked.map((g) => `\n  ${g}`).join("")}\n${stillValid}`
      }
      case "keys list": {
        const now = yield* nowSeconds
        const signing = yield* keys.current(now).pipe(
          Effect.map((k) => k.kid),
          Effect.catchTag("NoSigningKey", () => Effect.succeed(undefined)),
        )
        const all = (yield* keys.list()).map((k) => keyView(k, now, signing))
        if (asJson) return json(all)
        return table(
          ["KID", "ALG", "STATE", "CREATED", "SIGNS_FROM", "RETIRES"],
          all.map((k) => [k.kid, k.alg, k.state, iso(k.created_at), iso(k.activates_at), iso(k.retires_at)]),
        )
      }
      case "keys rotate": {
        const rotation = yield* Administration.rotateKey(policyOf(config))
        if (rotation.created) record({ event: "key_rotated", kid: rotation.kid, activates_at: rotation.activatesAt })
        if (asJson) return json(rotation)
        return rotation.created
          ? `new key ${rotation.kid} published; it signs from ${iso(rotation.activatesAt)}\n`
          : `key ${rotation.kid} is already waiting; it signs from ${iso(rotation.activatesAt)}\n`
      }
      case "keys retire": {
        const change = yield* asInput(Administration.retireKey(policyOf(config), id))
        record({ event: "key_retired", kid: id, retires_at: change.key.retires_at })
        if (asJson) return json({ kid: id, retires_at: change.key.retires_at })
        return `key ${id} retired; it leaves the JWK Set at ${iso(change.key.retires_at)}\n`
      }
      case "keys revoke": {
        const change = yield* asInput(Administration.revokeKey(policyOf(config), id))
        record({ event: "key_revoked", kid: id, replacement: change.replacement })
        if (asJson)
          return json({ kid: id, ...(change.replacement === undefined ? {} : { replacement: change.replacement }) })
        return (
          `key ${id} revoked; it is no longer published\n` +
          (change.replacement === undefined ? "" : `new key ${change.replacement} signs from now on\n`)
        )
      }
      default:
        return yield* Effect.fail(new InputError(`unknown command ${command}`))
    }
  })

/**
 * Runs `admin` with its arguments (after the word `admin`). Never throws: every outcome is an exit code with what to
 * print.
 */
export const runAdmin = async (
  argv: ReadonlyArray<string>,
  env: Readonly<Record<string, string | undefined>> = process.env,
): Promise<AdminResult> => {
  const usage = (message: string): AdminResult => ({
    code: 2,
    stdout: "",
    stderr: `keyway-authorization-server admin: ${message}\n\n${ADMIN_USAGE}\n`,
  })
  let parsed: AdminArguments
  try {
    parsed = parseAdminArgs(argv)
  } catch (e) {
    return usage((e as Error).message)
  }
  const { values, positionals } = parsed
  if (values.help === true) return { code: 0, stdout: `${ADMIN_USAGE}\n`, stderr: "" }
  const [group, verb, ...rest] = positionals
  if (group === undefined) return usage("a command is required")
  const command = `${group} ${verb ?? ""}`.trim()
  if (!(command in ARGUMENTS)) return usage(`unknown command "${command}"`)
  const wanted = ARGUMENTS[command]
  if (wanted === undefined && rest.length > 0) return usage(`${command} takes no argument, got "${rest[0]}"`)
  if (wanted !== undefined && !wanted.endsWith("?") && rest.length === 0) return usage(`${command} needs <${wanted}>`)
  if (rest.length > 1) return usage(`${command} takes one argument, got ${rest.length}`)
  const accepted = new Set<string>(["config", "data-dir", "database", "json", ...(ACCEPTS[command] ?? [])])
  for (const flag of Object.keys(values)) {
    if (!accepted.has(flag)) return usage(`${command} does not take --${flag}`)
  }
  const fail = (code: 1 | 2, message: string): AdminResult => ({
    code,
    stdout: "",
    stderr: `keyway-authorization-server admin: ${message}\n`,
  })
  let config: AppConfig
  try {
    if (values.config === undefined) return usage("--config <file.json> is required")
    config = await loadConfig(
      // As --flag=value, which the server's command line takes whatever the value begins with.
      [
        `--config=${values.config}`,
        ...(values["data-dir"] === undefined ? [] : [`--data-dir=${values["data-dir"]}`]),
        ...(values.database === undefined ? [] : [`--database=${values.database}`]),
      ],
      env,
    )
  } catch (e) {
    if (e instanceof UsageError) return usage(e.message)
    return fail(2, (e as Error).message)
  }
  try {
    const events: Array<AuditEvent> = []
    const record = (event: AuditEvent) => events.push(event)
    const stdout = command.startsWith("users ")
      ? await users(command, rest[0] ?? "", values, config, resolve(values.config), record)
      : await Effect.runPromise(
          execute(command, rest[0], values, config, record).pipe(Effect.provide(await storageLayer(config))),
        )
    if (config.auditLog !== undefined && events.length > 0) {
      const audit = openAuditLog(resolve(config.auditLog), "admin")
      for (const event of events) audit.write(event)
      audit.close()
    }
    return { code: 0, stdout, stderr: "" }
  } catch (e) {
    const error = unwrap(e)
    if (error instanceof InputError) return fail(2, error.message)
    return fail(1, error instanceof Error ? error.message : String(error))
  }
}

/** The `users` commands: the configuration file's user list (`remove` also revokes the user's grants). */
const users = async (
  command: string,
  username: string,
  values: Values,
  config: AppConfig,
  file: string,
  record: (event: AuditEvent) => void,
): Promise<string> => {
  if (config.upstream !== undefined) {
    throw new InputError("users: users sign in at the upstream authorization server; this server has no user list")
  }
  const existing = config.users ?? []
  const known = existing.some((u) => u.username === username)
  const password = async () => {
    const value = await readPassword(`Password for ${username}: `)
    if (value === "") throw new InputError("password: must not be empty")
    const problem = Config.passwordProblem(value)
    if (problem !== undefined) throw new InputError(`password: ${problem}`)
    return UserAuthenticator.hashPassword(value)
  }
  switch (command) {
    case "users list": {
      const list = existing.map((u) => ({
        username: u.username,
        ...(u.displayName === undefined ? {} : { displayName: u.displayName }),
      }))
      if (values.json === true) return json(list)
      return table(
        ["USERNAME", "DISPLAY_NAME"],
        list.map((u) => [u.username, u.displayName ?? "-"]),
      )
    }
    case "users add": {
      if (username === "") throw new InputError("username: must not be empty")
      if (known) throw new InputError(`username: ${username} already exists`)
      const passwordHash = await password()
      const displayName = values["display-name"]
      await editUsers(file, (list) => [
        ...list,
        { username, passwordHash, ...(displayName === undefined ? {} : { displayName }) },
      ])
      record({ event: "user_added", username })
      return `added user ${username}\n`
    }
    case "users passwd": {
      if (!known) throw new InputError(`no user ${username}`)
      const passwordHash = await password()
      await editUsers(file, (list) =>
        list.map((u) => {
          if (u.username !== username) return u
          const { password: _old, ...rest } = u
          return { ...rest, passwordHash }
        }),
      )
      record({ event: "user_password_changed", username })
      return `changed the password of ${username}\n`
    }
    default: {
      if (!known) throw new InputError(`no user ${username}`)
      await editUsers(file, (list) => list.filter((u) => u.username !== username))
      const revoked = await Effect.runPromise(
        Administration.revokeGrants({ subject: username }).pipe(Effect.provide(await storageLayer(config))),
      )
      record({ event: "user_removed", username, revoked_grants: revoked })
      return `removed user ${username}; revoked ${revoked.length} grant(s)\n`
    }
  }
}

// Effect.runPromise rejects with the failure itself for a typed error, wrapped in a FiberFailure in some versions.
const unwrap = (e: unknown): unknown => {
  if (e instanceof InputError) return e
  const cause = (e as { cause?: unknown })?.cause
  return cause instanceof InputError ? cause : e
}
