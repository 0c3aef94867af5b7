import { ClientAuth } from "@keyway/core"
import { Effect, Schema } from "effect"
import { createLocalJWKSet, decodeJwt, decodeProtectedHeader, type JSONWebKeySet, jwtVerify } from "jose"
import type { ClientMetadataError } from "../cimd/ClientMetadataResolver.js"
import { CLIENT_ASSERTION_ALGORITHMS } from "../Metadata.js"
import type { StorageError } from "../storage/Errors.js"
import { matchesHash, secretLive } from "../storage/internal/common.js"
import { type Client, ClientStore, GrantStore, type JwkSet } from "../storage/Storage.js"
import { findClient, MetadataDocuments } from "./clients.js"
import { nowSeconds } from "./clock.js"

/** RFC 7523 §2.2 client assertion type. */
export const JWT_BEARER_ASSERTION = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

/** Result of client authentication: the client and whether HTTP Basic was used (for the 401 challenge). */
export interface AuthenticatedClient {
  readonly client: Client
  readonly method: Client["token_endpoint_auth_method"]
}

/** A failed client authentication: `invalid_client` (401 with a Basic challenge) or `invalid_request`. */
export class ClientAuthFailure extends Schema.TaggedError<ClientAuthFailure>()("ClientAuthFailure", {
  code: Schema.Literals(["invalid_client", "invalid_request"]),
  description: Schema.String,
  /** Set when the client's document or key set may not be fetched yet (the per-host limit): answered 429. */
  retryAfter: Schema.optionalKey(Schema.Number),
}) {}

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

/**
 * Authenticates the client at the token endpoint (OAuth 2.1 §2.4; RFC 7523 §2.2 and §3). Exactly one method may be
 * used; it must be the one the client registered.
 */
export const authenticateClient = (
  request: Request,
  form: Map<string, string>,
  audiences: ReadonlyArray<string>,
): Effect.Effect<AuthenticatedClient, ClientAuthFailure | StorageError, ClientStore | GrantStore | MetadataDocuments> =>
  Effect.gen(function* () {
    const clients = yield* ClientStore
    const grants = yield* GrantStore
    const now = yield* nowSeconds
    const authorization = request.headers.get("authorization")
    const basic = authorization !== null && /^basic\s/i.test(authorization)
    const fail = (code: "invalid_client" | "invalid_request", description: string) =>
      Effect.fail(new ClientAuthFailure({ code, description }))

    const methods = [basic, form.has("client_secret"), form.has("client_assertion")].filter(Boolean).length
    if (methods > 1) return yield* fail("invalid_request", "more than one client authentication method was used")
    if (authorization !== null && !basic) {
      return yield* fail("invalid_client", "only the Basic scheme is accepted in the Authorization header")
    }

    const lookup = (clientId: string) =>
      findClient(clientId).pipe(
        Effect.catchTag("ClientMetadataError", (e) => Effect.fail(metadataFailure(e))),
        Effect.flatMap((found) =>
          found === undefined ? fail("invalid_client", "client authentication failed") : Effect.succeed(found.client),
        ),
      )
    const requireMethod = (client: Client, method: Client["token_endpoint_auth_method"]) =>
      client.token_endpoint_auth_method === method
        ? Effect.succeed({ client, method })
        : fail("invalid_client", `this client must authenticate with ${client.token_endpoint_auth_method}`)
    const checkSecret = (client: Client, secret: string, method: Client["token_endpoint_auth_method"]) =>
      Effect.gen(function* () {
        const ok = yield* clients
          .verifySecret(client.client_id, secret, now)
          .pipe(Effect.catchTag("ClientNotFound", () => Effect.succeed(false)))
        if (!ok) {
          // Only a caller who knows the secret learns that it expired (RFC 7591 §3.2.1 client_secret_expires_at).
          if (!secretLive(client.client_secret_expires_at, now) && matchesHash(secret, client.client_secret_hash)) {
            return yield* fail(
              "invalid_client",
              "the client secret has expired (client_secret_expires_at); register again",
            )
          }
          return yield* fail("invalid_client", "client authentication failed")
        }
        return yield* requireMethod(client, method)
      })

    if (basic) {
      const credentials = ClientAuth.decodeClientSecretBasic(authorization)
      if (credentials === undefined) return yield* fail("invalid_client", "malformed Basic credentials")
      const { clientId: id, clientSecret: secret } = credentials
      const bodyId = form.get("client_id")
      if (bodyId !== undefined && bodyId !== id) {
        return yield* fail("invalid_client", "client_id in the body differs from the authenticated client")
      }
      const client = yield* lookup(id)
      return yield* checkSecret(client, secret, "client_secret_basic")
    }

    if (form.has("client_assertion")) {
      const type = form.get("client_assertion_type")
      if (type !== JWT_BEARER_ASSERTION) {
        return yield* fail("invalid_request", `client_assertion_type must be ${JWT_BEARER_ASSERTION}`)
      }
      const assertion = form.get("client_assertion") ?? ""
      let claimedId: string | undefined
      try {
        const claims = decodeJwt(assertion)
        claimedId = typeof claims.sub === "string" ? claims.sub : undefined
      } catch {
        return yield* fail("invalid_client", "client_assertion is not a JWT")
      }
      if (claimedId === undefined) return yield* fail("invalid_client", "client_assertion has no sub")
      const bodyId = form.get("client_id")
      if (bodyId !== undefined && bodyId !== claimedId) {
        return yield* fail("invalid_client", "client_id differs from the assertion's subject")
      }
      const client = yield* lookup(claimedId)
      if (client.token_endpoint_auth_method !== "private_key_jwt") {
        return yield* fail("invalid_client", `this client must authenticate with ${client.token_endpoint_auth_method}`)
      }
      const keys = yield* clientKeys(client, assertion, now).pipe(
        Effect.mapError((e) =>
          typeof e === "string" ? new ClientAuthFailure({ code: "invalid_client", description: e }) : e,
        ),
      )
      const verified = yield* Effect.tryPromise({
        try: () =>
          jwtVerify(assertion, createLocalJWKSet(keys as unknown as JSONWebKeySet), {
            issuer: client.client_id,
            subject: client.client_id,
            audience: [...audiences],
            algorithms: [...CLIENT_ASSERTION_ALGORITHMS],
            requiredClaims: ["exp", "jti"],
            currentDate: new Date(now * 1000),
            clockTolerance: 5,
          }),
        catch: (e) =>
          new ClientAuthFailure({
            code: "invalid_client",
            description: `client_assertion rejected: ${(e as Error).message}`,
          }),
      })
      const { exp, jti } = verified.payload
      if (typeof jti !== "string" || jti === "" || typeof exp !== "number") {
        return yield* fail("invalid_client", "client_assertion needs jti and exp")
      }
      if (exp > now + 3600) return yield* fail("invalid_client", "client_assertion lives longer than one hour")
      const fresh = yield* grants.rememberJti(client.client_id, jti, exp)
      if (!fresh) return yield* fail("invalid_client", "client_assertion jti was already used")
      return { client, method: "private_key_jwt" as const }
    }

    const clientId = form.get("client_id")
    if (clientId === undefined || clientId === "") return yield* fail("invalid_client", "client authentication failed")
    const client = yield* lookup(clientId)
    if (form.has("client_secret"))
      return yield* checkSecret(client, form.get("client_secret") ?? "", "client_secret_post")
    return yield* requireMethod(client, "none")
  })
