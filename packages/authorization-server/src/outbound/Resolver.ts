/**
 * Host-name resolution for outbound fetches, as a service: production resolves through the operating system
 * (`node:dns` `lookup`, every address), tests map names to addresses without a network.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.6 | draft-ietf-oauth-client-id-metadata-document-02 §8.6 (SSRF)}
 * @module
 */
import { lookup } from "node:dns/promises"
import { isIP } from "node:net"
import { Context, Effect, Layer, Schema } from "effect"

/**
 * One address a host name resolves to.
 *
 * @see {@link https://nodejs.org/api/dns.html#dnspromiseslookuphostname-options | Node.js dns.lookup}
 */
export interface ResolvedAddress {
  readonly address: string
  readonly family: 4 | 6
}

/**
 * The host name could not be resolved (no such name, no address, resolver failure).
 *
 * @see {@link https://nodejs.org/api/dns.html#error-codes | Node.js DNS error codes}
 */
export class ResolveFailed extends Schema.TaggedError<ResolveFailed>()("ResolveFailed", {
  hostname: Schema.String,
  message: Schema.String,
}) {}

/**
 * The shape of the {@link Resolver} service.
 *
 * @see {@link https://nodejs.org/api/dns.html#dnspromiseslookuphostname-options | Node.js dns.lookup}
 */
export interface ResolverService {
  readonly lookup: (hostname: string) => Effect.Effect<ReadonlyArray<ResolvedAddress>, ResolveFailed>
}

/**
 * Resolves a host name to every address it has. The outbound guard checks all of them and connects to one, so a
 * name that also resolves to a private address is refused even if a public one comes first.
 *
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.6 | draft-ietf-oauth-client-id-metadata-document-02 §8.6}
 */
export class Resolver extends Context.Service<Resolver, ResolverService>()("@keyway/authorization-server/Resolver") {
  /**
   * The operating system's resolver as a plain value (`dns.lookup` with `all: true`, addresses in the order it
   * returns them), for code outside a layer.
   *
   * @see {@link https://nodejs.org/api/dns.html#dnspromiseslookuphostname-options | Node.js dns.lookup}
   */
  static readonly system: ResolverService = {
    lookup: (hostname) =>
      Effect.tryPromise({
        try: () => lookup(hostname, { all: true, order: "verbatim" }),
        catch: (error) =>
          new ResolveFailed({
            hostname,
            message: `could not resolve ${hostname}: ${(error as { code?: string }).code ?? String(error)}`,
          }),
      }).pipe(
        Effect.map((entries) =>
          entries.map((e): ResolvedAddress => ({ address: e.address, family: e.family === 6 ? 6 : 4 })),
        ),
      ),
  }

  /**
   * The operating system's resolver ({@link Resolver.system}).
   *
   * @see {@link https://nodejs.org/api/dns.html#dnspromiseslookuphostname-options | Node.js dns.lookup}
   */
  static readonly layer: Layer.Layer<Resolver> = Layer.succeed(Resolver, Resolver.system)

  /**
   * A fixed table of names to addresses, for tests: no network, and the test decides what each name resolves to.
   * A name missing from the table fails like an unknown name (`ENOTFOUND`). Names are matched case-insensitively.
   *
   * @see {@link https://nodejs.org/api/dns.html#error-codes | Node.js DNS error codes}
   */
  static readonly layerMap = (table: Readonly<Record<string, ReadonlyArray<string>>>): Layer.Layer<Resolver> =>
    Layer.succeed(Resolver, Resolver.fromMap(table))

  /**
   * The service behind {@link Resolver.layerMap}, for tests that wrap it (for example to count look-ups).
   *
   * @see {@link https://nodejs.org/api/dns.html#error-codes | Node.js DNS error codes}
   */
  static readonly fromMap = (table: Readonly<Record<string, ReadonlyArray<string>>>): ResolverService => {
    const entries = new Map(Object.entries(table).map(([name, addresses]) => [name.toLowerCase(), addresses]))
    return Resolver.of({
      lookup: (hostname) => {
        const addresses = entries.get(hostname.toLowerCase())
        if (addresses === undefined || addresses.length === 0) {
          return Effect.fail(new ResolveFailed({ hostname, message: `could not resolve ${hostname}: ENOTFOUND` }))
        }
        return Effect.succeed(addresses.map((address) => ({ address, family: isIP(address) === 6 ? 6 : 4 })))
      },
    })
  }
}
