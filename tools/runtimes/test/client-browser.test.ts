/**
 * `@keyway/client`'s main entry bundled for the browser (esbuild `--platform=browser`, so a single `node:*` import
 * fails the bundle) and run in headless Chromium against the demo stack (Keyway's authorization server and the notes
 * MCP server): discovery, dynamic registration, the authorization request through `UserAgent.redirect` with sign-in
 * and consent in the page, the callback page's `complete(url)`, the token request, and an authorized MCP call.
 */
import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { dirname, join } from "node:path"
import { fileURLToPath } from "node:url"
import { type Stack, startStack } from "@keyway/app-demo"
import { type HeadlessChromium, launchChromium } from "@keyway/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type Bundle, bundleForBrowser } from "../src/index.js"

const programs = join(dirname(fileURLToPath(import.meta.url)), "..", "programs")

let stack: Stack
let chromium: HeadlessChromium
let app: Server
let appOrigin = ""
let bundle: Bundle

beforeAll(async () => {
  ;[stack, chromium, bundle] = await Promise.all([
    startStack(),
    launchChromium(),
    bundleForBrowser(join(programs, "browser-app.ts")),
  ])
  // The web app's origin: the page (at /app and at the callback) and its script.
  app = createServer((request, response) => {
    const path = new URL(request.url ?? "/", "http://127.0.0.1").pathname
    if (path === "/app.js") {
      response.writeHead(200, { "content-type": "text/javascript" }).end(bundle.code)
      return
    }
    if (path !== "/app" && path !== "/callback") {
      response.writeHead(404).end()
      return
    }
    const config = JSON.stringify({ mcpUrl: stack.mcpUrl, redirectUri: `${appOrigin}/callback` })
    response
      .writeHead(200, { "content-type": "text/html; charset=utf-8" })
      .end(
        `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Notes app</title>` +
          `<script type="application/json" id="config">${config}</script></head>` +
          `<body data-state="loading"><pre id="out"></pre><script type="module" src="/app.js"></script></body></html>`,
      )
  })
  await new Promise<void>((resolve) => app.listen(0, "127.0.0.1", resolve))
  appOrigin = `http://127.0.0.1:${(app.address() as AddressInfo).port}`
}, 120_000)

afterAll(async () => {
  await chromium?.close()
  await new Promise<void>((resolve) => (app === undefined ? resolve() : app.close(() => resolve())))
  await stack?.close()
})

describe("the client's Web face in a browser", () => {
  it("bundles for the browser from Web-standard modules only", () => {
    expect(bundle.inputs.filter((input) => /(^|\/)node:|^node_modules\/undici\//.test(input))).toEqual([])
    expect(bundle.inputs.some((input) => input.includes("packages/client/dist/index.js"))).toBe(true)
    expect(bundle.code).not.toMatch(/from\s*["']node:/)
  })

  it("discovers, registers, authorizes with the redirect agent, gets a token and makes an authorized MCP call", async () => {
    const context = await chromium.browser.newContext()
    try {
      const page = await context.newPage()
      const requests: Array<string> = []
      page.on("request", (request) => {
        const url = new URL(request.url())
        requests.push(`${request.method()} ${url.origin}${url.pathname}`)
      })
      const errors: Array<string> = []
      page.on("pageerror", (error) => errors.push(error.message))

      // Each step of the flow says, if it does not finish, where the page was and what it had requested.
      const step = async <A>(name: string, run: () => Promise<A>): Promise<A> => {
        try {
          return await run()
        } catch (cause) {
          const state = await page
            .evaluate(
              () =>
                `${document.body?.dataset.state ?? "(no body)"}: ${document.getElementById("out")?.textContent ?? ""}`,
            )
            .catch(() => "(page not readable)")
          throw new Error(
            `${name}: ${cause instanceof Error ? cause.message.split("\n")[0] : String(cause)}\n` +
              `page at ${page.url()}, state ${state}\nrequests:\n${requests.join("\n")}`,
          )
        }
      }

      await page.goto(`${appOrigin}/app`)
      // The redirect agent took the page to the authorization server's sign-in page.
      await step("to the sign-in page", () =>
        page.waitForURL((url) => url.href.startsWith(`${stack.issuer}/`), { timeout: 60_000 }),
      )
      await step("sign-in", async () => {
        await page.getByLabel("Username").fill(stack.users[0]!.username)
        await page.getByLabel("Password").fill(stack.users[0]!.password)
        await page.getByRole("button", { name: "Sign in" }).click()
      })
      expect(await step("consent page", () => page.locator("[data-client-name]").textContent())).toBe(
        "Keyway browser app",
      )
      await step("approve", () => page.getByRole("button", { name: "Approve" }).click())

      // The callback page completes, goes back to the app, whose call now succeeds.
      await step("back to the app", () => page.waitForURL(`${appOrigin}/app`, { timeout: 60_000 }))
      await step("the app's call", () =>
        page.locator("body[data-state=done], body[data-state=error]").waitFor({ timeout: 60_000 }),
      )
      const out = await page.locator("#out").textContent()
      expect(await page.locator("body").getAttribute("data-state"), out ?? "").toBe("done")
      const outcome = JSON.parse(out ?? "{}") as {
        result: { result?: { content?: Array<{ text: string }> } }
        scope: string
        resource: string
        issuer: string
      }
      expect(outcome.result.result?.content?.[0]?.text).toBe("No notes yet.")
      expect(outcome.resource).toBe(stack.mcpUrl)
      expect(outcome.issuer).toBe(stack.issuer)
      expect(outcome.scope.split(" ")).toContain("notes:read")
      expect(errors).toEqual([])

      const mcpOrigin = new URL(stack.mcpUrl).origin
      const seen = (entry: string) => requests.some((request) => request === entry)
      expect(seen(`POST ${stack.mcpUrl}`)).toBe(true)
      expect(seen(`GET ${mcpOrigin}/.well-known/oauth-protected-resource/mcp`)).toBe(true)
      expect(requests.some((request) => request.startsWith(`GET ${stack.issuer}/.well-known/`))).toBe(true)
      expect(requests.some((request) => /^POST .*\/register$/.test(request))).toBe(true)
      expect(requests.some((request) => /^GET .*\/authorize$/.test(request))).toBe(true)
      expect(seen(`GET ${appOrigin}/callback`)).toBe(true)
      expect(requests.some((request) => /^POST .*\/token$/.test(request))).toBe(true)

      // The pending authorization (state, PKCE verifier) lived in session storage and is gone; the tokens stay.
      const storage = await page.evaluate(() => ({
        session: Object.keys(sessionStorage),
        local: Object.keys(localStorage),
      }))
      expect(storage.session).toEqual([])
      expect(storage.local).toContain(`keyway:tokens:${stack.mcpUrl}`)
    } finally {
      await context.close()
    }
    // Alone it takes about 4 s; beside the rest of the suite on two cores, several times that.
  }, 180_000)
})
