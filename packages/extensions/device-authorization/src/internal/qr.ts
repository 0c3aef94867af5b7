/**
 * A QR code encoder (ISO/IEC 18004:2015) small enough to show a device authorization grant's
 * `verification_uri_complete` in a terminal (RFC 8628 §3.3.1). It supports exactly what such a URI needs: byte mode
 * (UTF-8), versions 1 to 10 and error correction level M, falling back to L when the text does not fit at M. Written
 * here rather than taken as a dependency because the client would otherwise ship a whole QR library for one picture.
 */

/** Error correction levels in the order they are tried, with their two format-information bits. */
const LEVELS = [
  { name: "M", formatBits: 0b00 },
  { name: "L", formatBits: 0b01 },
] as const

type Level = (typeof LEVELS)[number]["name"]

interface BlockLayout {
  /** Error correction codewords per block. */
  readonly ecPerBlock: number
  /** Groups of blocks as [number of blocks, data codewords per block], shorter blocks first. */
  readonly groups: ReadonlyArray<readonly [number, number]>
}

/** Error correction characteristics of versions 1 to 10 at levels M and L: ISO/IEC 18004's table of them. */
const BLOCKS: Record<Level, ReadonlyArray<BlockLayout>> = {
  M: [
    { ecPerBlock: 10, groups: [[1, 16]] },
    { ecPerBlock: 16, groups: [[1, 28]] },
    { ecPerBlock: 26, groups: [[1, 44]] },
    { ecPerBlock: 18, groups: [[2, 32]] },
    { ecPerBlock: 24, groups: [[2, 43]] },
    { ecPerBlock: 16, groups: [[4, 27]] },
    { ecPerBlock: 18, groups: [[4, 31]] },
    {
      ecPerBlock: 22,
      groups: [
        [2, 38],
        [2, 39],
      ],
    },
    {
      ecPerBlock: 22,
      groups: [
        [3, 36],
        [2, 37],
      ],
    },
    {
      ecPerBlock: 26,
      groups: [
        [4, 43],
        [1, 44],
      ],
    },
  ],
  L: [
    { ecPerBlock: 7, groups: [[1, 19]] },
    { ecPerBlock: 10, groups: [[1, 34]] },
    { ecPerBlock: 15, groups: [[1, 55]] },
    { ecPerBlock: 20, groups: [[1, 80]] },
    { ecPerBlock: 26, groups: [[1, 108]] },
    { ecPerBlock: 18, groups: [[2, 68]] },
    { ecPerBlock: 20, groups: [[2, 78]] },
    { ecPerBlock: 24, groups: [[2, 97]] },
    { ecPerBlock: 30, groups: [[2, 116]] },
    {
      ecPerBlock: 18,
      groups: [
        [2, 68],
        [2, 69],
      ],
    },
  ],
}

/** Row/column centres of the alignment patterns of versions 2 to 10 (ISO/IEC 18004 Annex E); version 1 has none. */
const ALIGNMENT_CENTRES: ReadonlyArray<ReadonlyArray<number>> = [
  [],
  [6, 18],
  [6, 22],
  [6, 26],
  [6, 30],
  [6, 34],
  [6, 22, 38],
  [6, 24, 42],
  [6, 26, 46],
  [6, 28, 50],
]

const MAX_VERSION = 10
const MODE_BYTE = 0b0100

/** Bits of the character count indicator in byte mode: 8 up to version 9, 16 from version 10. */
const countBits = (version: number): number => (version <= 9 ? 8 : 16)

const dataCodewords = (layout: BlockLayout): number =>
  layout.groups.reduce((sum, [blocks, perBlock]) => sum + blocks * perBlock, 0)

/** How many bytes of text a version holds at a level in byte mode. */
const byteCapacity = (version: number, level: Level): number =>
  Math.floor((dataCodewords(BLOCKS[level][version - 1]!) * 8 - 4 - countBits(version)) / 8)

/** The largest number of bytes `encode` accepts: version 10 at level L. */
export const MAX_BYTES = byteCapacity(MAX_VERSION, "L")

