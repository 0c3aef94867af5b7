import { Wire } from "@keyway/core"
import { Context, Effect, Layer, Result } from "effect"
import {
  ClientMetadataError,
  type ClientMetadataResolverService,
  isClientIdUrl,
  type ResolvedClient,
} from "../cimd/ClientMetadataResolver.js"
import type { TrustDecision } from "../cimd/TrustPolicy.js"
import type { AuthorizationServerExtension } from "../Extension.js"
import type { StorageError } from "../storage/Errors.js"
import { type Client, ClientStore } from "../storage/Storage.js"
import { nowSeconds } from "./clock.js"
import { declaredFields } from "./extensionMetadata.js"

/**
 * Resolution of URL client IDs (client ID metadata documents) as the endpoints see it; `resolve` is absent when the
 * feature is off, and URL client IDs are then unknown clients like any other.
 */
export class MetadataDocuments extends Context.Service<
  MetadataDocuments,
  {
    readonly resolve:
      | ((clientId: string, now: number) => Effect.Effect<ResolvedClient, ClientMetadataError>)
      | undefined
    /** The keys at a client's `jwks_uri` (same guard and cache rules); absent when the feature is off. */
    readonly jwks?: ClientMetadataResolverService["jwks"]
  }
>()("@keyway/authorization-server/internal/MetadataDocuments") {
  static readonly disabled: Layer.Layer<MetadataDocuments> = Layer.succeed(
    MetadataDocuments,
    MetadataDocuments.of({ resolve: undefined }),
  )
}

/**
 * The service with the client metadata fields the extensions declare added to every resolved client, validated by
 * their schemas (the resolver keeps a document's RFC 7591 members only). A value a schema refuses makes the document
 * unusable, as any other broken rule does (`invalid_client`, naming the field).
 */
export const withExtensionMetadata = (
  documents: MetadataDocuments["Service"],
  extensions: ReadonlyArray<AuthorizationServerExtension>,
): MetadataDocuments["Service"] => {
  const { resolve } = documents
  if (resolve === undefined || !extensions.some((e) => e.clientMetadata !== undefined)) return documents
  return MetadataDocuments.of({
    ...documents,
    resolve: (clientId, now) =>
      Effect.flatMap(resolve(clientId, now), (resolved) => {
        const declared = declaredFields(resolved.document, extensions)
        if (Result.isFailure(declared)) {
          const { path, problem } = declared.failure
          return Effect.fail(
            new ClientMetadataError({
              error: "invalid_client",
              reason: "document",
              client_id: clientId,
              path,
              message: Wire.invalid(Wire.Documents.clientIdMetadataDocument, path, problem).message,
            }),
          )
        }
        const fields = declared.success
        return Effect.succeed(
          fields === undefined ? resolved : { ...resolved, client: { ...resolved.client, extension_metadata: fields } },
        )
      }),
  })
}

/** A client found by {@link findClient}; `trust` is set for a client ID metadata document client. */
export interface FoundClient {
  readonly client: Client
  readonly trust?: TrustDecision
}

/**
 * The one place the authorization, token, revocation and introspection endpoints look a client up; `undefined` when
 * it is unknown. A stored client wins; otherwise a URL client ID is resolved through its metadata document, whose
 * failures (`ClientMetadataError`) the caller shows as they are, never at the client's redirect URI.
 */
export const findClient = (
  clientId: string,
): Effect.Effect<FoundClient | undefined, StorageError | ClientMetadataError, ClientStore | MetadataDocuments> =>
  Effect.gen(function* () {
    const clients = yield* ClientStore
    const now = yield* nowSeconds
    const stored = yield* clients
      .get(clientId, now)
      .pipe(Effect.catchTag("ClientNotFound", () => Effect.succeed(undefined)))
    if (stored !== undefined) return { client: stored }
    const { resolve } = yield* MetadataDocuments
    if (resolve === undefined || !isClientIdUrl(clientId)) return undefined
    const resolved = yield* resolve(clientId, now)
    return { client: resolved.client, trust: resolved.trust }
  })
