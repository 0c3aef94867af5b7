import { request as httpRequest } from "node:http"
import { afterEach, describe, expect, it } from "vitest"
import { toNodeListener, toWebRequest } from "../src/Node.js"
import { type Running, startNodeServer } from "./helpers.js"

const running: Array<Running> = []
afterEach(async () => {
  for (const r of running.splice(0)) await r.close()
})

describe("toNodeListener", () => {
  it("passes method, URL, body and every header line; writes status, headers, several cookies and the body", async () => {
    const server = await startNodeServer(
      toNodeListener(async (request) => {
        const headers = new Headers({ "content-type": "application/json", "x-method": request.method })
        headers.append("set-cookie", "a=1")
        headers.append("set-cookie", "b=2")
        return new Response(
          JSON.stringify({ url: request.url, body: await request.text(), custom: request.headers.get("x-custom") }),
          { status: 201, headers },
        )
      }),
    )
    running.push(server)
    const response = await fetch(`${server.origin}/path?q=1`, {
      method: "POST",
      headers: { "x-custom": "yes" },
      body: "hello",
    })
    expect(response.status).toBe(201)
    expect(response.headers.get("x-method")).toBe("POST")
    expect(response.headers.getSetCookie()).toEqual(["a=1", "b=2"])
    expect(await response.json()).toEqual({ url: `${server.origin}/path?q=1`, body: "hello", custom: "yes" })
  })

  it("answers 500 when the handler throws", async () => {
    const server = await startNodeServer(
      toNodeListener(() => {
        throw new Error("boom")
      }),
    )
    running.push(server)
    const response = await fetch(server.origin)
    expect(response.status).toBe(500)
  })

  it("keeps repeated header lines and uses the configured origin", async () => {
    let seen: Request | undefined
    const server = await startNodeServer((req, res) => {
      seen = toWebRequest(req, { origin: "https://mcp.example.com" })
      res.end()
    })
    running.push(server)
    await new Promise<void>((resolve, reject) => {
      const req = httpRequest(
        `${server.origin}/mcp`,
        { headers: ["host", `127.0.0.1:${server.port}`, "x-a", "1", "X-A", "2"] },
        (res) => {
          res.resume()
          res.on("end", resolve)
        },
      )
      req.on("error", reject)
      req.end()
    })
    expect(seen?.url).toBe("https://mcp.example.com/mcp")
    expect(seen?.headers.get("x-a")).toBe("1, 2")
  })
})
