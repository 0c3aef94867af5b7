import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { createProbe } from "../src/index.js"

let server: Server
let origin: string
beforeAll(async () => {
  server = createServer((request, response) => {
    if (request.url === "/redirect") {
      response.writeHead(302, { location: "https://elsewhere.example/x" }).end()
    } else if (request.url === "/big") {
      response.writeHead(200, { "content-type": "text/plain" }).end("x".repeat(2048))
    } else {
      response
        .writeHead(200, { "content-type": "application/json", "set-cookie": "s=secret" })
        .end(JSON.stringify({ ok: true }))
    }
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(async () => {
  server.closeAllConnections()
  await new Promise((resolve) => server.close(resolve))
})

describe("createProbe", () => {
  it("records each exchange with the headers that matter, and parses JSON", async () => {
    const probe = createProbe()
    const seen = await probe.send(`${origin}/doc`, {
      headers: { accept: "application/json", authorization: "Bearer t" },
    })
    expect(seen.status).toBe(200)
    expect(seen.json).toEqual({ ok: true })
    expect(probe.exchanges).toEqual([
      {
        method: "GET",
        url: `${origin}/doc`,
        requestHeaders: { accept: "application/json" },
        status: 200,
        headers: expect.objectContaining({ "content-type": "application/json" }),
        body: '{"ok":true}',
      },
    ])
    expect(probe.exchanges[0]?.headers).not.toHaveProperty("set-cookie")
  })

  it("follows no redirect: the redirect is what it sees", async () => {
    const probe = createProbe()
    const seen = await probe.send(`${origin}/redirect`)
    expect(seen.status).toBe(302)
    expect(seen.exchange.headers?.location).toBe("https://elsewhere.example/x")
  })

  it("bounds the body, and records an unreachable server with its error", async () => {
    const probe = createProbe({ maxBodyBytes: 1024 })
    const big = await probe.send(`${origin}/big`)
    expect(big.text).toBe("")
    expect(big.exchange.error).toBe("the body is larger than 1024 bytes")
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, "127.0.0.1", resolve))
    const port = (closed.address() as AddressInfo).port
    await new Promise((resolve) => closed.close(resolve))
    const none = await probe.send(`http://127.0.0.1:${port}/`)
    expect(none.status).toBeUndefined()
    expect(none.exchange.error).toContain("ECONNREFUSED")
  })
})
