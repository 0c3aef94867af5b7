import { Assertion, ClientAuth, Grant } from "@keyway/core"
import { Effect, Result } from "effect"
import { compactVerify, createLocalJWKSet, decodeJwt, decodeProtectedHeader, type JSONWebKeySet } from "jose"
import type { ResolvedConfig } from "../Config.js"
import type { ClientMetadataError } from "../cimd/ClientMetadataResolver.js"
import { type ClientAuthenticationContext, type ClientAuthenticationMethod, ClientAuthFailure } from "../Extension.js"
import { CLIENT_ASSERTION_ALGORITHMS } from "../Metadata.js"
import type { StorageError } from "../storage/Errors.js"
import { matchesHash, secretLive } from "../storage/internal/common.js"
import { type Client, ClientStore, GrantStore, type JwkSet } from "../storage/Storage.js"
import { findClient, MetadataDocuments } from "./clients.js"
import { nowSeconds } from "./clock.js"

export { ClientAuthFailure }

/** Result of client authentication: the client and the method it used. */
/** A method as the server runs it: the built-in ones also resolve clients' key sets. */
type Method = Omit<ClientAuthenticationMethod, "authenticate"> & {
  readonly authenticate: (
    context: ClientAuthenticationContext,
  ) => Effect.Effect<Client, ClientAuthFailure | StorageError, ClientStore | GrantStore | MetadataDocuments>
}

export interface AuthenticatedClient {
  readonly client: Client
  readonly method: string
}

/** A failure to use a client ID metadata document or its key set, as the client-authentication failure. */
const metadataFailure = (e: ClientMetadataError): ClientAuthFailure =>
  new ClientAuthFailure({
    code: "invalid_client",
    description: e.message,
    ...(e.retryAfter === undefined ? {} : { retryAfter: e.retryAfter }),
  })

/**
 * The client's public keys: its inline `jwks`, else the set at its `jwks_uri` (client ID metadata documents, fetched
 * through the SSRF guard and cached), fetched again once when the assertion names a `kid` the cached set lacks.
 * Fails with the description of an `invalid_client`, or the failure of the key set's fetch.
 */
const clientKeys = (
  client: Client,
  assertion: string,
  now: number,
): Effect.Effect<JwkSet, string | ClientAuthFailure, MetadataDocuments> =>
  Effect.gen(function* () {
    if (client.jwks !== undefined) return client.jwks
    if (client.jwks_uri === undefined) return yield* Effect.fail("this client has neither jwks nor jwks_uri")
    const { jwks } = yield* MetadataDocuments
    if (jwks === undefined) {
      return yield* Effect.fail("this client's jwks_uri cannot be used: client ID metadata documents are disabled")
    }
    let kid: string | undefined
    try {
      kid = decodeProtectedHeader(assertion).kid
    } catch {
      return yield* Effect.fail("client_assertion is not a JWT")
    }
    const uri = client.jwks_uri
    const get = (refresh: boolean) =>
      jwks(client.client_id, uri, now, { refresh }).pipe(Effect.mapError(metadataFailure))
    const cached = yield* get(false)
    if (kid === undefined || cached.keys.some((key) => key.kid === kid)) return cached
    return yield* get(true)
  })

const fail = (code: "invalid_client" | "invalid_request", description: string) =>
  Effect.fail(new ClientAuthFailure({ code, description }))

/** The client must be registered with the method it used. */
const requireMethod = (client: Client, method: string) =>
  client.token_endpoint_auth_method === method
    ? Effect.succeed(client)
    : fail("invalid_client", `this client must authenticate with ${client.token_endpoint_auth_method}`)

const checkSecret = (context: ClientAuthenticationContext, client: Client, secret: string, method: string) =>
  Effect.gen(function* () {
    const clients = yield* ClientStore
    const ok = yield* clients
      .verifySecret(client.client_id, secret, context.now)
      .pipe(Effect.catchTag("ClientNotFound", () => Effect.succeed(false)))
    if (!ok) {
      // Only a caller who knows the secret learns that it expired (RFC 7591 §3.2.1 client_secret_expires_at).
      if (!secretLive(client.client_secret_expires_at, context.now) && matchesHash(secret, client.client_secret_hash)) {
        return yield* fail("invalid_client", "the client secret has expired (client_secret_expires_at); register again")
      }
      return yield* fail("invalid_client", "client authentication failed")
    }
    return yield* requireMethod(client, method)
  })

