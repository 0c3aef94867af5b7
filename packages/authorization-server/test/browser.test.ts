import { mkdirSync } from "node:fs"
import { join } from "node:path"
import { launchChromium, screenshot } from "@keyway/testing"
import type { Browser, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { listen, type RunningServer } from "../src/NodeServer.js"
import {
  authorizeUrl,
  MCP,
  PASSWORD,
  publicAppTokens,
  startServer,
  type TestServer,
  tokenRequest,
} from "./support/server.js"

const ARTIFACTS = join(import.meta.dirname, "..", "test-artifacts")

let server: TestServer
let callback: RunningServer
let browser: Browser
let closeBrowser: () => Promise<void>

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true })
  server = await startServer()
  // Plays the client's loopback redirect listener, and (on /forge) a page of another origin that forges a POST.
  callback = await listen(async (request) => {
    const url = new URL(request.url)
    if (url.pathname === "/forge") {
      const target = url.searchParams.get("target") ?? ""
      return new Response(
        `<!doctype html><html lang="en"><title>Forged</title><form method="post" action="${target}">` +
          `<input type="hidden" name="decision" value="approve"><input type="hidden" name="request" value="">` +
          `<button id="go" type="submit">Win a prize</button></form></html>`,
        { headers: { "content-type": "text/html" } },
      )
    }
    return new Response("<!doctype html><title>Done</title><p>You can close this window.</p>", {
      headers: { "content-type": "text/html" },
    })
  })
  ;({ browser, close: closeBrowser } = await launchChromium())
})

afterAll(async () => {
  await closeBrowser?.()
  await callback?.close()
  await server?.close()
})

const signIn = async (page: Page, url: string, shot: string) => {
  // Each test starts without remembered consent (an earlier Approve would otherwise skip the consent page).
  await server.as.revokeConsent("alice", "public-app")
  await page.goto(url)
  await expect(page.getByRole("heading", { name: "Sign in" }).isVisible()).resolves.toBe(true)
  await screenshot(page, join(ARTIFACTS, `${shot}-login.png`))
  await page.getByLabel("Username").fill("alice")
  await page.getByLabel("Password").fill(PASSWORD)
  await page.getByRole("button", { name: "Sign in" }).click()
  await page.getByRole("button", { name: "Approve" }).waitFor()
}

