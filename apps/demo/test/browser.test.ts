import { mkdirSync } from "node:fs"
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { join } from "node:path"
import { Pkce } from "@keyway/core"
import { type HeadlessChromium, launchChromium, screenshot } from "@keyway/testing"
import type { BrowserContext, Page } from "playwright-core"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { runDemo } from "../src/flow.js"
import { decodeJwt, STEPS } from "../src/narrator.js"
import { type Stack, startStack } from "../src/stack.js"

const ARTIFACTS = join(import.meta.dirname, "..", "test-artifacts")

let stack: Stack
let chromium: HeadlessChromium
let callback: Server
let callbackOrigin: string

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true })
  ;[stack, chromium] = await Promise.all([startStack(), launchChromium()])
  // The client's loopback redirect listener, and (on /forge) a page of another origin that forges a consent POST.
  callback = createServer((request, response) => {
    const url = new URL(request.url ?? "/", "http://127.0.0.1")
    if (url.pathname === "/forge") {
      const target = url.searchParams.get("target") ?? ""
      response
        .writeHead(200, { "content-type": "text/html" })
        .end(
          `<!doctype html><html lang="en"><title>Forged</title><form method="post" action="${target}">` +
            `<input type="hidden" name="decision" value="approve"><input type="hidden" name="request" value="">` +
            `<button id="go" type="submit">Win a prize</button></form></html>`,
        )
      return
    }
    response.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>Done</title><p>Done.</p>")
  })
  await new Promise<void>((resolve) => callback.listen(0, "127.0.0.1", resolve))
  callbackOrigin = `http://127.0.0.1:${(callback.address() as AddressInfo).port}`
})

afterAll(async () => {
  await chromium?.close()
  await new Promise<void>((resolve) => {
    callback?.closeAllConnections()
    callback?.close(() => resolve())
  })
  await stack?.close()
})

/** An authorization request of the pre-registered confidential client, redirecting to the loopback listener. */
const authorization = async (state: string, scope: string) => {
  const pkce = await Pkce.generate()
  const url = new URL(`${stack.issuer}/authorize`)
  const params = {
    response_type: "code",
    client_id: "demo-confidential",
    redirect_uri: `${callbackOrigin}/callback`,
    scope,
    state,
    code_challenge: pkce.challenge,
    code_challenge_method: "S256",
    resource: stack.mcpUrl,
  }
  for (const [name, value] of Object.entries(params)) url.searchParams.set(name, value)
  return { url: url.href, verifier: pkce.verifier, redirectUri: params.redirect_uri }
}

/** Signs in on the login page and waits for the consent page. */
const signIn = async (page: Page, url: string, shot: string) => {
  await page.goto(url)
  expect(await page.title()).toBe("Sign in")
  expect(await page.locator("main p").first().textContent()).toBe("Sign in to continue to Demo confidential client.")
  await screenshot(page, join(ARTIFACTS, `${shot}-login.png`))
  await page.getByLabel("Username").fill(stack.users[0]!.username)
  await page.getByLabel("Password").fill(stack.users[0]!.password)
  await page.getByRole("button", { name: "Sign in" }).click()
  await page.getByRole("button", { name: "Approve" }).waitFor()
}

const withPage = async (use: (page: Page, context: BrowserContext) => Promise<void>) => {
  const context = await chromium.browser.newContext()
  try {
    await use(await context.newPage(), context)
  } finally {
    await context.close()
  }
}

