import { ClientAuth } from "@keyway/core"
import { Body, PayloadTooLarge } from "@keyway/http"
import { describe, expect, it } from "vitest"
import { addressBucket, claimedClient, waitText } from "../src/internal/limits.js"

describe("addressBucket", () => {
  it.each([
    ["192.0.2.1", "192.0.2.1"],
    ["::ffff:192.0.2.1", "192.0.2.1"],
    ["::FFFF:192.0.2.1", "192.0.2.1"],
    ["2001:db8::1", "2001:db8:0:0::/64"],
    ["2001:0db8:0001:0002:0000:0000:0000:0001", "2001:db8:1:2::/64"],
    ["2001:db8:1:2:ffff:ffff:ffff:ffff", "2001:db8:1:2::/64"],
    ["::1", "0:0:0:0::/64"],
    ["fe80::1%eth0", "fe80:0:0:0::/64"],
    ["not an address", "not an address"],
  ])("%s counts as %s", (address, expected) => {
    expect(addressBucket(address)).toBe(expected)
  })
})

describe("waitText", () => {
  it.each([
    [0, "1 second"],
    [1, "1 second"],
    [59, "59 seconds"],
    [60, "1 minute"],
    [61, "2 minutes"],
    [7199, "120 minutes"],
    [7200, "2 hours"],
    [7201, "3 hours"],
  ])("%i s reads %s", (seconds, text) => {
    expect(waitText(seconds)).toBe(text)
  })
})

describe("claimedClient", () => {
  const form = (body: string, headers: Record<string, string> = {}) =>
    new Request("https://as.example.com/token", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
      body,
    })
  const assertion = (claims: object) =>
    `${Buffer.from('{"alg":"none"}').toString("base64url")}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.`

  it("prefers Basic credentials, then a client assertion's sub (or iss), then client_id; the body stays readable", async () => {
    const basic = form("client_id=body-id", { authorization: ClientAuth.encodeClientSecretBasic("basic-id", "secret") })
    expect(await claimedClient(basic, 1000)).toBe("basic-id")
    const withAssertion = form(`client_id=body-id&client_assertion=${assertion({ sub: "sub-id", iss: "iss-id" })}`)
    expect(await claimedClient(withAssertion, 1000)).toBe("sub-id")
    expect(await withAssertion.text()).toContain("client_id=body-id")
    expect(await claimedClient(form(`client_assertion=${assertion({ iss: "iss-id" })}`), 1000)).toBe("iss-id")
    expect(await claimedClient(form("client_assertion=not-a-jwt&client_id=body-id"), 1000)).toBe("body-id")
    expect(await claimedClient(form("client_id=body-id"), 1000)).toBe("body-id")
  })

  it("claims nothing for no client, a duplicate parameter, a body over the limit or another media type", async () => {
    expect(await claimedClient(form("grant_type=refresh_token"), 1000)).toBeUndefined()
    expect(await claimedClient(form("client_id=a&client_id=b"), 1000)).toBeUndefined()
    expect(await claimedClient(form(`client_id=${"a".repeat(100)}`), 50)).toBeUndefined()
    const json = new Request("https://as.example.com/token", { method: "POST", body: '{"client_id":"a"}' })
    expect(await claimedClient(json, 1000)).toBeUndefined()
    expect(await claimedClient(form(new Uint8Array([0x63, 0x3d, 0xff]) as never), 1000)).toBeUndefined()
  })

  it("past the limit of a streamed body, neither the claim nor the endpoint's own read of the body hangs", async () => {
    const chunk = new TextEncoder().encode(`client_id=${"a".repeat(100)}`)
    const streamed = new Request("https://as.example.com/token", {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new ReadableStream({
        start(controller) {
          controller.enqueue(chunk)
          controller.enqueue(chunk)
          controller.close()
        },
      }),
      duplex: "half",
    } as RequestInit)
    expect(await claimedClient(streamed, 150)).toBeUndefined()
    await expect(Body.readText(streamed, 150)).rejects.toBeInstanceOf(PayloadTooLarge)
  })
})
