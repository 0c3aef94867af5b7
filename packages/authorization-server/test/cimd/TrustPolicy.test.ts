import { Effect } from "effect"
import { describe, expect, it } from "vitest"
import { TrustPolicy } from "../../src/cimd/index.js"

const evaluate = (layer: ReturnType<typeof TrustPolicy.ClientTrustPolicy.layer>, clientId: string) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const policy = yield* TrustPolicy.ClientTrustPolicy
      return yield* policy.evaluate(clientId)
    }).pipe(Effect.provide(layer)),
  )

describe("TrustPolicy.matchesDomain", () => {
  it.each([
    ["app.example.com", "app.example.com", true],
    ["APP.Example.com", "app.example.com", true],
    ["app.example.com.", "app.example.com", true],
    ["app.example.com", "example.com", false],
    ["example.com", "*.example.com", false],
    ["app.example.com", "*.example.com", true],
    ["a.b.example.com", "*.example.com", true],
    ["badexample.com", "*.example.com", false],
    ["example.com.evil.test", "example.com", false],
  ])("%s against %s -> %s", (host, pattern, expected) => {
    expect(TrustPolicy.matchesDomain(host, pattern)).toBe(expected)
  })
})

describe("ClientTrustPolicy", () => {
  it("accepts any https client ID, unverified, by default", async () => {
    expect(await evaluate(TrustPolicy.ClientTrustPolicy.layerAcceptAny, "https://App.Example.com/client.json")).toEqual(
      {
        allowed: true,
        verified: false,
        host: "app.example.com",
      },
    )
  })

  it("with an allow-list only, accepts and verifies listed hosts and refuses others", async () => {
    const layer = TrustPolicy.ClientTrustPolicy.layer({ allow: ["*.trusted.example", "tool.example.org"] })
    expect(await evaluate(layer, "https://a.trusted.example/c")).toEqual({
      allowed: true,
      verified: true,
      host: "a.trusted.example",
    })
    expect(await evaluate(layer, "https://tool.example.org/c")).toEqual({
      allowed: true,
      verified: true,
      host: "tool.example.org",
    })
    expect(await evaluate(layer, "https://other.example/c")).toEqual({
      allowed: false,
      verified: false,
      host: "other.example",
    })
  })

  it("with an allow-list and acceptAnyHttps, accepts others as unverified", async () => {
    const layer = TrustPolicy.ClientTrustPolicy.layer({ allow: ["*.trusted.example"], acceptAnyHttps: true })
    expect(await evaluate(layer, "https://x.trusted.example/c")).toMatchObject({ allowed: true, verified: true })
    expect(await evaluate(layer, "https://other.example/c")).toEqual({
      allowed: true,
      verified: false,
      host: "other.example",
    })
  })

  it("the deny-list wins over the allow-list", async () => {
    const layer = TrustPolicy.ClientTrustPolicy.layer({
      allow: ["*.example.com"],
      deny: ["bad.example.com"],
      acceptAnyHttps: true,
    })
    expect(await evaluate(layer, "https://bad.example.com/c")).toEqual({
      allowed: false,
      verified: false,
      host: "bad.example.com",
    })
    expect(await evaluate(layer, "https://good.example.com/c")).toMatchObject({ allowed: true, verified: true })
  })

  it("a custom function decides; it cannot verify a client it refuses", async () => {
    const seen: Array<unknown> = []
    const layer = TrustPolicy.ClientTrustPolicy.layerFunction(async (input) => {
      seen.push(input)
      return { allowed: input.host.endsWith(".good.example"), verified: true }
    })
    expect(await evaluate(layer, "https://a.good.example/c")).toEqual({
      allowed: true,
      verified: true,
      host: "a.good.example",
    })
    expect(await evaluate(layer, "https://evil.example/c")).toEqual({
      allowed: false,
      verified: false,
      host: "evil.example",
    })
    expect(seen).toEqual([
      { clientId: "https://a.good.example/c", host: "a.good.example" },
      { clientId: "https://evil.example/c", host: "evil.example" },
    ])
  })
})
