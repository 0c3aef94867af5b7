/**
 * Classification of IP addresses for outbound fetches: an address is either globally reachable (fetchable) or in a
 * special-purpose range the server must never connect to on a client's say-so (loopback, private, link-local, CGNAT,
 * multicast, reserved, documentation, benchmarking...). IPv6 forms that embed an IPv4 address (IPv4-mapped, NAT64,
 * 6to4) are judged by the embedded address.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6890.html | RFC 6890 (special-purpose address registries)}
 * @see {@link https://www.ietf.org/archive/id/draft-ietf-oauth-client-id-metadata-document-02.html#section-8.6 | draft-ietf-oauth-client-id-metadata-document-02 §8.6 (SSRF)}
 * @module
 */
import { isIP } from "node:net"

/**
 * Why an address is refused.
 *
 * @see {@link https://www.iana.org/assignments/iana-ipv4-special-registry/ | IANA IPv4 Special-Purpose Address Registry}
 * @see {@link https://www.iana.org/assignments/iana-ipv6-special-registry/ | IANA IPv6 Special-Purpose Address Registry}
 */
export type RangeKind =
  | "unspecified"
  | "this-network"
  | "loopback"
  | "private"
  | "shared-address-space"
  | "link-local"
  | "site-local"
  | "unique-local"
  | "multicast"
  | "broadcast"
  | "reserved"
  | "documentation"
  | "benchmarking"
  | "ipv4-compatible"
  | "invalid"

/**
 * The IPv6 forms that carry an IPv4 address and are judged by it.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc4291.html#section-2.5.5.2 | RFC 4291 §2.5.5.2 (IPv4-mapped)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6052.html#section-2.1 | RFC 6052 §2.1 (NAT64 well-known prefix)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc3056.html#section-2 | RFC 3056 §2 (6to4)}
 */
export type Embedding = "IPv4-mapped" | "NAT64" | "6to4"

/**
 * A refused address: the range it falls in and, for IPv6 forms embedding an IPv4 address, that address.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6890.html#section-2.2 | RFC 6890 §2.2}
 */
export interface Refusal {
  /** The address as given. */
  readonly address: string
  readonly kind: RangeKind
  /** The refused range in CIDR notation, e.g. `127.0.0.0/8`. */
  readonly range: string
  /** The embedded IPv4 address that was refused, when the address is an IPv4-in-IPv6 form. */
  readonly embedded?: { readonly address: string; readonly via: Embedding; readonly prefix: string }
}

interface Range {
  readonly base: bigint
  readonly bits: number
  readonly kind: RangeKind
  readonly cidr: string
}

const parseIPv4 = (address: string): bigint | undefined => {
  const parts = address.split(".")
  if (parts.length !== 4) return undefined
  let value = 0n
  for (const part of parts) {
    if (!/^\d{1,3}$/.test(part)) return undefined
    const n = Number(part)
    if (n > 255) return undefined
    value = (value << 8n) | BigInt(n)
  }
  return value
}

const parseIPv6 = (input: string): bigint | undefined => {
  // A zone index ("fe80::1%eth0") names an interface, not part of the address.
  const address = input.split("%")[0] ?? ""
  let text = address
  const lastColon = address.lastIndexOf(":")
  const last = address.slice(lastColon + 1)
  if (last.includes(".")) {
    // An embedded dotted quad ("::ffff:127.0.0.1") stands for the last two groups.
    const v4 = parseIPv4(last)
    if (v4 === undefined) return undefined
    text = `${address.slice(0, lastColon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`
  }
  const hex = (group: string): number | undefined =>
    /^[0-9a-f]{1,4}$/i.test(group) ? Number.parseInt(group, 16) : undefined
  const groups = (part: string): Array<number> | undefined => {
    if (part === "") return []
    const out: Array<number> = []
    for (const g of part.split(":")) {
      const n = hex(g)
      if (n === undefined) return undefined
      out.push(n)
    }
    return out
  }
  let all: Array<number>
  const gap = text.indexOf("::")
  if (gap >= 0) {
    const left = groups(text.slice(0, gap))
    const right = groups(text.slice(gap + 2))
    if (left === undefined || right === undefined) return undefined
    const missing = 8 - left.length - right.length
    if (missing < 1) return undefined
    all = [...left, ...Array<number>(missing).fill(0), ...right]
  } else {
    const g = groups(text)
    if (g === undefined) return undefined
    all = g
  }
  if (all.length !== 8) return undefined
  return all.reduce((acc, g) => (acc << 16n) | BigInt(g), 0n)
}

const formatIPv4 = (value: bigint): string =>
  [24n, 16n, 8n, 0n].map((shift) => String(Number((value >> shift) & 0xffn))).join(".")

const range = (cidr: string, kind: RangeKind, width: 32 | 128): Range => {
  const [base = "", bits = ""] = cidr.split("/")
  const parsed = width === 32 ? parseIPv4(base) : parseIPv6(base)
  if (parsed === undefined) throw new Error(`bad range ${cidr}`)
  return { base: parsed, bits: Number(bits), kind, cidr }
}

const contains = (r: Range, value: bigint, width: 32 | 128): boolean => {
  const shift = BigInt(width - r.bits)
  return value >> shift === r.base >> shift
}

