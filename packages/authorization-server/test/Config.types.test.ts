// The option types are derived from the zod schemas (`z.input`); these assertions pin what the derivation gives, so
// a schema change that would change what users can write fails the typecheck. They are checked by tsc (the package's
// typecheck target); at run time `expectTypeOf` does nothing.
import { describe, expectTypeOf, it } from "vitest"
import type {
  BackoffOptions,
  ClientIdMetadataDocumentOptions,
  ClientOptions,
  ConfigOptions,
  GrantType,
  RateLimitOptions,
  ResolvedConfig,
  ResolvedSigningKeys,
  ResourceOptions,
  SigningKeyOptions,
  TokenEndpointAuthMethod,
  TokenLifetimes,
  UserOptions,
  WindowLimitOptions,
} from "../src/Config.js"
import { defaults } from "../src/Config.js"
import type { PolicyFunction, PolicyOptions } from "../src/cimd/TrustPolicy.js"
import type { AuthorizationServerExtension } from "../src/Extension.js"
import type { Options as OutboundOptions } from "../src/outbound/OutboundFetch.js"
import type { SubjectSource, UpstreamOptions } from "../src/proxy/UpstreamProvider.js"

// The same type up to `readonly` on properties (which does not change what is assignable): the option types are
// read-only at their top level only.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false

describe("configuration types", () => {
  it("takes the resources, users and clients users wrote as read-only data", () => {
    expectTypeOf<Same<ConfigOptions["resources"], ReadonlyArray<ResourceOptions>>>().toEqualTypeOf<true>()
    expectTypeOf<Same<ConfigOptions["users"], ReadonlyArray<UserOptions> | undefined>>().toEqualTypeOf<true>()
    expectTypeOf<Same<ConfigOptions["clients"], ReadonlyArray<ClientOptions> | undefined>>().toEqualTypeOf<true>()
    // What the hand-written types accepted (read-only arrays and records, no explicit undefined) is still accepted.
    expectTypeOf<{
      readonly uri: string
      readonly name?: string
      readonly scopes: Readonly<Record<string, string>>
    }>().toExtend<ResourceOptions>()
    expectTypeOf<{
      readonly clientId: string
      readonly clientName?: string
      readonly redirectUris: ReadonlyArray<string>
      readonly tokenEndpointAuthMethod?: TokenEndpointAuthMethod
      readonly clientSecret?: string
      readonly jwks?: { readonly keys: ReadonlyArray<Record<string, unknown>> }
      readonly scope?: string
      readonly grantTypes?: ReadonlyArray<GrantType>
    }>().toExtend<ClientOptions>()
    expectTypeOf<ResourceOptions["scopes"]>().toEqualTypeOf<Record<string, string>>()
    expectTypeOf<ClientOptions["grantTypes"]>().toEqualTypeOf<ReadonlyArray<GrantType> | undefined>()
    expectTypeOf<TokenEndpointAuthMethod>().toEqualTypeOf<
      "none" | "client_secret_basic" | "client_secret_post" | "private_key_jwt"
    >()
  })

  it("types optional members as exact: one that is given has a value", () => {
    // With exactOptionalPropertyTypes, an explicit undefined is not written in TypeScript (validation still takes it
    // as left out), so options spread over the defaults leave no member undefined.
    expectTypeOf<{
      readonly uri: string
      readonly name: undefined
      readonly scopes: Record<string, string>
    }>().not.toExtend<ResourceOptions>()
    const withDefaults = (keys: SigningKeyOptions) => ({ ...defaults.signingKeys, ...keys })
    expectTypeOf(withDefaults).returns.toExtend<ResolvedSigningKeys>()
    expectTypeOf<{ readonly enabled: undefined }>().not.toExtend<ClientIdMetadataDocumentOptions>()
  })

  it("keeps the member types of the data options", () => {
    expectTypeOf<ConfigOptions["issuer"]>().toEqualTypeOf<string>()
    expectTypeOf<TokenLifetimes["unusedRegistration"]>().toEqualTypeOf<number | false | undefined>()
    expectTypeOf<SigningKeyOptions["rotateEvery"]>().toEqualTypeOf<number | false | undefined>()
    expectTypeOf<Same<ConfigOptions["rateLimits"], RateLimitOptions | false | undefined>>().toEqualTypeOf<true>()
    expectTypeOf<Same<RateLimitOptions["token"], WindowLimitOptions | false | undefined>>().toEqualTypeOf<true>()
    expectTypeOf<
      Same<Exclude<RateLimitOptions["login"], false | undefined>["account"], BackoffOptions | false | undefined>
    >().toEqualTypeOf<true>()
    expectTypeOf<ResolvedSigningKeys>().toEqualTypeOf<{
      readonly rotateEvery: number | false
      readonly publishAhead: number
      readonly checkEvery: number
      readonly clockSkew: number
    }>()
  })

  it("keeps the exact types of the options a schema only passes through", () => {
    expectTypeOf<ConfigOptions["warn"]>().toEqualTypeOf<((message: string) => void) | undefined>()
    expectTypeOf<RateLimitOptions["clientAddress"]>().toEqualTypeOf<
      ((request: Request) => string | undefined) | undefined
    >()
    expectTypeOf<ResolvedConfig["rateLimits"]["clientAddress"]>().toEqualTypeOf<RateLimitOptions["clientAddress"]>()
    expectTypeOf<ConfigOptions["extensions"]>().toEqualTypeOf<ReadonlyArray<AuthorizationServerExtension> | undefined>()
    expectTypeOf<Same<ConfigOptions["upstream"], UpstreamOptions | undefined>>().toEqualTypeOf<true>()
    expectTypeOf<UpstreamOptions["subjectFrom"]>().toEqualTypeOf<SubjectSource | undefined>()
    expectTypeOf<ClientIdMetadataDocumentOptions["trust"]>().toEqualTypeOf<PolicyOptions | PolicyFunction | undefined>()
    expectTypeOf<ClientIdMetadataDocumentOptions["outbound"]>().toEqualTypeOf<OutboundOptions | undefined>()
    // The resolver's own options (cache bounds, back-off) sit beside the switches.
    expectTypeOf<ClientIdMetadataDocumentOptions["maxEntries"]>().toEqualTypeOf<number | undefined>()
  })
})
