/**
 * Operator actions on a running installation's storage: clients added, changed, removed and given a new secret;
 * grants revoked; signing keys retired or, after a compromise, revoked. Every action is a change in the store, which
 * every server sharing it reads on each request, so it takes effect at once, without a restart.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html | RFC 7591 (client metadata)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7009.html#section-2.1 | RFC 7009 §2.1 (revocation reaches the grant)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5 (JWK Set)}
 * @module
 */
import { Effect, Schema } from "effect"
import { nowSeconds } from "./internal/clock.js"
import { randomToken } from "./internal/crypto.js"
import { isPrivateUseScheme, redirectProblemText, redirectUriProblem } from "./internal/redirect.js"
import { type RotationPolicy, rotate } from "./KeyRotation.js"
import { generateSigningKey } from "./Signing.js"
import type { ClientNotFound, KeyNotFound, StorageError } from "./storage/Errors.js"
import {
  type Client,
  type ClientMetadata,
  ClientStore,
  type GrantFilter,
  GrantStore,
  KeyStore,
  type SigningKey,
} from "./storage/Storage.js"

/**
 * An administrative request that cannot be carried out as given; `field` names the input at fault (`redirect_uris`,
 * `client_id`, `kid`, ...).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-3.2.2 | RFC 7591 §3.2.2 (errors naming the metadata)}
 */
export class AdminInputError extends Schema.TaggedError<AdminInputError>()("AdminInputError", {
  field: Schema.String,
  message: Schema.String,
}) {}

/**
 * How an operator-added client authenticates at the token endpoint: `none` for a public client (PKCE only), or a
 * generated secret.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2 (token_endpoint_auth_method)}
 */
export type AdminAuthMethod = "none" | "client_secret_basic" | "client_secret_post"

/**
 * A client as an operator describes it.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-2 | RFC 7591 §2}
 */
export interface ClientInput {
  /** Generated when absent (128 random bits). */
  readonly clientId?: string
  readonly clientName?: string
  readonly redirectUris: ReadonlyArray<string>
  /** `client_secret_basic` by default. */
  readonly tokenEndpointAuthMethod?: AdminAuthMethod
  /** The most the client may ask for (space-separated), as for a pre-registered client. */
  readonly scope?: string
}

/**
 * A client just added or given a new secret; `secret` is the only time the raw secret exists outside the client.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-3.2.1 | RFC 7591 §3.2.1}
 */
export interface ClientWithSecret {
  readonly client: Client
  readonly secret?: string
}

const METHODS: ReadonlyArray<string> = ["none", "client_secret_basic", "client_secret_post"]

const checkRedirectUris = (uris: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    if (uris.length === 0) {
      return yield* new AdminInputError({ field: "redirect_uris", message: "needs at least one redirect URI" })
    }
    for (const uri of uris) {
      const problem = redirectUriProblem(uri)
      if (problem !== undefined) {
        return yield* new AdminInputError({ field: "redirect_uris", message: redirectProblemText(uri, problem) })
      }
    }
  })

const checkMethod = (method: string) =>
  METHODS.includes(method)
    ? Effect.void
    : new AdminInputError({ field: "token_endpoint_auth_method", message: `must be one of ${METHODS.join(", ")}` })

const withSecret = (method: string) => method === "client_secret_basic" || method === "client_secret_post"

// Clients from the configuration file are written again at every start, so changing them here would not last.
const notConfigured = (client: Client) =>
  client.origin === "static"
    ? new AdminInputError({
        field: "client_id",
        message: `${client.client_id} is configured in the configuration file; change it there`,
      })
    : Effect.void

const present = (clientId: string) =>
  Effect.flatMap(nowSeconds, (now) => ClientStore.use((clients) => clients.get(clientId, now)))

/**
 * Adds a client (origin `admin`: kept across restarts, scope limited like a pre-registered client's). A client with a
 * secret gets a generated one, returned once and stored only as a hash.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-3.2.1 | RFC 7591 §3.2.1}
 */
