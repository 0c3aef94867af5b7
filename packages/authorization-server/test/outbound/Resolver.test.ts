import { Effect, Layer, Result } from "effect"
import { describe, expect, it } from "vitest"
import { Address, OutboundFetch, Resolver } from "../../src/outbound/index.js"

const lookup = (layer: Layer.Layer<Resolver.Resolver>, hostname: string) =>
  Effect.runPromise(
    Effect.gen(function* () {
      const resolver = yield* Resolver.Resolver
      return yield* resolver.lookup(hostname)
    }).pipe(Effect.provide(layer), Effect.result),
  )

describe("Resolver", () => {
  it("the system resolver returns every address of localhost, all loopback", async () => {
    const addresses = Result.getOrThrow(await lookup(Resolver.Resolver.layer, "localhost"))
    expect(addresses.length).toBeGreaterThan(0)
    for (const { address, family } of addresses) {
      expect(Address.isLoopback(address)).toBe(true)
      expect(family).toBe(address.includes(":") ? 6 : 4)
    }
  })

  it("the production guard over the system resolver refuses localhost", async () => {
    const result = await Effect.runPromise(
      Effect.gen(function* () {
        const outbound = yield* OutboundFetch.OutboundFetch
        return yield* outbound.fetchJson("https://localhost/client.json")
      }).pipe(
        Effect.provide(OutboundFetch.OutboundFetch.layer().pipe(Layer.provide(Resolver.Resolver.layer))),
        Effect.result,
      ),
    )
    if (Result.isSuccess(result)) throw new Error("expected a refusal")
    expect(result.failure.reason).toBe("address")
    expect([
      "refused https://localhost/client.json: address 127.0.0.1 of localhost is loopback (127.0.0.0/8)",
      "refused https://localhost/client.json: address ::1 of localhost is loopback (::1/128)",
    ]).toContain(result.failure.message)
  })

  it("a table maps names case-insensitively, with families, and fails unknown names like ENOTFOUND", async () => {
    const layer = Resolver.Resolver.layerMap({
      "Public.Example": ["93.184.215.14", "2606:2800:21f:cb07:6820:80da:af6b:8b2c"],
    })
    expect(Result.getOrThrow(await lookup(layer, "public.example"))).toEqual([
      { address: "93.184.215.14", family: 4 },
      { address: "2606:2800:21f:cb07:6820:80da:af6b:8b2c", family: 6 },
    ])
    const missing = await lookup(layer, "missing.example")
    if (Result.isSuccess(missing)) throw new Error("expected a failure")
    const { _tag, hostname, message } = missing.failure
    expect({ _tag, hostname, message }).toEqual({
      _tag: "ResolveFailed",
      hostname: "missing.example",
      message: "could not resolve missing.example: ENOTFOUND",
    })
  })
})
