import type { ClientConfig, Extension } from "@keyway/client"
import { AuthError } from "@keyway/client"
import { ClientAuth, Grant, Options, type Wire } from "@keyway/core"
import { Effect } from "effect"
import { calculateJwkThumbprint, exportJWK, importPKCS8 } from "jose"

/**
 * A private key for `private_key_jwt` (RFC 7523 §2.2): a `CryptoKey`, or a PKCS #8 PEM string (then `alg` is
 * required, since PEM does not say which algorithm the key is for).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc7523.html#section-2.2 | RFC 7523 §2.2}
 */
export interface PrivateKeyOption {
  readonly key: CryptoKey | string
  /**
   * The JWS algorithm (asymmetric only). When omitted for a `CryptoKey`, the first algorithm of the server's
   * `token_endpoint_auth_signing_alg_values_supported` that the key can sign with.
   */
  readonly alg?: string
  /** The key ID sent as `kid`; the key's JWK thumbprint (RFC 7638) when omitted and the key is extractable. */
  readonly kid?: string
}

/**
 * A secret-based client-authentication method: core's `ClientAuth.SecretMethod`, under the name this package has
 * always exported.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6749.html#section-2.3.1 | RFC 6749 §2.3.1}
 */
export type SecretMethod = ClientAuth.SecretMethod

/**
 * Options of {@link clientCredentials}.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/oauth-client-credentials.mdx | MCP OAuth client credentials extension}
 */
export interface ClientCredentialsOptions {
  /**
   * The authorization server these credentials were issued by: its issuer identifier, or a function deciding for an
   * issuer discovery found. Credentials are never sent to another server (a protected resource could name any
   * authorization server in its metadata, and a secret sent there is a secret given away).
   */
  readonly issuer: string | ((issuer: string) => boolean)
  readonly clientId: string
  /** The client secret, for `client_secret_basic` or `client_secret_post`. */
  readonly clientSecret?: string
  /** The private key, for `private_key_jwt` (RECOMMENDED by the extension; preferred when the server supports it). */
  readonly privateKey?: PrivateKeyOption
  /**
   * The method to use, instead of choosing from the server's `token_endpoint_auth_methods_supported` (it must still
   * be listed there).
   */
  readonly method?: "private_key_jwt" | SecretMethod
  /**
   * The `aud` of `private_key_jwt` assertions: the authorization server's issuer (the default, RFC 7523 §3) or its
   * token endpoint URL, for servers that want that.
   */
  readonly assertionAudience?: "issuer" | "token_endpoint"
  /**
   * Whether a 403 `insufficient_scope` is answered by requesting a token for the held and the challenged scopes
   * together (within the client's step-up limit); false by default, when it is the typed failure
   * `step-up`/`insufficient-scope`.
   */
  readonly stepUp?: boolean
}

const ALGORITHM_OF_CURVE: Readonly<Record<string, string>> = { "P-256": "ES256", "P-384": "ES384", "P-521": "ES512" }

/** The JWS algorithms a `CryptoKey` can sign with, in the order of preference. */
const algorithmsOf = (key: CryptoKey): ReadonlyArray<string> => {
  const algorithm = key.algorithm as { name: string; namedCurve?: string; hash?: { name: string } }
  const bits = algorithm.hash?.name.replace("SHA-", "")
  switch (algorithm.name) {
    case "ECDSA":
      return [ALGORITHM_OF_CURVE[algorithm.namedCurve ?? ""] ?? ""].filter((a) => a !== "")
    case "RSASSA-PKCS1-v1_5":
      return bits === undefined ? [] : [`RS${bits}`]
    case "RSA-PSS":
      return bits === undefined ? [] : [`PS${bits}`]
    case "Ed25519":
      return ["EdDSA"]
    default:
      return []
  }
}

/**
 * The client-authentication method to use with a server: the one asked for, else `private_key_jwt` when a key is
 * given and the server lists it, else `client_secret_basic` or `client_secret_post` for a secret, whichever the server
 * lists first in that order. A server without `token_endpoint_auth_methods_supported` supports `client_secret_basic`
 * (RFC 8414 §2). Undefined when nothing given works with the server.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc8414.html#section-2 | RFC 8414 §2}
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/oauth-client-credentials.mdx | MCP OAuth client credentials extension (client authentication methods)}
 */
export const selectMethod = (
  supported: ReadonlyArray<string> | undefined,
  options: Pick<ClientCredentialsOptions, "clientSecret" | "privateKey" | "method">,
): "private_key_jwt" | SecretMethod | undefined =>
  ClientAuth.chooseMethod(supported, {
    secret: options.clientSecret !== undefined,
    privateKey: options.privateKey !== undefined,
    method: options.method,
  })

const fail = (url: string, message: string) =>
  Effect.fail(new AuthError.AuthError({ step: "token", reason: "invalid-input", url, message }))