const isBasic = (request: Request) => /^basic\s/i.test(request.headers.get("authorization") ?? "")

/**
 * `client_secret_basic`: the client ID and secret in the `Authorization: Basic` header.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-2.3.1 | RFC 6749 §2.3.1}
 */
const clientSecretBasic: Method = {
  name: "client_secret_basic",
  present: isBasic,
  authenticate: (context) =>
    Effect.gen(function* () {
      const credentials = ClientAuth.decodeClientSecretBasic(context.request.headers.get("authorization") ?? "")
      if (credentials === undefined) return yield* fail("invalid_client", "malformed Basic credentials")
      const bodyId = context.form.get("client_id")
      if (bodyId !== undefined && bodyId !== credentials.clientId) {
        return yield* fail("invalid_client", "client_id in the body differs from the authenticated client")
      }
      const client = yield* context.lookup(credentials.clientId)
      return yield* checkSecret(context, client, credentials.clientSecret, "client_secret_basic")
    }),
}

/**
 * `client_secret_post`: the client ID and secret in the form body.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-2.3.1 | RFC 6749 §2.3.1}
 */
const clientSecretPost: Method = {
  name: "client_secret_post",
  present: (_, form) => form.has("client_secret"),
  authenticate: (context) =>
    Effect.gen(function* () {
      const clientId = context.form.get("client_id")
      if (clientId === undefined || clientId === "")
        return yield* fail("invalid_client", "client authentication failed")
      const client = yield* context.lookup(clientId)
      return yield* checkSecret(context, client, context.form.get("client_secret") ?? "", "client_secret_post")
    }),
}

/** The clock skew tolerated on a client assertion's `exp`, `nbf` and `iat`, in seconds. */
const CLIENT_ASSERTION_SKEW = 5

/** The longest lifetime of a client assertion (`exp` - `iat`, or `exp` - now without `iat`), in seconds. */
const CLIENT_ASSERTION_MAX_LIFETIME = 3600

/**
 * `private_key_jwt`: a JWT signed with the client's key as `client_assertion`, single use by its `jti`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-2.2 | RFC 7523 §2.2}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-3 | RFC 7523 §3}
 */
const privateKeyJwt: Method = {
  name: "private_key_jwt",
  present: (_, form) => form.has("client_assertion"),
  authenticate: (context) =>
    Effect.gen(function* () {
      const { form, now } = context
      const type = form.get("client_assertion_type")
      if (type !== Grant.JWT_CLIENT_ASSERTION_TYPE) {
        return yield* fail("invalid_request", `client_assertion_type must be ${Grant.JWT_CLIENT_ASSERTION_TYPE}`)
      }
      const assertion = form.get("client_assertion") ?? ""
      let claims: Readonly<Record<string, unknown>>
      try {
        claims = decodeJwt(assertion)
      } catch {
        return yield* fail("invalid_client", "client_assertion is not a JWT")
      }
      const claimedId = typeof claims.sub === "string" ? claims.sub : undefined
      if (claimedId === undefined) return yield* fail("invalid_client", "client_assertion has no sub")
      const bodyId = form.get("client_id")
      if (bodyId !== undefined && bodyId !== claimedId) {
        return yield* fail("invalid_client", "client_id differs from the assertion's subject")
      }
      const client = yield* context.lookup(claimedId)
      if (client.token_endpoint_auth_method !== "private_key_jwt") {
        return yield* fail("invalid_client", `this client must authenticate with ${client.token_endpoint_auth_method}`)
      }
      const keys = yield* clientKeys(client, assertion, now).pipe(
        Effect.mapError((e) =>
          typeof e === "string" ? new ClientAuthFailure({ code: "invalid_client", description: e }) : e,
        ),
      )
      // The signature here (of the very claims decoded above); the claims through core's Assertion.check, like every
      // assertion grant's (RFC 7523 §3).
      yield* Effect.tryPromise({
        try: () =>
          compactVerify(assertion, createLocalJWKSet(keys as unknown as JSONWebKeySet), {
            algorithms: [...CLIENT_ASSERTION_ALGORITHMS],
          }),
        catch: (e) =>
          new ClientAuthFailure({
            code: "invalid_client",
            description: `client_assertion rejected: ${(e as Error).message}`,
          }),
      })
      // Its sub named the client looked up above; its iss must name it too (RFC 7523 §3 items 1 and 2, §2.2).
      const checked = Assertion.check(claims, {
        issuer: client.client_id,
        audiences: context.audiences,
        now,
        clockSkew: CLIENT_ASSERTION_SKEW,
        maxLifetime: CLIENT_ASSERTION_MAX_LIFETIME,
        requireIat: false,
        requireJti: true,
      })
      if (Result.isFailure(checked)) {
        return yield* fail("invalid_client", `client_assertion rejected: ${checked.failure}`)
      }
      const { exp, jti } = checked.success
      const grants = yield* GrantStore
      const fresh = yield* grants.rememberJti(client.client_id, jti!, exp)
      if (!fresh) return yield* fail("invalid_client", "client_assertion jti was already used")
      return client
    }),
}

