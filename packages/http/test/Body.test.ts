import { describe, expect, it } from "vitest"
import {
  DEFAULT_MAX_BODY_BYTES,
  declaredLength,
  limitRequest,
  PayloadTooLarge,
  readBytes,
  readIterable,
  readText,
} from "../src/Body.js"

const chunked = (...parts: Array<string>): ReadableStream<Uint8Array> => {
  const encoder = new TextEncoder()
  return new ReadableStream({
    start(controller) {
      for (const part of parts) controller.enqueue(encoder.encode(part))
      controller.close()
    },
  })
}

const post = (body: BodyInit | null, headers: Record<string, string> = {}) =>
  new Request("http://example.test/", { method: "POST", body, headers, duplex: "half" } as RequestInit)

const tooLarge = async (promise: Promise<unknown>, limit: number) => {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(error).toBeInstanceOf(PayloadTooLarge)
  expect((error as PayloadTooLarge).message).toBe(`the request body exceeds the limit of ${limit} bytes`)
}

describe("Body", () => {
  it("the default limit is 4 MiB", () => {
    expect(DEFAULT_MAX_BODY_BYTES).toBe(4_194_304)
  })

  it("declaredLength reads plain decimals only", () => {
    expect(declaredLength(new Headers({ "content-length": "12" }))).toBe(12)
    expect(declaredLength(new Headers())).toBeUndefined()
    expect(declaredLength(new Headers({ "content-length": "1e3" }))).toBeUndefined()
  })

  it("readText reads a body up to the limit, exactly", async () => {
    expect(await readText(post("hello"), 5)).toBe("hello")
    expect(await readText(post(chunked("he", "llo")), 5)).toBe("hello")
    expect(await readText(post(null), 5)).toBe("")
  })

  it("refuses a declared length over the limit without reading", async () => {
    const request = post(chunked("123456"), { "content-length": "6" })
    await tooLarge(readBytes(request, 5), 5)
    expect(request.bodyUsed).toBe(false)
  })

  it("refuses a chunked body once it grows past the limit, and stops reading it", async () => {
    let pulls = 0
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulls++
        controller.enqueue(new Uint8Array(4))
      },
    })
    await tooLarge(readBytes(post(body), 10), 10)
    expect(pulls).toBeLessThanOrEqual(4)
  })

  it("fatal text decoding refuses malformed UTF-8", async () => {
    await expect(readText(post(new Uint8Array([0xff])), 10, { fatal: true })).rejects.toThrow(TypeError)
    expect(await readText(post(new Uint8Array([0xff])), 10)).toBe("\ufffd")
  })

  it("readIterable applies the same limit to async iterables", async () => {
    async function* parts() {
      yield new Uint8Array([1, 2])
      yield new Uint8Array([3])
    }
    expect([...(await readIterable(parts(), 3))]).toEqual([1, 2, 3])
    await tooLarge(readIterable(parts(), 2), 2)
    await tooLarge(readIterable(parts(), 100, 101), 100)
  })

  it("limitRequest: declared too large throws; declared small passes through; chunked is wrapped", async () => {
    expect(() => limitRequest(post("123456", { "content-length": "6" }), 5)).toThrow(PayloadTooLarge)
    const small = post("1234", { "content-length": "4" })
    expect(limitRequest(small, 5)).toBe(small)
    let exceeded = 0
    const wrapped = limitRequest(post(chunked("123", "456")), 5, () => exceeded++)
    await expect(wrapped.text()).rejects.toThrow("the request body exceeds the limit of 5 bytes")
    expect(exceeded).toBe(1)
    expect(await limitRequest(post(chunked("12", "3")), 5).text()).toBe("123")
  })
})