/** The signing key for this server: imported, its algorithm agreed with the server, its `kid` known when it can be. */
const signingKey = (
  option: PrivateKeyOption,
  metadata: Wire.AuthorizationServerMetadata,
  url: string,
): Effect.Effect<ClientConfig.PrivateKeyJwt, AuthError.AuthError> =>
  Effect.gen(function* () {
    const listed = metadata.token_endpoint_auth_signing_alg_values_supported
    const allowed = (alg: string) =>
      Grant.ASYMMETRIC_ALGORITHMS.includes(alg) && (listed === undefined || listed.includes(alg))
    let key: CryptoKey
    let alg: string
    if (typeof option.key === "string") {
      if (option.alg === undefined) {
        return yield* fail(url, "privateKey: a PEM key needs alg (for example ES256), since PEM does not say")
      }
      alg = option.alg
      const pem = option.key
      key = yield* Effect.tryPromise({
        try: () => importPKCS8(pem, alg, { extractable: true }),
        catch: (e) =>
          new AuthError.AuthError({
            step: "token",
            reason: "invalid-input",
            url,
            message: `privateKey: not a PKCS #8 PEM private key for ${alg}: ${(e as Error).message}`,
          }),
      })
    } else {
      key = option.key
      const candidates = option.alg === undefined ? algorithmsOf(key) : [option.alg]
      const chosen = (listed ?? candidates).find((a) => candidates.includes(a) && allowed(a))
      if (chosen === undefined) {
        return yield* fail(
          url,
          `privateKey: the key signs with ${candidates.join(", ") || "no JWS algorithm"}, but ${url} accepts ${listed?.join(", ") ?? "any"} for private_key_jwt (asymmetric algorithms only)`,
        )
      }
      alg = chosen
    }
    if (!allowed(alg)) {
      return yield* fail(
        url,
        `privateKey: ${alg} cannot be used: ${Grant.ASYMMETRIC_ALGORITHMS.includes(alg) ? `the server accepts ${listed?.join(", ")}` : "only asymmetric algorithms may sign client assertions"}`,
      )
    }
    let kid = option.kid
    if (kid === undefined && key.extractable) {
      kid = yield* Effect.promise(() => exportJWK(key).then((jwk) => calculateJwkThumbprint(jwk)))
    }
    return { key, alg, ...(kid === undefined ? {} : { kid }) }
  })

/**
 * The client credentials extension for `@keyway/client`: tokens for MCP servers are obtained with
 * `grant_type=client_credentials`, `resource` and the selected `scope`, authenticating with the pre-registered
 * credentials (never dynamic registration, even when the server offers it), and obtained again before they expire.
 *
 * @example
 * ```ts
 * const auth = createAuthClient({
 *   extensions: [clientCredentials({ issuer: "https://auth.example.com", clientId: "reporter", clientSecret })],
 * })
 * const response = await auth.fetch("https://mcp.example.com/mcp", { method: "POST", body })
 * ```
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/oauth-client-credentials.mdx | MCP OAuth client credentials extension}
 * @see {@link https://datatracker.ietf.org/doc/html/draft-ietf-oauth-v2-1-13#section-4.2 | OAuth 2.1 §4.2}
 */
export const clientCredentials = (options: ClientCredentialsOptions): Extension.ClientExtension => {
  if (options.clientSecret === undefined && options.privateKey === undefined) {
    throw Options.invalid("clientCredentials", "", "give clientSecret, privateKey or both")
  }
  const trusts = typeof options.issuer === "string" ? (i: string) => i === options.issuer : options.issuer
  return {
    id: Grant.extensions.clientCredentials,
    strategy: {
      unattended: true,
      stepUp: options.stepUp ?? false,
      acquire: (context) =>
        Effect.gen(function* () {
          const { server } = context
          const url = server.metadata.token_endpoint ?? server.issuer
          if (!trusts(server.issuer)) {
            return yield* new AuthError.AuthError({
              step: "token",
              reason: "issuer-mismatch",
              url: server.issuer,
              message: `${context.serverUrl} uses the authorization server ${server.issuer}, but the client credentials of ${options.clientId} belong to ${typeof options.issuer === "string" ? options.issuer : "another server"}; they are not sent there`,
            })
          }
          const method = selectMethod(server.metadata.token_endpoint_auth_methods_supported, options)
          if (method === undefined) {
            const listed = server.metadata.token_endpoint_auth_methods_supported ?? ["client_secret_basic"]
            return yield* fail(
              url,
              `${server.issuer} accepts ${listed.join(", ")} at its token endpoint, but ${options.clientId} has ${[
                options.privateKey === undefined ? "" : "a private key",
                options.clientSecret === undefined ? "" : "a secret",
              ]
                .filter((s) => s !== "")
                .join(" and ")}${options.method === undefined ? "" : ` and asks for ${options.method}`}`,
            )
          }
          const privateKey =
            method === "private_key_jwt" && options.privateKey !== undefined
              ? yield* signingKey(options.privateKey, server.metadata, url)
              : undefined
          const body = new URLSearchParams({ grant_type: Grant.CLIENT_CREDENTIALS, resource: context.resource })
          if (context.scope !== undefined) body.set("scope", context.scope)
          const response = yield* context.tokenRequest(body, {
            client: {
              issuer: server.issuer,
              client_id: options.clientId,
              token_endpoint_auth_method: method,
              ...(method === "private_key_jwt" || options.clientSecret === undefined
                ? {}
                : { client_secret: options.clientSecret }),
            },
            ...(privateKey === undefined ? {} : { privateKey }),
            ...(options.assertionAudience === undefined ? {} : { assertionAudience: options.assertionAudience }),
          })
          return {
            response,
            clientId: options.clientId,
            ...(context.scope === undefined ? {} : { requestedScope: context.scope }),
          }
        }),
    },
  }
}