// GF(256) with the primitive polynomial x^8 + x^4 + x^3 + x^2 + 1: log and antilog tables.
const EXP = new Uint8Array(512)
const LOG = new Uint8Array(256)
{
  let x = 1
  for (let i = 0; i < 255; i++) {
    EXP[i] = x
    LOG[x] = i
    x <<= 1
    if (x & 0x100) x ^= 0x11d
  }
  // Doubling the table spares a modulo in every multiplication.
  for (let i = 255; i < 512; i++) EXP[i] = EXP[i - 255]!
}

const gfMul = (a: number, b: number): number => (a === 0 || b === 0 ? 0 : EXP[LOG[a]! + LOG[b]!]!)

/** The generator polynomial (x - α^0)(x - α^1)…(x - α^(n-1)), highest power first (ISO/IEC 18004 Annex A). */
const generator = (degree: number): Uint8Array => {
  let poly = Uint8Array.of(1)
  for (let i = 0; i < degree; i++) {
    const next = new Uint8Array(poly.length + 1)
    for (let j = 0; j < poly.length; j++) {
      next[j] = next[j]! ^ poly[j]!
      next[j + 1] = next[j + 1]! ^ gfMul(poly[j]!, EXP[i]!)
    }
    poly = next
  }
  return poly
}

/** The Reed-Solomon error correction codewords of one block: the remainder of data·x^n divided by the generator. */
const errorCorrection = (data: Uint8Array, degree: number): Uint8Array => {
  const gen = generator(degree)
  const remainder = new Uint8Array(degree)
  for (const byte of data) {
    const factor = byte ^ remainder[0]!
    remainder.copyWithin(0, 1)
    remainder[degree - 1] = 0
    for (let i = 0; i < degree; i++) remainder[i] = remainder[i]! ^ gfMul(gen[i + 1]!, factor)
  }
  return remainder
}

/** The data codewords: mode, count, the bytes, terminator and pad codewords. */
const dataStream = (bytes: Uint8Array, version: number, capacity: number): Uint8Array => {
  const bits: Array<number> = []
  const push = (value: number, length: number) => {
    for (let i = length - 1; i >= 0; i--) bits.push((value >>> i) & 1)
  }
  push(MODE_BYTE, 4)
  push(bytes.length, countBits(version))
  for (const byte of bytes) push(byte, 8)
  push(0, Math.min(4, capacity * 8 - bits.length))
  push(0, (8 - (bits.length % 8)) % 8)
  const out = new Uint8Array(capacity)
  for (let i = 0; i < bits.length; i++) out[i >>> 3] = out[i >>> 3]! | (bits[i]! << (7 - (i & 7)))
  for (let i = bits.length / 8, pad = 0; i < capacity; i++, pad ^= 1) out[i] = pad === 0 ? 0xec : 0x11
  return out
}

/** Splits the data into blocks, adds each block's error correction and interleaves them. */
const finalCodewords = (data: Uint8Array, layout: BlockLayout): Array<number> => {
  const blocks: Array<{ readonly data: Uint8Array; readonly ec: Uint8Array }> = []
  let offset = 0
  for (const [count, perBlock] of layout.groups) {
    for (let b = 0; b < count; b++) {
      const slice = data.subarray(offset, offset + perBlock)
      blocks.push({ data: slice, ec: errorCorrection(slice, layout.ecPerBlock) })
      offset += perBlock
    }
  }
  const out: Array<number> = []
  const longest = Math.max(...blocks.map((block) => block.data.length))
  for (let i = 0; i < longest; i++) for (const block of blocks) if (i < block.data.length) out.push(block.data[i]!)
  for (let i = 0; i < layout.ecPerBlock; i++) for (const block of blocks) out.push(block.ec[i]!)
  return out
}

/** `value` followed by its BCH check bits, for format and version information (ISO/IEC 18004 Annexes C and D). */
const bch = (value: number, poly: number, degree: number): number => {
  let rem = value << degree
  for (let bit = 31 - Math.clz32(rem); bit >= degree; bit--) if ((rem >>> bit) & 1) rem ^= poly << (bit - degree)
  return (value << degree) | rem
}

