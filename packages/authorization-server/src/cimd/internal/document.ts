import { SecureUrl, Wire } from "@keyway/core"
import { Result } from "effect"
import { isApplicationType, type JwkSetProblem, jwkSetProblem } from "../../internal/clientMetadata.js"
import { isLocalhostOnly, type RedirectUriProblem, redirectUriProblem } from "../../internal/redirect.js"
import type { ClientMetadata, JwkSet, TokenEndpointAuthMethod } from "../../storage/Storage.js"

/**
 * The rules of a client ID metadata document that go beyond core's `Wire.validateClientIdMetadataDocument`, and the
 * client record a valid document becomes.
 */

const DOCUMENT = Wire.Documents.clientIdMetadataDocument

/**
 * Whether every redirect URI reaches only the user's own machine (a loopback host, or a private-use scheme any local
 * application may claim), so the consent page should warn that the client is a local application whose identity
 * the server cannot check. The same rule as the consent page's warning. False for an empty list.
 */
export const isLoopbackOnly = (redirectUris: ReadonlyArray<string>): boolean =>
  redirectUris.length > 0 && redirectUris.every(isLocalhostOnly)

/** How the shared redirect URI rule reads in a document. */
const redirectProblemText = (problem: RedirectUriProblem): string => {
  switch (problem.kind) {
    case "not-absolute":
      return "must be a URL"
    case "fragment":
      return "must not contain a fragment"
    case "http-not-loopback":
      return "must use https unless its host is loopback"
    case "scheme":
      return "must use https, http on loopback, or a reverse-domain private-use scheme"
  }
}

/** How the shared public-keys rule reads: the path inside the set, and what is wrong. */
export const jwkSetProblemText = (problem: JwkSetProblem): { readonly path: string; readonly problem: string } => {
  switch (problem.kind) {
    case "not-a-set":
      return { path: problem.path, problem: "must be an array of keys" }
    case "no-kty":
      return { path: problem.path, problem: "is required" }
    case "secret":
      return { path: problem.path, problem: problem.secret.problem }
  }
}

/** Rules beyond core's: redirect URIs, public keys only, known application types. */
export const extraChecks = (doc: Wire.ClientIdMetadataDocument): Wire.InvalidDocument | undefined => {
  for (const [i, uri] of doc.redirect_uris.entries()) {
    const problem = redirectUriProblem(uri)
    if (problem !== undefined) return Wire.invalid(DOCUMENT, `redirect_uris.${i}`, redirectProblemText(problem))
  }
  if (doc.jwks !== undefined) {
    const problem = jwkSetProblem(doc.jwks)
    if (problem !== undefined) {
      const { path, problem: text } = jwkSetProblemText(problem)
      return Wire.invalid(DOCUMENT, `jwks.${path}`, text)
    }
  }
  const type = doc.application_type
  if (type !== undefined && !isApplicationType(type)) {
    return Wire.invalid(DOCUMENT, "application_type", `must be "web" or "native", got "${type}"`)
  }
  return undefined
}

/**
 * The client record of a valid document, fetched at `now` and reused until `expiresAt`: its RFC 7591 members (the
 * fields extensions declare are the server's to add, see `internal/clients.ts`).
 */
export const toClient = (doc: Wire.ClientIdMetadataDocument, now: number, expiresAt: number): ClientMetadata => ({
  client_id: doc.client_id,
  client_id_issued_at: now,
  client_secret_expires_at: 0,
  redirect_uris: doc.redirect_uris,
  grant_types: doc.grant_types ?? ["authorization_code"],
  response_types: doc.response_types ?? ["code"],
  token_endpoint_auth_method: (doc.token_endpoint_auth_method ?? "none") as TokenEndpointAuthMethod,
  client_name: doc.client_name,
  ...(doc.client_uri === undefined ? {} : { client_uri: doc.client_uri }),
  ...(doc.logo_uri === undefined ? {} : { logo_uri: doc.logo_uri }),
  ...(doc.tos_uri === undefined ? {} : { tos_uri: doc.tos_uri }),
  ...(doc.policy_uri === undefined ? {} : { policy_uri: doc.policy_uri }),
  ...(doc.contacts === undefined ? {} : { contacts: doc.contacts }),
  ...(doc.scope === undefined ? {} : { scope: doc.scope }),
  // extraChecks has made sure every key has a string kty.
  ...(doc.jwks === undefined ? {} : { jwks: doc.jwks as unknown as JwkSet }),
  ...(doc.jwks_uri === undefined ? {} : { jwks_uri: doc.jwks_uri }),
  ...(doc.application_type !== undefined && isApplicationType(doc.application_type)
    ? { application_type: doc.application_type }
    : {}),
  ...(doc.software_id === undefined ? {} : { software_id: doc.software_id }),
  ...(doc.software_version === undefined ? {} : { software_version: doc.software_version }),
  origin: "metadata-document",
  expires_at: expiresAt,
})

/** The client ID rules' settings. */
export interface ClientIdSettings {
  readonly maxClientIdLength: number
  readonly allowHttpLoopbackClientIds: boolean
}

/** Under the development option, an http loopback client ID is checked as its https twin. */
const developmentForm = (clientId: string, settings: ClientIdSettings): string | undefined => {
  if (!settings.allowHttpLoopbackClientIds || !/^http:\/\//i.test(clientId)) return undefined
  const parsed = URL.parse(clientId)
  if (parsed === null || !SecureUrl.isLoopbackHost(parsed.hostname)) return undefined
  return `https://${clientId.slice("http://".length)}`
}

/**
 * Checks the shape of a client ID URL with core's document rules (so there is one definition of a valid client ID
 * URL): the URL to validate documents against, or what is wrong with it.
 */
export const checkClientId = (clientId: string, settings: ClientIdSettings): Result.Result<string, string> => {
  if (clientId.length > settings.maxClientIdLength) {
    return Result.fail(`must not be longer than ${settings.maxClientIdLength} characters`)
  }
  const candidate = developmentForm(clientId, settings) ?? clientId
  const probe = { client_id: candidate, client_name: "-", redirect_uris: ["https://client.invalid/cb"] }
  const checked = Wire.validateClientIdMetadataDocument(probe, candidate)
  if (Result.isFailure(checked)) {
    const prefix = `${DOCUMENT}: "client_id" `
    const message = checked.failure.message
    return Result.fail(message.startsWith(prefix) ? message.slice(prefix.length) : message)
  }
  return Result.succeed(candidate)
}

/** Core's validation of a document fetched for `clientId`, checked as `checkedAs` (see {@link checkClientId}). */
export const validateDocument = (
  json: unknown,
  clientId: string,
  checkedAs: string,
): Result.Result<Wire.ClientIdMetadataDocument, Wire.InvalidDocument> => {
  const isObject = typeof json === "object" && json !== null && !Array.isArray(json)
  if (checkedAs === clientId || !isObject || (json as { client_id?: unknown }).client_id !== clientId) {
    return Wire.validateClientIdMetadataDocument(json, clientId)
  }
  // Development http client ID: validate the https twin, then give the document its real client_id back.
  const twin = Wire.validateClientIdMetadataDocument({ ...json, client_id: checkedAs }, checkedAs)
  return Result.map(twin, (doc) => ({ ...doc, client_id: clientId }))
}