// Order matters: Approve remembers consent, which would skip the consent page of the tests after it.
describe("login and consent of the demo stack in Chromium", () => {
  it("Deny sends access_denied, with state and iss, back to the client", async () => {
    const request = await authorization("deny-state", "notes:read")
    await withPage(async (page) => {
      await signIn(page, request.url, "deny")
      await Promise.all([
        page.waitForURL(`${request.redirectUri}?**`),
        page.getByRole("button", { name: "Deny" }).click(),
      ])
      const landed = new URL(page.url())
      expect(Object.fromEntries(landed.searchParams)).toEqual({
        error: "access_denied",
        error_description: "the user denied the request",
        state: "deny-state",
        iss: stack.issuer,
      })
      await screenshot(page, join(ARTIFACTS, "deny-callback.png"))
    })
  })

  it("refuses a forged consent POST without the CSRF token, even with the user's session cookie", async () => {
    const request = await authorization("csrf-state", "notes:read")
    await withPage(async (page) => {
      await signIn(page, request.url, "csrf")
      const forged = `${callbackOrigin}/forge?target=${encodeURIComponent(`${stack.issuer}/authorize/consent`)}`
      await page.goto(forged)
      const [response] = await Promise.all([
        page.waitForResponse(`${stack.issuer}/authorize/consent`),
        page.locator("#go").click(),
      ])
      expect(response.status()).toBe(403)
      await page.waitForURL(`${stack.issuer}/authorize/consent`)
      expect(await page.locator("h1").textContent()).toBe("Request refused")
      expect(await page.locator("[data-error]").textContent()).toBe("csrf")
      expect(await page.locator("[role=alert]").textContent()).toBe(
        "csrf: the form was not submitted from this server's own page (missing or invalid CSRF token), or your session expired.",
      )
      await screenshot(page, join(ARTIFACTS, "csrf-refused.png"))
    })
  })

  it("shows the client, the redirect host with the localhost warning and the scopes; Approve returns a working code", async () => {
    const request = await authorization("approve-state", "notes:read notes:write")
    await withPage(async (page) => {
      await signIn(page, request.url, "approve")
      expect(await page.title()).toBe("Authorize access")
      expect(await page.locator("h1").textContent()).toBe("Authorize Demo confidential client?")
      expect(await page.locator("[data-client-name]").textContent()).toBe("Demo confidential client")
      const host = page.locator("[data-redirect-host]")
      expect(await host.isVisible()).toBe(true)
      expect(await host.textContent()).toBe(new URL(callbackOrigin).host)
      const warning = page.locator("[data-localhost-warning]")
      expect(await warning.isVisible()).toBe(true)
      expect(await warning.textContent()).toBe(
        `Warning: this application receives the answer on your own computer (${new URL(callbackOrigin).host}). Any program running on this computer could be the one asking. Approve only if you started this sign-in yourself from an application you trust.`,
      )
      expect(await page.locator("[data-resource]").textContent()).toBe("Keyway notes")
      expect(await page.locator("[data-scope]").allTextContents()).toEqual([
        "notes:read: Read your notes",
        "notes:write: Create, change and delete your notes",
      ])
      await screenshot(page, join(ARTIFACTS, "approve-consent.png"))

      await Promise.all([
        page.waitForURL(`${request.redirectUri}?**`),
        page.getByRole("button", { name: "Approve" }).click(),
      ])
      const landed = new URL(page.url())
      expect(landed.searchParams.get("state")).toBe("approve-state")
      expect(landed.searchParams.get("iss")).toBe(stack.issuer)
      const client = stack.clients[0]!
      const token = await fetch(`${stack.issuer}/token`, {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          authorization: `Basic ${Buffer.from(`${client.client_id}:${client.client_secret}`).toString("base64")}`,
        },
        body: new URLSearchParams({
          grant_type: "authorization_code",
          code: landed.searchParams.get("code") ?? "",
          code_verifier: request.verifier,
          redirect_uri: request.redirectUri,
          resource: stack.mcpUrl,
        }),
      })
      expect(token.status).toBe(200)
      const body = (await token.json()) as { access_token: string; scope: string }
      expect(body.scope).toBe("notes:read notes:write")
      expect(decodeJwt(body.access_token)?.claims).toMatchObject({
        aud: stack.mcpUrl,
        iss: stack.issuer,
        sub: "alice",
        client_id: "demo-confidential",
      })
    })
  })
})

describe("npm run demo -- --browser, with Chromium as the system browser", () => {
  it("runs the flow with login and consent done in the browser", async () => {
    let out = ""
    let err = ""
    const seen: Array<ReadonlyArray<string>> = []
    const context = await chromium.browser.newContext()
    try {
      await runDemo({
        out: (text) => {
          out += text
        },
        err: (text) => {
          err += text
        },
        browser: true,
        openBrowser: async (url) => {
          // The demo tells the person how to sign in; the test reads it like a person would.
          const password = /Sign in as alice with the password (\S+), then Approve\./.exec(err)?.[1] ?? ""
          const page = await context.newPage()
          try {
            await page.goto(url)
            if ((await page.title()) === "Sign in") {
              await page.getByLabel("Username").fill("alice")
              await page.getByLabel("Password").fill(password)
              await page.getByRole("button", { name: "Sign in" }).click()
            }
            await page.getByRole("button", { name: "Approve" }).waitFor()
            seen.push(await page.locator("[data-scope]").allTextContents())
            await Promise.all([
              page.waitForURL("http://127.0.0.1:*/callback?**"),
              page.getByRole("button", { name: "Approve" }).click(),
            ])
            await screenshot(page, join(ARTIFACTS, `browser-mode-callback-${seen.length}.png`))
          } finally {
            await page.close()
          }
        },
      })
    } finally {
      await context.close()
    }
    // The first authorization asks for notes:read, the step-up for both scopes.
    expect(seen).toEqual([
      ["notes:read: Read your notes"],
      ["notes:read: Read your notes", "notes:write: Create, change and delete your notes"],
    ])
    expect(err).toContain("Opening the authorization page in your browser.")
    for (const title of [STEPS.challenge, STEPS.authorizationRequest, STEPS.authorizationResponse, STEPS.refresh]) {
      expect(out).toContain(title)
    }
    expect(out).toMatch(/redirect_uri {11}http:\/\/127\.0\.0\.1:\d+\/callback/)
    expect(out).toContain('read_note → "#1 Hello')
    expect(out).not.toMatch(/eyJ[\w-]+\.[\w-]+\.[\w-]+/)
  })
})