// Most specific first: the first match names the range.
const IPV4: ReadonlyArray<Range> = (
  [
    ["0.0.0.0/8", "this-network"],
    ["10.0.0.0/8", "private"],
    ["100.64.0.0/10", "shared-address-space"],
    ["127.0.0.0/8", "loopback"],
    ["169.254.0.0/16", "link-local"],
    ["172.16.0.0/12", "private"],
    ["192.0.0.0/24", "reserved"],
    ["192.0.2.0/24", "documentation"],
    ["192.88.99.0/24", "reserved"],
    ["192.168.0.0/16", "private"],
    ["198.18.0.0/15", "benchmarking"],
    ["198.51.100.0/24", "documentation"],
    ["203.0.113.0/24", "documentation"],
    ["224.0.0.0/4", "multicast"],
    ["255.255.255.255/32", "broadcast"],
    ["240.0.0.0/4", "reserved"],
  ] as const
).map(([cidr, kind]) => range(cidr, kind, 32))

const IPV6: ReadonlyArray<Range> = (
  [
    ["::/128", "unspecified"],
    ["::1/128", "loopback"],
    ["::/96", "ipv4-compatible"],
    ["64:ff9b:1::/48", "reserved"],
    ["100::/64", "reserved"],
    ["2001:2::/48", "benchmarking"],
    ["2001::/23", "reserved"],
    ["2001:db8::/32", "documentation"],
    ["3fff::/20", "documentation"],
    ["5f00::/16", "reserved"],
    ["fc00::/7", "unique-local"],
    ["fe80::/10", "link-local"],
    ["fec0::/10", "site-local"],
    ["ff00::/8", "multicast"],
  ] as const
).map(([cidr, kind]) => range(cidr, kind, 128))

const EMBEDDINGS: ReadonlyArray<{
  readonly range: Range
  readonly via: Embedding
  readonly extract: (v: bigint) => bigint
}> = [
  { range: range("::ffff:0:0/96", "reserved", 128), via: "IPv4-mapped", extract: (v) => v & 0xffffffffn },
  { range: range("64:ff9b::/96", "reserved", 128), via: "NAT64", extract: (v) => v & 0xffffffffn },
  { range: range("2002::/16", "reserved", 128), via: "6to4", extract: (v) => (v >> 80n) & 0xffffffffn },
]

// Only 2000::/3 is allocated as global unicast; everything else is reserved by IANA.
const GLOBAL_UNICAST = range("2000::/3", "reserved", 128)

const classifyIPv4 = (address: string, value: bigint): Refusal | undefined => {
  const hit = IPV4.find((r) => contains(r, value, 32))
  return hit === undefined ? undefined : { address, kind: hit.kind, range: hit.cidr }
}

/**
 * Classifies an IP address (IPv4 dotted quad or IPv6, with or without brackets or a zone index). Returns the
 * {@link Refusal} when the address is in a special-purpose range, `undefined` when it is globally reachable. Anything
 * that is not an IP address is refused as `invalid`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6890.html | RFC 6890}
 * @see {@link https://www.rfc-editor.org/rfc/rfc6598.html | RFC 6598 (shared address space, 100.64.0.0/10)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc5737.html | RFC 5737 (IPv4 documentation ranges)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc3849.html | RFC 3849 (2001:db8::/32)}
 * @see {@link https://www.rfc-editor.org/rfc/rfc4193.html | RFC 4193 (unique local, fc00::/7)}
 */
export const classify = (input: string): Refusal | undefined => {
  const address = input.startsWith("[") && input.endsWith("]") ? input.slice(1, -1) : input
  const family = isIP(address.split("%")[0] ?? "")
  if (family === 4) {
    const value = parseIPv4(address)
    return value === undefined ? { address, kind: "invalid", range: "" } : classifyIPv4(address, value)
  }
  const value = family === 6 ? parseIPv6(address) : undefined
  if (value === undefined) return { address, kind: "invalid", range: "" }
  for (const embedding of EMBEDDINGS) {
    if (!contains(embedding.range, value, 128)) continue
    const inner = embedding.extract(value)
    const innerAddress = formatIPv4(inner)
    const refused = classifyIPv4(innerAddress, inner)
    if (refused === undefined) return undefined
    return {
      address,
      kind: refused.kind,
      range: refused.range,
      embedded: { address: innerAddress, via: embedding.via, prefix: embedding.range.cidr },
    }
  }
  const hit = IPV6.find((r) => contains(r, value, 128))
  if (hit !== undefined) return { address, kind: hit.kind, range: hit.cidr }
  if (!contains(GLOBAL_UNICAST, value, 128)) return { address, kind: "reserved", range: "outside 2000::/3" }
  return undefined
}

/**
 * Whether an address is a loopback address (127.0.0.0/8, ::1, or an IPv4-mapped loopback address).
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6890.html#section-2.2.2 | RFC 6890 §2.2.2}
 */
export const isLoopback = (address: string): boolean => classify(address)?.kind === "loopback"

/**
 * A readable description of a refusal, e.g. `loopback (127.0.0.0/8)` or
 * `loopback (127.0.0.0/8) embedded in an IPv4-mapped address (::ffff:0:0/96)`.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc6890.html | RFC 6890}
 */
export const describe = (refusal: Refusal): string => {
  if (refusal.kind === "invalid") return "not an IP address"
  const base = `${refusal.kind} (${refusal.range})`
  if (refusal.embedded === undefined) return base
  const article = refusal.embedded.via === "IPv4-mapped" ? "an" : "a"
  return `${base} embedded as ${refusal.embedded.address} in ${article} ${refusal.embedded.via} address (${refusal.embedded.prefix})`
}
