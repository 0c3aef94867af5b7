import { createServer } from "node:net"
import { describe, expect, it } from "vitest"
import { freePort } from "../src/net.js"

describe("freePort", () => {
  it("returns a released loopback port another server can bind", async () => {
    const port = await freePort()
    expect(port).toBeGreaterThan(0)
    const server = createServer()
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject)
      server.listen(port, "127.0.0.1", resolve)
    })
    const address = server.address()
    await new Promise<void>((resolve) => server.close(() => resolve()))
    expect(typeof address === "object" && address !== null ? address.port : 0).toBe(port)
  })
})
