import fc from "fast-check"
import jsQRModule from "jsqr"
import { describe, expect, it } from "vitest"
import { encode, terminalQr } from "../src/internal/qr.ts"

// jsqr is a CommonJS bundle whose `module.exports` carries the function as `default`.
const jsQR = jsQRModule.default

const QUIET = 4
const SCALE = 4

/** Renders modules (true = dark) with a light quiet zone into an RGBA image, each module SCALE pixels wide. */
const render = (matrix: ReadonlyArray<ReadonlyArray<boolean>>) => {
  const width = (matrix.length + 2 * QUIET) * SCALE
  const pixels = new Uint8ClampedArray(width * width * 4).fill(255)
  for (let y = 0; y < width; y++) {
    for (let x = 0; x < width; x++) {
      if (matrix[Math.floor(y / SCALE) - QUIET]?.[Math.floor(x / SCALE) - QUIET] === true) {
        pixels.fill(0, (y * width + x) * 4, (y * width + x) * 4 + 3)
      }
    }
  }
  return { pixels, width }
}

const decode = (matrix: ReadonlyArray<ReadonlyArray<boolean>>) => {
  const { pixels, width } = render(matrix)
  const result = jsQR(pixels, width, width, { inversionAttempts: "dontInvert" })
  return result === null ? null : { text: result.data, version: result.version }
}

/** Printable ASCII cycled with a stride, so that neighbouring codewords differ: `length` bytes. */
const ascii = (length: number): string =>
  Array.from({ length }, (_, i) => String.fromCharCode(33 + ((i * 7) % 94))).join("")

const DEVICE_URI = "https://as.example.com/device?user_code=WDJB-MJHT"

describe("encode", () => {
  it.each([
    { name: "one byte", text: "a", version: 1 },
    { name: "an ID beginning with '-'", text: "-Wq_7", version: 1 },
    { name: "a verification_uri_complete", text: DEVICE_URI, version: 4 },
    { name: "non-ASCII text", text: "Gerät koppeln: 認証コード 🔑 ok", version: 3 },
    { name: "the largest text of version 1 at M", text: ascii(14), version: 1 },
    { name: "one byte more goes to version 2", text: ascii(15), version: 2 },
    { name: "the largest text of version 2 at M", text: ascii(26), version: 2 },
    { name: "the largest text of version 6 at M", text: ascii(106), version: 6 },
    { name: "the largest text of version 7 at M", text: ascii(122), version: 7 },
    { name: "the largest text of version 10 at M", text: ascii(213), version: 10 },
    { name: "one byte more falls back to L at version 9", text: ascii(214), version: 9 },
    { name: "the largest text of version 10 at L", text: ascii(271), version: 10 },
  ])("$name decodes to the same text at version $version", ({ text, version }) => {
    const matrix = encode(text)
    expect(matrix.length).toBe(17 + 4 * version)
    expect(decode(matrix)).toEqual({ text, version })
  })

  it("throws a RangeError naming the byte length and the limit when the text does not fit version 10", () => {
    expect(() => encode(ascii(272))).toThrow(
      new RangeError("text of 272 bytes does not fit a QR code of version 10, which holds at most 271 bytes"),
    )
    // Counted in UTF-8 bytes, not characters: 91 three-byte characters are 273 bytes.
    expect(() => encode("認".repeat(91))).toThrow(
      new RangeError("text of 273 bytes does not fit a QR code of version 10, which holds at most 271 bytes"),
    )
  })

  it("decodes whatever Unicode text fits", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: "grapheme", maxLength: 60 }).filter((s) => new TextEncoder().encode(s).length <= 271),
        (text) => {
          expect(decode(encode(text))?.text).toBe(text)
        },
      ),
      { numRuns: 25, examples: [[""], ["-"], ["--help"], ["\u0000"]] },
    )
  })

  const rows = (
    matrix: ReadonlyArray<ReadonlyArray<boolean>>,
    top: number,
    left: number,
    height: number,
    width: number,
  ) =>
    matrix.slice(top, top + height).map((row) =>
      row
        .slice(left, left + width)
        .map((dark) => (dark ? "#" : "."))
        .join(""),
    )

  const FINDER_WITH_SEPARATOR = [
    "#######.",
    "#.....#.",
    "#.###.#.",
    "#.###.#.",
    "#.###.#.",
    "#.....#.",
    "#######.",
    "........",
  ]

  it("lays out a short text as a 21×21 symbol with three finder patterns, timing patterns and the dark module", () => {
    const matrix = encode(DEVICE_URI.slice(0, 8))
    expect(matrix.length).toBe(21)
    for (const row of matrix) expect(row.length).toBe(21)
    expect(rows(matrix, 0, 0, 8, 8)).toEqual(FINDER_WITH_SEPARATOR)
    expect(rows(matrix, 0, 13, 8, 8)).toEqual(FINDER_WITH_SEPARATOR.map((row) => [...row].reverse().join("")))
    expect(rows(matrix, 13, 0, 8, 8)).toEqual(FINDER_WITH_SEPARATOR.toReversed())
    expect(rows(matrix, 6, 8, 1, 5)).toEqual(["#.#.#"])
    expect(rows(matrix, 8, 6, 5, 1)).toEqual(["#", ".", "#", ".", "#"])
    expect(matrix[21 - 8]![8]).toBe(true)
  })

  /** The format bits from both copies, most significant first, as read by a decoder (ISO/IEC 18004 Annex C). */
  const formatCopies = (matrix: ReadonlyArray<ReadonlyArray<boolean>>) => {
    const n = matrix.length
    const bit = (row: number, col: number) => (matrix[row]![col]! ? "1" : "0")
    const first = [
      ...[0, 1, 2, 3, 4, 5, 7, 8].map((col) => bit(8, col)),
      ...[7, 5, 4, 3, 2, 1, 0].map((row) => bit(row, 8)),
    ].join("")
    const second = [
      ...[1, 2, 3, 4, 5, 6, 7].map((k) => bit(n - k, 8)),
      ...[8, 7, 6, 5, 4, 3, 2, 1].map((k) => bit(8, n - k)),
    ].join("")
    return [first, second]
  }

  // The format information of each mask at levels M and L, from the standard's table.
  const FORMAT_M = [
    "101010000010010",
    "101000100100101",
    "101111001111100",
    "101101101001011",
    "100010111111001",
    "100000011001110",
    "100111110010111",
    "100101010100000",
  ]
  const FORMAT_L = [
    "111011111000100",
    "111001011110011",
    "111110110101010",
    "111100010011101",
    "110011000101111",
    "110001100011000",
    "110110001000001",
    "110100101110110",
  ]

  it.each([
    { level: "M", text: DEVICE_URI, table: FORMAT_M },
    { level: "L", text: ascii(271), table: FORMAT_L },
  ])("writes the same format information of level $level in both copies", ({ text, table }) => {
    const [first, second] = formatCopies(encode(text))
    expect(second).toBe(first)
    expect(table).toContain(first)
  })

  // Texts whose lowest penalty falls on each of the eight masks, so that the decoder reads every mask.
  it.each([
    { length: 5, mask: 0 },
    { length: 17, mask: 1 },
    { length: 1, mask: 2 },
    { length: 15, mask: 3 },
    { length: 20, mask: 4 },
    { length: 62, mask: 5 },
    { length: 2, mask: 6 },
    { length: 115, mask: 7 },
  ])("chooses mask $mask for $length bytes and the code decodes", ({ length, mask }) => {
    const matrix = encode(ascii(length))
    expect(formatCopies(matrix)[0]).toBe(FORMAT_M[mask])
    expect(decode(matrix)?.text).toBe(ascii(length))
  })

  it("places version 7's information (0x07C94) in both 6×3 blocks", () => {
    const matrix = encode(ascii(107))
    expect(matrix.length).toBe(45)
    const topRight = ["..#", ".#.", ".#.", ".##", "###", "..."]
    expect(rows(matrix, 0, 34, 6, 3)).toEqual(topRight)
    expect(rows(matrix, 34, 0, 3, 6)).toEqual([0, 1, 2].map((col) => topRight.map((row) => row[col]).join("")))
  })
})

