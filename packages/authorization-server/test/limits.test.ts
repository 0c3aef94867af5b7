import { ClientAuth } from "@keyway/core"
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
  const request = (headers: Record<string, string> = {}) =>
    new Request("https://as.example.com/token", { method: "POST", headers })
  const form = (body: string) => new Map(new URLSearchParams(body))
  const assertion = (claims: object) =>
    `${Buffer.from('{"alg":"none"}').toString("base64url")}.${Buffer.from(JSON.stringify(claims)).toString("base64url")}.`

  it("prefers Basic credentials, then a client assertion's sub (or iss), then client_id", () => {
    const basic = request({ authorization: ClientAuth.encodeClientSecretBasic("basic-id", "secret") })
    expect(claimedClient(basic, form("client_id=body-id"))).toBe("basic-id")
    const withAssertion = form(`client_id=body-id&client_assertion=${assertion({ sub: "sub-id", iss: "iss-id" })}`)
    expect(claimedClient(request(), withAssertion)).toBe("sub-id")
    expect(claimedClient(request(), form(`client_assertion=${assertion({ iss: "iss-id" })}`))).toBe("iss-id")
    expect(claimedClient(request(), form("client_assertion=not-a-jwt&client_id=body-id"))).toBe("body-id")
    expect(claimedClient(request(), form("client_id=-body-id"))).toBe("-body-id")
  })

  it("claims nothing for no client, an empty client_id or malformed Basic credentials", () => {
    expect(claimedClient(request(), form("grant_type=refresh_token"))).toBeUndefined()
    expect(claimedClient(request(), form("client_id="))).toBeUndefined()
    expect(claimedClient(request({ authorization: "Basic %%%" }), form("client_id=body-id"))).toBeUndefined()
  })
})