/** The 15 format bits of a level and mask: BCH(15,5), generator 0x537, XOR 0x5412 (ISO/IEC 18004 Annex C). */
const formatInformation = (level: Level, mask: number): number => {
  const formatBits = LEVELS.find((candidate) => candidate.name === level)!.formatBits
  return bch((formatBits << 3) | mask, 0x537, 10) ^ 0x5412
}

/** The 18 version-information bits: BCH(18,6) with generator 0x1F25 (ISO/IEC 18004 Annex D). */
const versionInformation = (version: number): number => bch(version, 0x1f25, 12)

/** The data mask conditions; a module is inverted where its condition holds. */
const MASKS: ReadonlyArray<(row: number, col: number) => boolean> = [
  (r, c) => (r + c) % 2 === 0,
  (r) => r % 2 === 0,
  (_, c) => c % 3 === 0,
  (r, c) => (r + c) % 3 === 0,
  (r, c) => (Math.floor(r / 2) + Math.floor(c / 3)) % 2 === 0,
  (r, c) => ((r * c) % 2) + ((r * c) % 3) === 0,
  (r, c) => (((r * c) % 2) + ((r * c) % 3)) % 2 === 0,
  (r, c) => (((r + c) % 2) + ((r * c) % 3)) % 2 === 0,
]

/** A square of modules with a second layer marking function patterns, which data placement and masking skip. */
class Grid {
  readonly dark: Uint8Array
  readonly reserved: Uint8Array
  constructor(readonly size: number) {
    this.dark = new Uint8Array(size * size)
    this.reserved = new Uint8Array(size * size)
  }
  get(row: number, col: number): boolean {
    return this.dark[row * this.size + col] === 1
  }
  setFunction(row: number, col: number, dark: boolean): void {
    this.dark[row * this.size + col] = dark ? 1 : 0
    this.reserved[row * this.size + col] = 1
  }
  isFunction(row: number, col: number): boolean {
    return this.reserved[row * this.size + col] === 1
  }
  copy(): Grid {
    const grid = new Grid(this.size)
    grid.dark.set(this.dark)
    grid.reserved.set(this.reserved)
    return grid
  }
}

/** A finder pattern with its light separator, centred on (row, col); parts outside the symbol are dropped. */
const drawFinder = (grid: Grid, row: number, col: number): void => {
  for (let dr = -4; dr <= 4; dr++) {
    for (let dc = -4; dc <= 4; dc++) {
      const r = row + dr
      const c = col + dc
      if (r < 0 || c < 0 || r >= grid.size || c >= grid.size) continue
      const ring = Math.max(Math.abs(dr), Math.abs(dc))
      grid.setFunction(r, c, ring !== 2 && ring !== 4)
    }
  }
}

/** The 5×5 alignment pattern centred on (row, col). */
const drawAlignment = (grid: Grid, row: number, col: number): void => {
  for (let dr = -2; dr <= 2; dr++) {
    for (let dc = -2; dc <= 2; dc++) grid.setFunction(row + dr, col + dc, Math.max(Math.abs(dr), Math.abs(dc)) !== 1)
  }
}

/** Places the format information twice, around the finder patterns, with the dark module. */
const drawFormat = (grid: Grid, level: Level, mask: number): void => {
  const bits = formatInformation(level, mask)
  const bit = (i: number) => ((bits >>> i) & 1) === 1
  const n = grid.size
  for (let i = 0; i <= 5; i++) grid.setFunction(i, 8, bit(i))
  grid.setFunction(7, 8, bit(6))
  grid.setFunction(8, 8, bit(7))
  grid.setFunction(8, 7, bit(8))
  for (let i = 9; i < 15; i++) grid.setFunction(8, 14 - i, bit(i))
  for (let i = 0; i < 8; i++) grid.setFunction(8, n - 1 - i, bit(i))
  for (let i = 8; i < 15; i++) grid.setFunction(n - 15 + i, 8, bit(i))
  grid.setFunction(n - 8, 8, true)
}

