import { request as httpRequest } from "node:http"

/** What {@link postForm} got back. */
export interface FormAnswer {
  readonly status: number
  readonly location: string | undefined
  /** The first `Set-Cookie`'s `name=value`. */
  readonly cookie: string | undefined
  readonly body: string
}

/**
 * POSTs a form over node:http, framed either with a Content-Length or with `Transfer-Encoding: chunked` (in two
 * chunks, as a streaming client sends it): for tests showing that what a server does with a form does not depend on
 * its framing.
 *
 * @see {@link https://www.rfc-editor.org/rfc/rfc9112.html#section-7.1 | RFC 9112 §7.1 (chunked transfer coding)}
 */
export const postForm = (
  url: string,
  framing: "chunked" | "length",
  values: Record<string, string>,
  headers: Record<string, string> = {},
): Promise<FormAnswer> =>
  new Promise((resolve, reject) => {
    const body = new URLSearchParams(values).toString()
    const req = httpRequest(
      url,
      {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          ...headers,
          ...(framing === "chunked"
            ? { "transfer-encoding": "chunked" }
            : { "content-length": String(Buffer.byteLength(body)) }),
        },
      },
      (res) => {
        const chunks: Array<Buffer> = []
        res.on("data", (chunk: Buffer) => chunks.push(chunk))
        res.on("end", () =>
          resolve({
            status: res.statusCode ?? 0,
            location: res.headers.location,
            cookie: res.headers["set-cookie"]?.[0]?.split(";")[0],
            body: Buffer.concat(chunks).toString("utf8"),
          }),
        )
        res.on("error", reject)
      },
    )
    req.on("error", reject)
    const half = Math.floor(body.length / 2)
    if (framing === "chunked") req.write(body.slice(0, half))
    req.end(framing === "chunked" ? body.slice(half) : body)
  })
