/**
 * SHA-256 in plain JavaScript, synchronous, for the verified-token cache key on runtimes without a synchronous native
 * hash (browsers, Cloudflare Workers without `nodejs_compat`). Web Crypto's `crypto.subtle.digest` is asynchronous:
 * on the cache's hot path it would turn a synchronous check into a promise, and on Node.js it runs on the thread pool
 * at 9 to 27 µs of CPU per digest (docs/benchmarks.md), against about 1.7 µs for this function on a 400-byte token.
 *
 * @see {@link https://nvlpubs.nist.gov/nistpubs/FIPS/NIST.FIPS.180-4.pdf | FIPS 180-4 §6.2}
 */

const K = new Int32Array([
  0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5, 0xd807aa98,
  0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174, 0xe49b69c1, 0xefbe4786,
  0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da, 0x983e5152, 0xa831c66d, 0xb00327c8,
  0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967, 0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13,
  0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85, 0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819,
  0xd6990624, 0xf40e3585, 0x106aa070, 0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a,
  0x5b9cca4f, 0x682e6ff3, 0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7,
  0xc67178f2,
])
const IV = new Int32Array([
  0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19,
])

// Scratch space reused across calls: the function never yields, so one caller at a time uses it.
const W = new Int32Array(64)
const H = new Int32Array(8)
const encoder = new TextEncoder()
let padded = new Uint8Array(1024)

const compress = (bytes: Uint8Array, offset: number): void => {
  for (let i = 0, o = offset; i < 16; i++, o += 4) {
    W[i] =
      ((bytes[o] as number) << 24) |
      ((bytes[o + 1] as number) << 16) |
      ((bytes[o + 2] as number) << 8) |
      (bytes[o + 3] as number)
  }
  for (let i = 16; i < 64; i++) {
    const x = W[i - 15] as number
    const y = W[i - 2] as number
    const s0 = ((x >>> 7) | (x << 25)) ^ ((x >>> 18) | (x << 14)) ^ (x >>> 3)
    const s1 = ((y >>> 17) | (y << 15)) ^ ((y >>> 19) | (y << 13)) ^ (y >>> 10)
    W[i] = ((W[i - 16] as number) + s0 + (W[i - 7] as number) + s1) | 0
  }
  let a = H[0] as number
  let b = H[1] as number
  let c = H[2] as number
  let d = H[3] as number
  let e = H[4] as number
  let f = H[5] as number
  let g = H[6] as number
  let h = H[7] as number
  for (let i = 0; i < 64; i++) {
    const s1 = ((e >>> 6) | (e << 26)) ^ ((e >>> 11) | (e << 21)) ^ ((e >>> 25) | (e << 7))
    const t1 = (h + s1 + ((e & f) ^ (~e & g)) + (K[i] as number) + (W[i] as number)) | 0
    const s0 = ((a >>> 2) | (a << 30)) ^ ((a >>> 13) | (a << 19)) ^ ((a >>> 22) | (a << 10))
    const t2 = (s0 + ((a & b) ^ (a & c) ^ (b & c))) | 0
    h = g
    g = f
    f = e
    e = (d + t1) | 0
    d = c
    c = b
    b = a
    a = (t1 + t2) | 0
  }
  H[0] = ((H[0] as number) + a) | 0
  H[1] = ((H[1] as number) + b) | 0
  H[2] = ((H[2] as number) + c) | 0
  H[3] = ((H[3] as number) + d) | 0
  H[4] = ((H[4] as number) + e) | 0
  H[5] = ((H[5] as number) + f) | 0
  H[6] = ((H[6] as number) + g) | 0
  H[7] = ((H[7] as number) + h) | 0
}

/** The SHA-256 of the UTF-8 encoding of `text`, as its eight 32-bit words (big-endian, as FIPS 180-4 defines them). */
export const sha256Words = (text: string): Int32Array => {
  const room = text.length * 3 + 72
  if (padded.length < room) padded = new Uint8Array(room)
  const length = encoder.encodeInto(text, padded).written
  // The message, a 1 bit, zeros, and the length in bits as a 64-bit big-endian number: a multiple of 64 bytes.
  const total = ((length + 72) >>> 6) << 6
  padded.fill(0, length, total)
  padded[length] = 0x80
  const high = Math.floor(length / 0x20000000)
  const low = (length << 3) >>> 0
  padded[total - 8] = high >>> 24
  padded[total - 7] = high >>> 16
  padded[total - 6] = high >>> 8
  padded[total - 5] = high
  padded[total - 4] = low >>> 24
  padded[total - 3] = low >>> 16
  padded[total - 2] = low >>> 8
  padded[total - 1] = low
  H.set(IV)
  for (let offset = 0; offset < total; offset += 64) compress(padded, offset)
  return H.slice()
}
