/**
 * The options each entry takes, checked when a client is created: a JavaScript caller (or a cast) can pass anything,
 * and an option the entry does not take, or one of the wrong shape, would otherwise fail much later and far from its
 * cause (`backend.get is not a function` on the first request). Pure: the callers turn a problem into their error.
 */
import * as Effect from "effect/Effect"

/** Who checks: an entry's `createAuthClient`, or the Effect face's configuration. */
export type Entry = "@keyway/client" | "@keyway/client/node" | "ClientConfig"

/** What is wrong: the option at fault (a path such as `clients[0].issuer`) and the whole sentence. */
export interface Problem {
  readonly option: string
  readonly message: string
}

/** A value as a message shows it: its kind, and short scalars themselves. */
const shown = (value: unknown): string => {
  if (value === null) return "null"
  if (Array.isArray(value)) return "an array"
  switch (typeof value) {
    case "string":
      return value.length > 40 ? `a string of ${value.length} characters` : JSON.stringify(value)
    case "number":
    case "boolean":
    case "bigint":
      return String(value)
    case "function":
      return "a function"
    case "object":
      return "an object"
    default:
      return typeof value
  }
}

const isObject = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

/** A check of one value: undefined when it fits, else what it must be. */
type Check = (value: unknown, path: string) => string | undefined

const must =
  (test: (value: unknown) => boolean, what: string): Check =>
  (value, path) =>
    test(value) ? undefined : `${path} must be ${what}; got ${shown(value)}`

const aString = must((v) => typeof v === "string", "a string")
const aNonEmptyString = must((v) => typeof v === "string" && v !== "", "a non-empty string")
const aFunction = must((v) => typeof v === "function", "a function")
const aBoolean = must((v) => typeof v === "boolean", "true or false")
const seconds = must((v) => typeof v === "number" && Number.isFinite(v) && v >= 0, "a number of seconds (0 or more)")
const AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]

/** Each member of an object, against its check; members the check list does not name are refused. */
const members =
  (
    checks: Readonly<Record<string, Check>>,
    required: ReadonlyArray<string>,
    what: string,
    tolerated: ReadonlySet<string> = new Set(),
  ): Check =>
  (value, path) => {
    if (!isObject(value)) return `${path} must be ${what}; got ${shown(value)}`
    for (const name of required) if (value[name] === undefined) return `${path}.${name} is required`
    for (const [name, member] of Object.entries(value)) {
      if (tolerated.has(name)) continue
      const check = checks[name]
      if (check === undefined) {
        return `${path} has "${name}", which ${what} does not have (it has ${Object.keys(checks).join(", ")})`
      }
      if (member === undefined) continue
      const problem = check(member, `${path}.${name}`)
      if (problem !== undefined) return problem
    }
    return undefined
  }

const arrayOf =
  (check: Check, what: string): Check =>
  (value, path) => {
    if (!Array.isArray(value)) return `${path} must be an array of ${what}; got ${shown(value)}`
    for (const [index, item] of value.entries()) {
      const problem = check(item, `${path}[${index}]`)
      if (problem !== undefined) return problem
    }
    return undefined
  }

const clientInformation = members(
  {
    issuer: aNonEmptyString,
    client_id: aNonEmptyString,
    client_secret: aString,
    token_endpoint_auth_method: must(
      (v) => typeof v === "string" && AUTH_METHODS.includes(v),
      `one of ${AUTH_METHODS.join(", ")}`,
    ),
    client_secret_expires_at: must((v) => typeof v === "number" && Number.isFinite(v) && v >= 0, "a number"),
    redirect_uris: arrayOf(aString, "strings"),
  },
  ["issuer", "client_id"],
  "client information ({ issuer, client_id, client_secret?, token_endpoint_auth_method?, redirect_uris? })",
  // The other members of a registration (RFC 7591 §2, §3.2.1; OpenID's application_type) may come along with one
  // pasted from a registration response: not used, not refused. Any other name is a mistake (`secret`).
  new Set([
    "client_id_issued_at",
    "registration_access_token",
    "registration_client_uri",
    "grant_types",
    "response_types",
    "client_name",
    "client_uri",
    "logo_uri",
    "scope",
    "contacts",
    "tos_uri",
    "policy_uri",
    "jwks_uri",
    "jwks",
    "software_id",
    "software_version",
    "software_statement",
    "application_type",
  ]),
)

