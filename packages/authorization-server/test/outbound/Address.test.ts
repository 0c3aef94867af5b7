import fc from "fast-check"
import { describe, expect, it } from "vitest"
import { Address } from "../../src/outbound/index.js"

// [address, kind, range] — one row per refused range (RFC 6890 and the IANA special-purpose registries).
const refused: ReadonlyArray<readonly [string, Address.RangeKind, string]> = [
  ["0.0.0.0", "this-network", "0.0.0.0/8"],
  ["0.1.2.3", "this-network", "0.0.0.0/8"],
  ["10.0.0.1", "private", "10.0.0.0/8"],
  ["100.64.0.1", "shared-address-space", "100.64.0.0/10"],
  ["100.127.255.254", "shared-address-space", "100.64.0.0/10"],
  ["127.0.0.1", "loopback", "127.0.0.0/8"],
  ["127.255.0.9", "loopback", "127.0.0.0/8"],
  ["169.254.169.254", "link-local", "169.254.0.0/16"],
  ["172.16.0.1", "private", "172.16.0.0/12"],
  ["172.31.255.255", "private", "172.16.0.0/12"],
  ["192.0.0.8", "reserved", "192.0.0.0/24"],
  ["192.0.2.10", "documentation", "192.0.2.0/24"],
  ["192.88.99.1", "reserved", "192.88.99.0/24"],
  ["192.168.1.1", "private", "192.168.0.0/16"],
  ["198.18.0.1", "benchmarking", "198.18.0.0/15"],
  ["198.19.255.1", "benchmarking", "198.18.0.0/15"],
  ["198.51.100.7", "documentation", "198.51.100.0/24"],
  ["203.0.113.9", "documentation", "203.0.113.0/24"],
  ["224.0.0.1", "multicast", "224.0.0.0/4"],
  ["239.255.255.250", "multicast", "224.0.0.0/4"],
  ["240.0.0.1", "reserved", "240.0.0.0/4"],
  ["255.255.255.255", "broadcast", "255.255.255.255/32"],
  ["::", "unspecified", "::/128"],
  ["::1", "loopback", "::1/128"],
  ["[::1]", "loopback", "::1/128"],
  ["::7f00:1", "ipv4-compatible", "::/96"],
  ["::8.8.8.8", "ipv4-compatible", "::/96"],
  ["64:ff9b:1::1", "reserved", "64:ff9b:1::/48"],
  ["100::1", "reserved", "100::/64"],
  ["2001::1", "reserved", "2001::/23"],
  ["2001:2::1", "benchmarking", "2001:2::/48"],
  ["2001:db8::1", "documentation", "2001:db8::/32"],
  ["3fff:0:1::1", "documentation", "3fff::/20"],
  ["5f00::1", "reserved", "5f00::/16"],
  ["fc00::1", "unique-local", "fc00::/7"],
  ["fd00::1", "unique-local", "fc00::/7"],
  ["fe80::1", "link-local", "fe80::/10"],
  ["fe80::1%eth0", "link-local", "fe80::/10"],
  ["febf::1", "link-local", "fe80::/10"],
  ["fec0::1", "site-local", "fec0::/10"],
  ["ff02::1", "multicast", "ff00::/8"],
  ["4000::1", "reserved", "outside 2000::/3"],
  ["::2", "ipv4-compatible", "::/96"],
]

// [address, embedded IPv4, via, prefix, kind, range]
const embedded: ReadonlyArray<readonly [string, string, Address.Embedding, string, Address.RangeKind, string]> = [
  ["::ffff:127.0.0.1", "127.0.0.1", "IPv4-mapped", "::ffff:0:0/96", "loopback", "127.0.0.0/8"],
  ["::ffff:7f00:1", "127.0.0.1", "IPv4-mapped", "::ffff:0:0/96", "loopback", "127.0.0.0/8"],
  ["::ffff:a9fe:a9fe", "169.254.169.254", "IPv4-mapped", "::ffff:0:0/96", "link-local", "169.254.0.0/16"],
  ["64:ff9b::7f00:1", "127.0.0.1", "NAT64", "64:ff9b::/96", "loopback", "127.0.0.0/8"],
  ["64:ff9b::10.0.0.1", "10.0.0.1", "NAT64", "64:ff9b::/96", "private", "10.0.0.0/8"],
  ["2002:c0a8:0101::1", "192.168.1.1", "6to4", "2002::/16", "private", "192.168.0.0/16"],
  ["2002:7f00:1::", "127.0.0.1", "6to4", "2002::/16", "loopback", "127.0.0.0/8"],
]