/** Places the version information in the two 6×3 blocks of versions 7 and up. */
const drawVersion = (grid: Grid, version: number): void => {
  if (version < 7) return
  const bits = versionInformation(version)
  for (let i = 0; i < 18; i++) {
    const dark = ((bits >>> i) & 1) === 1
    const near = Math.floor(i / 3)
    const far = grid.size - 11 + (i % 3)
    grid.setFunction(near, far, dark)
    grid.setFunction(far, near, dark)
  }
}

/** The function patterns of a version, with the format area reserved (its bits depend on the mask). */
const functionPatterns = (version: number): Grid => {
  const size = 17 + 4 * version
  const grid = new Grid(size)
  for (let i = 0; i < size; i++) {
    grid.setFunction(6, i, i % 2 === 0)
    grid.setFunction(i, 6, i % 2 === 0)
  }
  drawFinder(grid, 3, 3)
  drawFinder(grid, 3, size - 4)
  drawFinder(grid, size - 4, 3)
  const centres = ALIGNMENT_CENTRES[version - 1]!
  const last = centres.length - 1
  for (let i = 0; i <= last; i++) {
    for (let j = 0; j <= last; j++) {
      // The three corners that hold finder patterns carry no alignment pattern.
      if ((i === 0 && j === 0) || (i === 0 && j === last) || (i === last && j === 0)) continue
      drawAlignment(grid, centres[i]!, centres[j]!)
    }
  }
  drawFormat(grid, "M", 0)
  drawVersion(grid, version)
  return grid
}

/** Places the codewords' bits in the two-column zigzag from the bottom right, skipping the timing column. */
const placeData = (grid: Grid, codewords: ReadonlyArray<number>): void => {
  const n = grid.size
  let index = 0
  let upward = true
  for (let right = n - 1; right >= 1; right -= 2) {
    if (right === 6) right = 5
    for (let step = 0; step < n; step++) {
      const row = upward ? n - 1 - step : step
      for (const col of [right, right - 1]) {
        if (grid.isFunction(row, col)) continue
        // Remainder bits past the last codeword are zero.
        const byte = codewords[index >>> 3] ?? 0
        grid.dark[row * n + col] = (byte >>> (7 - (index & 7))) & 1
        index++
      }
    }
    upward = !upward
  }
}

const applyMask = (grid: Grid, mask: number): void => {
  const condition = MASKS[mask]!
  for (let row = 0; row < grid.size; row++) {
    for (let col = 0; col < grid.size; col++) {
      if (!grid.isFunction(row, col) && condition(row, col))
        grid.dark[row * grid.size + col] = grid.dark[row * grid.size + col]! ^ 1
    }
  }
}

/** Finder-like 1:1:3:1:1 pattern with four light modules on one side (N3), as 11 modules. */
const FINDER_LIKE = [1, 0, 1, 1, 1, 0, 1, 0, 0, 0, 0]

/** The penalty score of a masked symbol by the four rules N1 to N4. */
const penalty = (grid: Grid): number => {
  const n = grid.size
  let score = 0
  // Modules outside the symbol count as light: the quiet zone around it is light.
  const at = (row: number, col: number, transposed: boolean): number => {
    const [r, c] = transposed ? [col, row] : [row, col]
    return r < 0 || c < 0 || r >= n || c >= n ? 0 : grid.dark[r * n + c]!
  }
  for (const transposed of [false, true]) {
    for (let line = 0; line < n; line++) {
      let run = 1
      for (let i = 1; i <= n; i++) {
        if (i < n && at(line, i, transposed) === at(line, i - 1, transposed)) {
          run++
          continue
        }
        if (run >= 5) score += 3 + (run - 5)
        run = 1
      }
      for (let start = -4; start < n; start++) {
        const forward = FINDER_LIKE.every((v, k) => at(line, start + k, transposed) === v)
        const backward = FINDER_LIKE.every((v, k) => at(line, start + 10 - k, transposed) === v)
        if (forward) score += 40
        if (backward) score += 40
      }
    }
  }
  for (let row = 0; row < n - 1; row++) {
    for (let col = 0; col < n - 1; col++) {
      const v = grid.dark[row * n + col]
      if (
        v === grid.dark[row * n + col + 1] &&
        v === grid.dark[(row + 1) * n + col] &&
        v === grid.dark[(row + 1) * n + col + 1]
      ) {
        score += 3
      }
    }
  }
  const dark = grid.dark.reduce((sum, v) => sum + v, 0)
  score += 10 * Math.floor(Math.abs((dark * 100) / (n * n) - 50) / 5)
  return score
}

