import { mkdirSync } from "node:fs"
import { createServer } from "node:http"
import { join } from "node:path"
import { closing, type HeadlessChromium, launchChromium, listening, screenshot } from "@keyway/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { authorizeDevice, type DeviceServer, PASSWORD, poll, startDeviceServer } from "./support/asServer.js"

const ARTIFACTS = join(import.meta.dirname, "..", "test-artifacts")

let server: DeviceServer
let chromium: HeadlessChromium
// Another origin that frames the verification page (clickjacking).
const framer = createServer()
let framerUrl: string

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true })
  server = await startDeviceServer({ device: { entryLimit: { max: 2, window: 600 } } })
  framer.on("request", (_request, response) => {
    response.setHeader("content-type", "text/html")
    response.end(`<!doctype html><title>Prize</title><iframe id="f" src="${server.url}/device"></iframe>`)
  })
  framerUrl = await listening(framer)
  chromium = await launchChromium()
})
afterAll(async () => {
  await chromium?.close()
  await closing(framer)
  await server?.close()
})

describe("the verification page in Chromium", () => {
  it("signs in, confirms the prefilled code, shows the consent with its warning, and approves", async () => {
    const device = await authorizeDevice(server.url, { scope: "tools:read tools:call" })
    const context = await chromium.browser.newContext()
    try {
      const page = await context.newPage()
      // The complete URI, as a QR code would open it (on this instance's port).
      await page.goto(device.verification_uri_complete.replace(server.issuer, server.url))
      await screenshot(page, join(ARTIFACTS, "device-login.png"))
      await page.getByLabel("Username").fill("alice")
      await page.getByLabel("Password").fill(PASSWORD)
      await page.getByRole("button", { name: "Sign in" }).click()
      await page.getByRole("heading", { name: "Connect a device" }).waitFor()
      expect(await page.getByLabel("Code").inputValue()).toBe(device.user_code)
      await screenshot(page, join(ARTIFACTS, "device-entry.png"))
      await page.getByRole("button", { name: "Continue" }).click()
      await page.getByRole("heading", { name: "Authorize Living Room TV?" }).waitFor()
      expect(await page.locator("[data-remote-warning]").textContent()).toContain(
        "This request started on another device.",
      )
      expect(await page.locator("[data-user-code]").textContent()).toBe(device.user_code)
      await screenshot(page, join(ARTIFACTS, "device-consent.png"))
      await page.getByRole("button", { name: "Approve" }).click()
      await page.getByRole("heading", { name: "Device connected" }).waitFor()
      await screenshot(page, join(ARTIFACTS, "device-approved.png"))
    } finally {
      await context.close()
    }
    await server.adjust(5)
    expect((await poll(server.url, device.device_code)).status).toBe(200)
  })

  it("locks code entry with a clear page after too many wrong codes", async () => {
    const context = await chromium.browser.newContext()
    try {
      const page = await context.newPage()
      await page.goto(`${server.url}/device`)
      await page.getByLabel("Username").fill("alice")
      await page.getByLabel("Password").fill(PASSWORD)
      await page.getByRole("button", { name: "Sign in" }).click()
      for (const wrong of ["BBBB-BBBB", "CCCC-CCCC"]) {
        await page.getByLabel("Code").fill(wrong)
        await page.getByRole("button", { name: "Continue" }).click()
        await page.locator("[data-code-error]").waitFor()
      }
      await screenshot(page, join(ARTIFACTS, "device-wrong-code.png"))
      await page.getByLabel("Code").fill("DDDD-DDDD")
      await page.getByRole("button", { name: "Continue" }).click()
      await page.getByRole("heading", { name: "Too many attempts" }).waitFor()
      expect(await page.locator("[data-locked]").textContent()).toContain("Try again in 10 minutes.")
      await screenshot(page, join(ARTIFACTS, "device-locked.png"))
    } finally {
      await context.close()
    }
  })

  it("is not shown inside another origin's frame", async () => {
    const context = await chromium.browser.newContext()
    try {
      const page = await context.newPage()
      await page.goto(framerUrl)
      const frame = page.frames().find((f) => f !== page.mainFrame())
      // Chromium blocks the framed page (frame-ancestors 'none', X-Frame-Options DENY): no sign-in form inside.
      expect(
        await frame
          ?.locator("input[name=username]")
          .count()
          .catch(() => 0),
      ).toBe(0)
      await screenshot(page, join(ARTIFACTS, "device-framed.png"))
    } finally {
      await context.close()
    }
  })
})