/**
 * `none`: a public client names itself with `client_id` and proves nothing.
 *
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-2.1 | OAuth 2.1 §2.1}
 */
const noAuthentication: Method = {
  name: "none",
  present: () => false,
  authenticate: (context) =>
    Effect.gen(function* () {
      const clientId = context.form.get("client_id")
      if (clientId === undefined || clientId === "")
        return yield* fail("invalid_client", "client authentication failed")
      return yield* requireMethod(yield* context.lookup(clientId), "none")
    }),
}

/**
 * The built-in client-authentication methods, in the order `token_endpoint_auth_methods_supported` lists them.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2}
 */
export const builtinMethods: ReadonlyArray<Method> = [
  noAuthentication,
  clientSecretBasic,
  clientSecretPost,
  privateKeyJwt,
]

// The methods of each configuration, listed once rather than on every request.
const methodsCache = new WeakMap<ResolvedConfig, ReadonlyArray<Method>>()

/** Every client-authentication method: the built-in ones, then those the extensions register. */
export const authenticationMethods = (config: ResolvedConfig): ReadonlyArray<Method> => {
  let methods = methodsCache.get(config)
  if (methods === undefined) {
    methods = [...builtinMethods, ...config.extensions.flatMap((e) => e.clientAuthenticationMethods ?? [])]
    methodsCache.set(config, methods)
  }
  return methods
}

/** Whether the request carries client credentials or names a client (`client_id`). */
export const identifiesClient = (config: ResolvedConfig, request: Request, form: ReadonlyMap<string, string>) =>
  request.headers.has("authorization") ||
  form.has("client_id") ||
  authenticationMethods(config).some((m) => m.present(request, form))

/**
 * Authenticates the client at the token, revocation or introspection endpoint (OAuth 2.1 §2.4; RFC 7523 §2.2 and
 * §3). Exactly one method may be used; it must be the one the client registered.
 */
export const authenticateClient = (
  config: ResolvedConfig,
  request: Request,
  form: ReadonlyMap<string, string>,
  audiences: ReadonlyArray<string>,
): Effect.Effect<AuthenticatedClient, ClientAuthFailure | StorageError, ClientStore | GrantStore | MetadataDocuments> =>
  Effect.gen(function* () {
    const now = yield* nowSeconds
    const methods = authenticationMethods(config)
    const used = methods.filter((m) => m.present(request, form))
    if (used.length > 1) return yield* fail("invalid_request", "more than one client authentication method was used")
    if (request.headers.has("authorization") && !isBasic(request) && used.length === 0) {
      return yield* fail("invalid_client", "only the Basic scheme is accepted in the Authorization header")
    }
    const method = used[0] ?? noAuthentication
    const services = yield* Effect.context<ClientStore | MetadataDocuments>()
    const context: ClientAuthenticationContext = {
      config,
      request,
      form,
      now,
      audiences,
      lookup: (clientId) =>
        findClient(clientId).pipe(
          Effect.catchTag("ClientMetadataError", (e) => Effect.fail(metadataFailure(e))),
          Effect.flatMap((found) =>
            found === undefined ? fail("invalid_client", "client authentication failed") : Effect.succeed(found.client),
          ),
          Effect.provideContext(services),
        ),
    }
    const client = yield* method.authenticate(context)
    return { client, method: method.name }
  })