describe("terminalQr", () => {
  /** Reads the drawing back as an image: a block's halves are light, the background dark. */
  const readBack = (drawing: string) => {
    const lines = drawing.split("\n")
    const modules = lines.flatMap((line) => [
      [...line].map((c) => !(c === "█" || c === "▀")),
      [...line].map((c) => !(c === "█" || c === "▄")),
    ])
    // The matrix renderer adds its own light quiet zone; the drawn one is light already.
    const { pixels, width } = render(modules)
    const result = jsQR(pixels, width, width, { inversionAttempts: "dontInvert" })
    return result?.data ?? null
  }

  it("draws light modules as blocks, two rows a line, inside a 4-module quiet zone", () => {
    const drawing = terminalQr("a")
    const lines = drawing.split("\n")
    expect(lines.length).toBe(15)
    for (const line of lines) expect([...line].length).toBe(29)
    expect(lines[0]).toBe("█".repeat(29))
    expect(lines[1]).toBe("█".repeat(29))
    expect(lines[2]!.startsWith("████ ▄▄▄▄▄ █")).toBe(true)
    expect(lines[2]!.endsWith("█ ▄▄▄▄▄ ████")).toBe(true)
    // 29 rows: the last line's lower half is outside the code, left as background.
    expect(lines[14]).toBe("▀".repeat(29))
    expect(readBack(drawing)).toBe("a")
  })

  it("draws a verification_uri_complete that decodes back", () => {
    expect(readBack(terminalQr(DEVICE_URI))).toBe(DEVICE_URI)
  })

  it("throws the encoder's RangeError", () => {
    expect(() => terminalQr(ascii(272))).toThrow(RangeError)
  })
})