/**
 * Encodes `text` as UTF-8 in byte mode into the smallest QR code of versions 1 to 10 that holds it at error
 * correction level M, or at level L when no version holds it at M; of the eight data masks the one with the lowest
 * penalty score is chosen.
 *
 * @returns The module matrix by rows, `true` for dark, without the quiet zone.
 * @throws RangeError when the text's UTF-8 bytes exceed what version 10 holds at level L.
 * @see ISO/IEC 18004:2015 (QR Code bar code symbology specification)
 */
export const encode = (text: string): ReadonlyArray<ReadonlyArray<boolean>> => {
  const bytes = new TextEncoder().encode(text)
  const chosen = LEVELS.flatMap(({ name }) =>
    Array.from({ length: MAX_VERSION }, (_, i) => ({ version: i + 1, level: name })),
  ).find(({ version, level }) => bytes.length <= byteCapacity(version, level))
  if (chosen === undefined) {
    throw new RangeError(
      `text of ${bytes.length} bytes does not fit a QR code of version ${MAX_VERSION}, ` +
        `which holds at most ${MAX_BYTES} bytes`,
    )
  }
  const { version, level } = chosen
  const layout = BLOCKS[level][version - 1]!
  const codewords = finalCodewords(dataStream(bytes, version, dataCodewords(layout)), layout)
  const base = functionPatterns(version)
  placeData(base, codewords)
  let best: { readonly grid: Grid; readonly score: number } | undefined
  for (let mask = 0; mask < MASKS.length; mask++) {
    const grid = base.copy()
    applyMask(grid, mask)
    drawFormat(grid, level, mask)
    const score = penalty(grid)
    if (best === undefined || score < best.score) best = { grid, score }
  }
  const grid = best!.grid
  return Array.from({ length: grid.size }, (_, row) =>
    Array.from({ length: grid.size }, (_, col) => grid.get(row, col)),
  )
}

/** Light modules around the symbol on every side. */
const QUIET_ZONE = 4

/**
 * Draws the QR code of `text` for a terminal, two module rows a line with the half blocks `▀`, `▄`, `█` and space,
 * with a 4-module quiet zone. Light modules are drawn as blocks in the terminal's foreground colour and dark modules
 * are left as its background: on the dark background most terminals have this is the normal dark-on-light code a
 * phone camera expects, and on a light background it is the reversed code that
 * many scanners also read (ISO/IEC 18004 allows decoders to read reflectance-reversed symbols).
 * When the rows are odd in number the last line's lower half is left as background, outside the quiet zone.
 *
 * @throws RangeError as {@link encode} does.
 * @see RFC 8628 §3.3.1 (non-textual transmission of the verification URI)
 */
export const terminalQr = (text: string): string => {
  const matrix = encode(text)
  const size = matrix.length + 2 * QUIET_ZONE
  const light = (row: number, col: number): boolean => {
    if (row >= size) return false
    const r = row - QUIET_ZONE
    const c = col - QUIET_ZONE
    return !(matrix[r]?.[c] ?? false)
  }
  const lines: Array<string> = []
  for (let row = 0; row < size; row += 2) {
    let line = ""
    for (let col = 0; col < size; col++) {
      const top = light(row, col)
      const bottom = light(row + 1, col)
      line += top ? (bottom ? "█" : "▀") : bottom ? "▄" : " "
    }
    lines.push(line)
  }
  return lines.join("\n")
}