export const addClient: (
  input: ClientInput,
) => Effect.Effect<ClientWithSecret, AdminInputError | StorageError, ClientStore> = Effect.fn(
  "Administration.addClient",
)(function* (input: ClientInput) {
  const method = input.tokenEndpointAuthMethod ?? "client_secret_basic"
  yield* checkMethod(method)
  yield* checkRedirectUris(input.redirectUris)
  if (input.clientId === "") return yield* new AdminInputError({ field: "client_id", message: "must not be empty" })
  const now = yield* nowSeconds
  const secret = withSecret(method) ? randomToken(32) : undefined
  const metadata: ClientMetadata = {
    client_id: input.clientId ?? randomToken(16),
    client_id_issued_at: now,
    client_secret_expires_at: 0,
    redirect_uris: input.redirectUris,
    grant_types: ["authorization_code", "refresh_token"],
    response_types: ["code"],
    token_endpoint_auth_method: method as AdminAuthMethod,
    application_type: input.redirectUris.some(isPrivateUseScheme) ? "native" : "web",
    origin: "admin",
    ...(input.clientName === undefined ? {} : { client_name: input.clientName }),
    ...(input.scope === undefined ? {} : { scope: input.scope }),
  }
  const client = yield* ClientStore.use((clients) =>
    clients.create({ ...metadata, ...(secret === undefined ? {} : { client_secret: secret }) }),
  ).pipe(
    Effect.catchTag("ClientAlreadyExists", (e) =>
      Effect.fail(new AdminInputError({ field: "client_id", message: `${e.client_id} already exists` })),
    ),
  )
  return secret === undefined ? { client } : { client, secret }
})

/**
 * Changes a stored client's name, redirect URIs or scope (what is absent stays). A client from the configuration
 * file is refused: the file is written again at every start.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7592.html#section-2.2 | RFC 7592 §2.2}
 */
export const updateClient: (
  clientId: string,
  changes: Omit<Partial<ClientInput>, "clientId" | "tokenEndpointAuthMethod">,
) => Effect.Effect<Client, AdminInputError | ClientNotFound | StorageError, ClientStore> = Effect.fn(
  "Administration.updateClient",
)(function* (clientId: string, changes: Omit<Partial<ClientInput>, "clientId" | "tokenEndpointAuthMethod">) {
  const client = yield* present(clientId)
  yield* notConfigured(client)
  if (changes.redirectUris !== undefined) yield* checkRedirectUris(changes.redirectUris)
  const { client_secret_hash: _secret, registration_access_token_hash: _token, ...metadata } = client
  return yield* ClientStore.use((clients) =>
    clients.update({
      ...metadata,
      ...(changes.clientName === undefined ? {} : { client_name: changes.clientName }),
      ...(changes.redirectUris === undefined ? {} : { redirect_uris: changes.redirectUris }),
      ...(changes.scope === undefined ? {} : { scope: changes.scope }),
    }),
  )
})

/**
 * Gives a confidential client a new generated secret (returned once, stored as a hash); the old one stops working at
 * once.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7591.html#section-3.2.1 | RFC 7591 §3.2.1}
 */
export const rotateClientSecret: (
  clientId: string,
) => Effect.Effect<ClientWithSecret, AdminInputError | ClientNotFound | StorageError, ClientStore> = Effect.fn(
  "Administration.rotateClientSecret",
)(function* (clientId: string) {
  const client = yield* present(clientId)
  yield* notConfigured(client)
  if (!withSecret(client.token_endpoint_auth_method)) {
    return yield* new AdminInputError({
      field: "client_id",
      message: `${clientId} authenticates with ${client.token_endpoint_auth_method}, not a secret`,
    })
  }
  const secret = randomToken(32)
  const { client_secret_hash: _secret, registration_access_token_hash: _token, ...metadata } = client
  const updated = yield* ClientStore.use((clients) =>
    clients.update({ ...metadata, client_secret_expires_at: 0, client_secret: secret }),
  )
  return { client: updated, secret }
})

/**
 * Revokes the grants not revoked yet that match (one grant by id, or all of a subject and/or client): their unused
 * codes, every refresh-token family (whichever authorization of the grant opened it) and their unexpired access-token
 * ids, which introspection then reports inactive. Returns the revoked ids.
 *
 * JWT access tokens already issued stay usable until they expire, at most the access-token lifetime
 * (`lifetimes.accessToken`, 300 seconds by default), at a resource server that verifies them itself (signature and
 * `exp`, RFC 9068 §4): only one that introspects them (RFC 7662) sees the revocation at once.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7009.html#section-2.1 | RFC 7009 §2.1}
 * @see {@link https://www.rfc-editor.org/rfc/rfc7662.html#section-2.2 | RFC 7662 §2.2}
 */
