// The configuration types are derived from the app's zod schemas (`z.input`); these assertions pin what the
// derivation gives, so a schema change that would change what a configuration can hold fails the typecheck. They are
// checked by tsc (the app's typecheck target); at run time `expectTypeOf` does nothing.
import type { Config, Upstream } from "@keyway/authorization-server"
import type { ClientCredentialsGrantOptions } from "@keyway/ext-client-credentials/authorization-server"
import type { DPoPServerOptions } from "@keyway/ext-dpop/authorization-server"
import type {
  IdentityAssertionGrantOptions,
  IdentityAssertionIssuerOptions,
} from "@keyway/ext-enterprise-managed/authorization-server"
import type { WorkloadIdentityOptions } from "@keyway/ext-workload-identity/authorization-server"
import { describe, expectTypeOf, it } from "vitest"
import type {
  AppConfig,
  ClientConfig,
  DevelopmentConfig,
  EnterpriseManagedConfig,
  ExtensionsConfig,
  MetricsConfig,
  RateLimitsConfig,
  TracingConfig,
  UpstreamConfig,
  UserConfig,
} from "../src/config.js"
import { parseConfig } from "../src/config.js"

// The same type up to `readonly` on properties (which does not change what is assignable).
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false

describe("app configuration types", () => {
  it("takes the library's members with the library's option types", () => {
    expectTypeOf<AppConfig["resources"]>().toEqualTypeOf<Config.ConfigOptions["resources"]>()
    expectTypeOf<AppConfig["clients"]>().toEqualTypeOf<Config.ConfigOptions["clients"]>()
    expectTypeOf<AppConfig["lifetimes"]>().toEqualTypeOf<Config.ConfigOptions["lifetimes"]>()
    expectTypeOf<AppConfig["signingKeys"]>().toEqualTypeOf<Config.ConfigOptions["signingKeys"]>()
    expectTypeOf<AppConfig["maintenance"]>().toEqualTypeOf<Config.ConfigOptions["maintenance"]>()
    expectTypeOf<AppConfig["sessionSecret"]>().toEqualTypeOf<Config.ConfigOptions["sessionSecret"]>()
    expectTypeOf<AppConfig["previousIssuer"]>().toEqualTypeOf<string | undefined>()
    expectTypeOf<AppConfig["registration"]>().toEqualTypeOf<boolean | undefined>()
    expectTypeOf<Same<ClientConfig, Config.ClientOptions>>().toEqualTypeOf<true>()
    expectTypeOf<Same<AppConfig["resources"], ReadonlyArray<Config.ResourceOptions>>>().toEqualTypeOf<true>()
  })

  it("types the app's own members", () => {
    expectTypeOf<AppConfig["issuer"]>().toEqualTypeOf<string | undefined>()
    expectTypeOf<AppConfig["host"]>().toEqualTypeOf<string | undefined>()
    expectTypeOf<AppConfig["port"]>().toEqualTypeOf<number | undefined>()
    expectTypeOf<AppConfig["dataDir"]>().toEqualTypeOf<string | undefined>()
    expectTypeOf<AppConfig["database"]>().toEqualTypeOf<string | undefined>()
    expectTypeOf<AppConfig["databaseSchema"]>().toEqualTypeOf<string | undefined>()
    expectTypeOf<AppConfig["auditLog"]>().toEqualTypeOf<string | undefined>()
    expectTypeOf<AppConfig["users"]>().toEqualTypeOf<ReadonlyArray<UserConfig> | undefined>()
    expectTypeOf<UserConfig>().toEqualTypeOf<{
      readonly username: string
      readonly displayName?: string
      readonly password?: string
      readonly passwordHash?: string
    }>()
    expectTypeOf<MetricsConfig>().toEqualTypeOf<{ readonly port: number; readonly host?: string }>()
    expectTypeOf<TracingConfig>().toEqualTypeOf<{ readonly otlpEndpoint: string; readonly serviceName?: string }>()
    expectTypeOf<Same<AppConfig["metrics"], MetricsConfig | undefined>>().toEqualTypeOf<true>()
    expectTypeOf<DevelopmentConfig>().toEqualTypeOf<{ readonly allowHttpLoopbackUpstream?: boolean }>()
  })

  it("types optional members as exact: one that is given has a value", () => {
    expectTypeOf<{ readonly resources: []; readonly port: undefined }>().not.toExtend<AppConfig>()
    expectTypeOf<{ readonly username: "a"; readonly password: undefined }>().not.toExtend<UserConfig>()
    expectTypeOf(parseConfig).returns.toEqualTypeOf<AppConfig>()
  })

  it("holds the data forms of the library's function-valued options", () => {
    expectTypeOf<UpstreamConfig["subjectFrom"]>().toEqualTypeOf<"id_token" | "access_token" | undefined>()
    expectTypeOf<
      Same<Omit<UpstreamConfig, "subjectFrom">, Omit<Upstream.UpstreamOptions, "subjectFrom">>
    >().toEqualTypeOf<true>()
    expectTypeOf<UpstreamConfig>().toExtend<Upstream.UpstreamOptions>()
    expectTypeOf<RateLimitsConfig["clientAddressHeader"]>().toEqualTypeOf<string | undefined>()
    expectTypeOf<
      Same<Omit<RateLimitsConfig, "clientAddressHeader">, Omit<Config.RateLimitOptions, "clientAddress">>
    >().toEqualTypeOf<true>()
    expectTypeOf<Same<AppConfig["rateLimits"], RateLimitsConfig | false | undefined>>().toEqualTypeOf<true>()
  })

  it("gives each extension options it takes", () => {
    expectTypeOf<NonNullable<ExtensionsConfig["clientCredentials"]>>().toExtend<ClientCredentialsGrantOptions>()
    expectTypeOf<NonNullable<ExtensionsConfig["dpop"]>>().toExtend<DPoPServerOptions>()
    expectTypeOf<NonNullable<ExtensionsConfig["workloadIdentity"]>>().toExtend<WorkloadIdentityOptions>()
    expectTypeOf<NonNullable<EnterpriseManagedConfig["identityProvider"]>>().toExtend<IdentityAssertionIssuerOptions>()
    expectTypeOf<
      NonNullable<EnterpriseManagedConfig["authorizationServer"]>
    >().toExtend<IdentityAssertionGrantOptions>()
    expectTypeOf<Same<AppConfig["extensions"], ExtensionsConfig | undefined>>().toEqualTypeOf<true>()
  })
})