describe("login and consent in Chromium", () => {
  it("shows the client, the redirect host with a localhost warning, the scopes; Approve returns a working code", async () => {
    const redirect = `${callback.url}/callback`
    const request = await authorizeUrl(server, { redirect_uri: redirect, state: "browser-state" })
    const context = await browser.newContext()
    const page = await context.newPage()
    try {
      await signIn(page, request.url, "approve")
      expect(await page.title()).toBe("Authorize access")
      expect(await page.locator("h1").textContent()).toBe("Authorize Public App?")
      const host = page.locator("[data-redirect-host]")
      expect(await host.isVisible()).toBe(true)
      expect(await host.textContent()).toBe(new URL(callback.url).host)
      const warning = page.locator("[data-localhost-warning]")
      expect(await warning.isVisible()).toBe(true)
      expect(await warning.textContent()).toMatch(/receives the answer on your own computer/)
      expect(await page.locator("[data-resource]").textContent()).toBe("Example MCP")
      expect(await page.locator("[data-scope]").first().isVisible()).toBe(true)
      expect(await page.locator("[data-scope]").allTextContents()).toEqual([
        "tools:read: List the tools",
        "tools:call: Call tools for you",
      ])
      await screenshot(page, join(ARTIFACTS, "approve-consent.png"))

      await Promise.all([page.waitForURL(`${redirect}?**`), page.getByRole("button", { name: "Approve" }).click()])
      const landed = new URL(page.url())
      expect(landed.searchParams.get("state")).toBe("browser-state")
      expect(landed.searchParams.get("iss")).toBe(server.issuer)
      const code = landed.searchParams.get("code")!
      const token = await tokenRequest(server, {
        grant_type: "authorization_code",
        code,
        code_verifier: request.verifier,
        redirect_uri: redirect,
        client_id: "public-app",
        resource: MCP,
      })
      expect(token.status).toBe(200)
    } finally {
      await context.close()
    }
  })

  it("Deny returns access_denied with state and iss", async () => {
    const redirect = `${callback.url}/callback`
    const request = await authorizeUrl(server, { redirect_uri: redirect, state: "deny-state", scope: "tools:read" })
    const context = await browser.newContext()
    const page = await context.newPage()
    try {
      await signIn(page, request.url, "deny")
      await Promise.all([page.waitForURL(`${redirect}?**`), page.getByRole("button", { name: "Deny" }).click()])
      const landed = new URL(page.url())
      expect(landed.searchParams.get("error")).toBe("access_denied")
      expect(landed.searchParams.get("state")).toBe("deny-state")
      expect(landed.searchParams.get("iss")).toBe(server.issuer)
      expect(landed.searchParams.has("code")).toBe(false)
      await screenshot(page, join(ARTIFACTS, "deny-callback.png"))
    } finally {
      await context.close()
    }
  })

  it("refuses a forged consent POST without the CSRF token, even with the user's session cookie", async () => {
    const request = await authorizeUrl(server, { redirect_uri: `${callback.url}/callback`, scope: "tools:call" })
    const context = await browser.newContext()
    const page = await context.newPage()
    try {
      await signIn(page, request.url, "csrf")
      const forged = `${callback.url}/forge?target=${encodeURIComponent(`${server.issuer}/authorize/consent`)}`
      await page.goto(forged)
      const [response] = await Promise.all([
        page.waitForResponse(`${server.issuer}/authorize/consent`),
        page.locator("#go").click(),
      ])
      expect(response.status()).toBe(403)
      await page.waitForURL(`${server.issuer}/authorize/consent`)
      expect(await page.locator("h1").textContent()).toBe("Request refused")
      expect(page.url().startsWith(callback.url)).toBe(false)
      await screenshot(page, join(ARTIFACTS, "csrf-refused.png"))
    } finally {
      await context.close()
    }
  })
})

describe("connected apps in Chromium", () => {
  it("lists the app the user authorized, and Revoke removes it; its refresh token is then refused", async () => {
    await server.as.revokeConsent("alice", "public-app")
    const { refresh_token } = await publicAppTokens(server, { scope: "tools:read" })

    const context = await browser.newContext()
    const page = await context.newPage()
    try {
      await page.goto(`${server.issuer}/account`)
      await page.getByLabel("Username").fill("alice")
      await page.getByLabel("Password").fill(PASSWORD)
      await Promise.all([
        page.waitForURL(`${server.issuer}/account`),
        page.getByRole("button", { name: "Sign in" }).click(),
      ])
      expect(await page.title()).toBe("Connected apps")
      const app = page.locator('[data-app="public-app"]')
      expect(await app.locator("[data-app-name]").textContent()).toBe("Public App")
      expect(await app.locator("[data-app-host]").textContent()).toBe("app.example.com")
      // The grants of the tests above (tools:read tools:call) are the same app's.
      expect(await app.locator("[data-app-access]").allTextContents()).toEqual(["Example MCP: tools:call, tools:read"])
      expect(await app.locator("[data-first-use]").textContent()).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/)
      expect(await app.locator("[data-last-use]").textContent()).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ$/)
      await screenshot(page, join(ARTIFACTS, "account-apps.png"))

      await Promise.all([
        page.waitForResponse((r) => r.url() === `${server.issuer}/account` && r.request().method() === "GET"),
        page.getByRole("button", { name: "Revoke Public App" }).click(),
      ])
      await page.locator("[data-no-apps]").waitFor()
      expect(await page.locator("[data-app]").count()).toBe(0)
      await screenshot(page, join(ARTIFACTS, "account-revoked.png"))
    } finally {
      await context.close()
    }
    const refused = await tokenRequest(server, { grant_type: "refresh_token", refresh_token, client_id: "public-app" })
    expect([refused.status, await refused.json()]).toEqual([
      400,
      { error: "invalid_grant", error_description: "the refresh token has been revoked" },
    ])
  })
})