export const revokeGrants: (
  which: { readonly grantId: string } | GrantFilter,
) => Effect.Effect<ReadonlyArray<string>, StorageError, GrantStore> = Effect.fn("Administration.revokeGrants")(
  function* (which: { readonly grantId: string } | GrantFilter) {
    const grants = yield* GrantStore
    const now = yield* nowSeconds
    const ids =
      "grantId" in which
        ? (yield* grants.listGrants()).filter((g) => g.grant_id === which.grantId).map((g) => g.grant_id)
        : (yield* grants.listGrants(which)).map((g) => g.grant_id)
    for (const id of ids) yield* grants.revokeGrant(id, now).pipe(Effect.catchTag("GrantNotFound", () => Effect.void))
    return ids
  },
)

/**
 * Removes a stored client and revokes every grant it holds. A client from the configuration file is refused.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7592.html#section-2.3 | RFC 7592 §2.3}
 */
export const removeClient: (
  clientId: string,
) => Effect.Effect<ReadonlyArray<string>, AdminInputError | ClientNotFound | StorageError, ClientStore | GrantStore> =
  Effect.fn("Administration.removeClient")(function* (clientId: string) {
    const client = yield* present(clientId)
    yield* notConfigured(client)
    const revoked = yield* revokeGrants({ client_id: clientId })
    yield* ClientStore.use((clients) => clients.delete(clientId))
    return revoked
  })

/**
 * The outcome of {@link retireKey} and {@link revokeKey}.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 */
export interface KeyChange {
  readonly key: SigningKey
  /** A key created to sign at once because the revoked one was the one signing. */
  readonly replacement?: string
}

/**
 * Retires a key that no longer signs: it stays in the JWK Set until every token it signed has expired (access-token
 * lifetime plus clock skew), then leaves it. The key signing now is refused: rotate first, and retire it once its
 * successor signs.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 */
export const retireKey: (
  policy: RotationPolicy,
  kid: string,
) => Effect.Effect<KeyChange, AdminInputError | KeyNotFound | StorageError, KeyStore> = Effect.fn(
  "Administration.retireKey",
)(function* (policy: RotationPolicy, kid: string) {
  const keys = yield* KeyStore
  const now = yield* nowSeconds
  const key = yield* keys.get(kid)
  const current = yield* keys.current(now).pipe(Effect.catchTag("NoSigningKey", () => Effect.succeed(undefined)))
  if (current?.kid === kid) {
    return yield* new AdminInputError({
      field: "kid",
      message: `${kid} is the key signing now; rotate first and retire it once its successor signs`,
    })
  }
  const retiresAt = Math.min(key.retires_at ?? Number.POSITIVE_INFINITY, now + policy.accessTokenTtl + policy.clockSkew)
  return { key: yield* keys.retire(kid, retiresAt) }
})

/**
 * Revokes a compromised key: it leaves the JWK Set at once, so tokens it signed no longer verify anywhere that
 * fetches the set again. When it was the key signing, a new key is created that signs at once.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7517.html#section-5 | RFC 7517 §5}
 */
export const revokeKey: (
  policy: RotationPolicy,
  kid: string,
) => Effect.Effect<KeyChange, KeyNotFound | StorageError, KeyStore> = Effect.fn("Administration.revokeKey")(function* (
  policy: RotationPolicy,
  kid: string,
) {
  const keys = yield* KeyStore
  const now = yield* nowSeconds
  const key = yield* keys.retire(kid, now)
  const signer = yield* keys.current(now).pipe(
    Effect.as(true),
    Effect.catchTag("NoSigningKey", () => Effect.succeed(false)),
  )
  if (signer) return { key }
  const replacement = yield* Effect.promise(() => generateSigningKey(policy.algorithm, now))
  yield* keys.add(replacement).pipe(Effect.catchTag("KeyAlreadyExists", (e) => Effect.die(e)))
  return { key, replacement: replacement.kid }
})

/**
 * Starts a rotation now (see `KeyRotation.rotate`): the new key is published at once and signs after
 * `publishAhead`.
 *
 * @see {@link https://openid.net/specs/openid-connect-core-1_0.html#RotateSigKeys | OpenID Connect Core §10.1.1}
 */
export const rotateKey = (policy: RotationPolicy) =>
  Effect.flatMap(nowSeconds, (now) => rotate(policy, now)).pipe(Effect.withSpan("Administration.rotateKey"))