const allowed = [
  "8.8.8.8",
  "1.1.1.1",
  "93.184.215.14",
  "100.63.255.255",
  "100.128.0.0",
  "172.15.255.255",
  "172.32.0.0",
  "198.17.255.255",
  "198.20.0.0",
  "223.255.255.255",
  "2606:4700:4700::1111",
  "2a00:1450:4001:80e::200e",
  "::ffff:8.8.8.8",
  "64:ff9b::808:808",
  "2002:0808:0808::1",
]

describe("Address.classify", () => {
  it.each(refused)("refuses %s as %s (%s)", (address, kind, range) => {
    const refusal = Address.classify(address)
    expect(refusal).toEqual({ address: address.replace(/^\[|\]$/g, ""), kind, range })
  })

  it.each(embedded)("refuses %s by its embedded IPv4 %s (%s)", (address, inner, via, prefix, kind, range) => {
    expect(Address.classify(address)).toEqual({ address, kind, range, embedded: { address: inner, via, prefix } })
  })

  it.each(allowed)("allows the global address %s", (address) => {
    expect(Address.classify(address)).toBeUndefined()
  })

  it.each(["", "example.com", "1.2.3", "256.0.0.1", "1.2.3.4.5", "::g", "1:2:3:4:5:6:7:8:9", "01.2.3.4"])(
    "refuses %j as invalid",
    (input) => {
      expect(Address.classify(input)?.kind).toBe("invalid")
    },
  )

  it("describes refusals in words", () => {
    expect(Address.describe(Address.classify("127.0.0.1")!)).toBe("loopback (127.0.0.0/8)")
    expect(Address.describe(Address.classify("::ffff:127.0.0.1")!)).toBe(
      "loopback (127.0.0.0/8) embedded as 127.0.0.1 in an IPv4-mapped address (::ffff:0:0/96)",
    )
    expect(Address.describe(Address.classify("64:ff9b::7f00:1")!)).toBe(
      "loopback (127.0.0.0/8) embedded as 127.0.0.1 in a NAT64 address (64:ff9b::/96)",
    )
    expect(Address.describe(Address.classify("nonsense")!)).toBe("not an IP address")
  })

  const ipv4 = fc.tuple(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(255))
  const dotted = ([a, b, c, d]: readonly [number, number, number, number]) => `${a}.${b}.${c}.${d}`
  const hex = ([a, b, c, d]: readonly [number, number, number, number]) =>
    `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`

  it("judges IPv4-mapped and NAT64 forms exactly as the embedded IPv4 address", () => {
    fc.assert(
      fc.property(ipv4, (parts) => {
        const direct = Address.classify(dotted(parts))
        for (const form of [`::ffff:${dotted(parts)}`, `::ffff:${hex(parts)}`, `64:ff9b::${hex(parts)}`]) {
          const viaForm = Address.classify(form)
          expect(viaForm?.kind).toBe(direct?.kind)
          expect(viaForm?.range).toBe(direct?.range)
        }
      }),
    )
  })

  it("refuses every address of 10/8, 127/8 and fc00::/7", () => {
    fc.assert(
      fc.property(fc.nat(255), fc.nat(255), fc.nat(255), fc.nat(0xffff), (b, c, d, g) => {
        expect(Address.classify(`10.${b}.${c}.${d}`)?.kind).toBe("private")
        expect(Address.classify(`127.${b}.${c}.${d}`)?.kind).toBe("loopback")
        expect(Address.classify(`fd${b.toString(16).padStart(2, "0")}::${g.toString(16)}`)?.kind).toBe("unique-local")
      }),
    )
  })

  it("isLoopback is true only for loopback addresses", () => {
    expect(Address.isLoopback("127.0.0.1")).toBe(true)
    expect(Address.isLoopback("::1")).toBe(true)
    expect(Address.isLoopback("::ffff:127.0.0.2")).toBe(true)
    expect(Address.isLoopback("10.0.0.1")).toBe(false)
    expect(Address.isLoopback("8.8.8.8")).toBe(false)
  })
})
