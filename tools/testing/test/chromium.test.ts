import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type HeadlessChromium, launchChromium } from "../src/chromium.js"

describe("launchChromium", () => {
  let chromium: HeadlessChromium
  const server = createServer((_req, res) => {
    res.setHeader("content-type", "text/html")
    res.end("<!doctype html><title>probe</title><button onclick=\"document.title='clicked'\">Go</button>")
  })
  beforeAll(async () => {
    chromium = await launchChromium()
    await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  })
  afterAll(async () => {
    await chromium?.close()
    server.close()
  })

  it("loads a loopback page and clicks a button", async () => {
    const page = await chromium.browser.newPage()
    const { port } = server.address() as AddressInfo
    await page.goto(`http://127.0.0.1:${port}/`)
    await page.getByRole("button", { name: "Go" }).click()
    expect(await page.title()).toBe("clicked")
  })
})