/** The options of `ClientOptions`, each with its check. */
const CLIENT_OPTIONS: Readonly<Record<string, Check>> = {
  fetch: aFunction,
  clientName: aString,
  clientMetadataUrl: aString,
  applicationType: must((v) => v === "native" || v === "web", '"native" or "web"'),
  clients: arrayOf(clientInformation, "client information"),
  askClientInformation: aFunction,
  privateKeyJwt: members(
    { key: must(isObject, "a private key"), alg: aNonEmptyString, kid: aString },
    ["key", "alg"],
    "{ key, alg, kid? }",
  ),
  chooseAuthorizationServer: aFunction,
  protectedResourceMetadata: (value, path) => {
    if (!isObject(value)) return `${path} must be an object of metadata documents by server URL; got ${shown(value)}`
    for (const [url, document] of Object.entries(value)) {
      if (!isObject(document))
        return `${path}["${url}"] must be a metadata document (an object); got ${shown(document)}`
    }
    return undefined
  },
  scope: aString,
  offlineAccess: aBoolean,
  legacyFallback: aBoolean,
  refreshSkewSeconds: seconds,
  maxStepUpAttempts: must((v) => Number.isInteger(v) && (v as number) >= 1, "a whole number, 1 or more"),
  discoveryTtlSeconds: seconds,
  extensions: arrayOf(
    must((v) => isObject(v) && typeof v.id === "string", "an extension (an object with an id)"),
    "extensions",
  ),
}

const BACKEND = "a TokenStore backend (an object with get, set and delete functions)"

const isBackend = (value: unknown): boolean =>
  isObject(value) &&
  typeof value.get === "function" &&
  typeof value.set === "function" &&
  typeof value.delete === "function"

/** `store` of the main entry: "memory" or a backend; the file store belongs to the Node.js entry. */
const webStore: Check = (value, path) => {
  if (value === "memory" || isBackend(value)) return undefined
  if (isObject(value) && "file" in value) {
    return `${path}: { file } is taken by createAuthClient of @keyway/client/node (the file store needs Node.js); createAuthClient of @keyway/client takes ${path}: "memory" or ${BACKEND}, such as TokenStore.webStorage()`
  }
  return `${path} must be "memory" or ${BACKEND}; got ${shown(value)}`
}

/** `store` of the Node.js entry: also `{ file: path }`. */
const nodeStore: Check = (value, path) => {
  if (value === "memory" || isBackend(value)) return undefined
  if (isObject(value) && "file" in value) {
    if (typeof value.file !== "string" || value.file === "") {
      return `${path}.file must be the path of the token file (a non-empty string); got ${shown(value.file)}`
    }
    const others = Object.keys(value).filter((name) => name !== "file")
    if (others.length > 0) return `${path} has "${others[0]}" beside file; the file store takes { file } only`
    return undefined
  }
  return `${path} must be "memory", { file: path } or ${BACKEND}; got ${shown(value)}`
}

const userAgent = must(
  (v) => isObject(v) && Effect.isEffect(v.open),
  "a user agent (UserAgent.headless(), UserAgent.testUser(...), UserAgent.redirect(...), or one with an open Effect)",
)

/** What the Effect face takes as layers of their own rather than as configuration. */
const LAYERS: Readonly<Record<string, string>> = {
  store:
    "store is not a ClientConfig option: on the Effect face the store is a layer of its own (TokenStore.layerMemory, TokenStore.layerWebStorage, TokenStore.layerBackend, or TokenStore.layerFile from @keyway/client/node)",
  userAgent:
    "userAgent is not a ClientConfig option: on the Effect face the user agent is a layer of its own (UserAgent.layerHeadless, UserAgent.layerTestUser, UserAgent.layerRedirect, or UserAgent.layerBrowser from @keyway/client/node)",
}

const checksOf = (entry: Entry): Readonly<Record<string, Check>> =>
  entry === "ClientConfig"
    ? CLIENT_OPTIONS
    : { ...CLIENT_OPTIONS, store: entry === "@keyway/client" ? webStore : nodeStore, userAgent }

const nameOf = (entry: Entry): string => (entry === "ClientConfig" ? "ClientConfig" : `createAuthClient of ${entry}`)

/**
 * The first problem of the options an entry was given, or undefined when it takes them all as they are. An option
 * given as `undefined` counts as left out.
 */
export const problemOf = (options: unknown, entry: Entry): Problem | undefined => {
  const where = nameOf(entry)
  if (options === undefined) return undefined
  if (!isObject(options)) {
    return { option: "options", message: `${where} takes an object of options; got ${shown(options)}` }
  }
  const checks = checksOf(entry)
  for (const [name, value] of Object.entries(options)) {
    const check = checks[name]
    if (check === undefined) {
      const layer = entry === "ClientConfig" ? LAYERS[name] : undefined
      return {
        option: name,
        message: layer ?? `${where} has no option "${name}"; it takes ${Object.keys(checks).join(", ")}`,
      }
    }
    if (value === undefined) continue
    const problem = check(value, name)
    if (problem !== undefined) return { option: name, message: problem }
  }
  return undefined
}
