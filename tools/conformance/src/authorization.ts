/**
 * Runs the official MCP conformance suite's authorization-server scenarios (`conformance authorization`:
 * `authorization-server-metadata-endpoint` and `authorization-code-grant`) against Keyway's runnable authorization
 * server (`@keyway/app-authorization-server`), with a registered test client, a demo user, and headless Chromium
 * playing the user at the login and consent pages.
 *
 * The suite prints the authorization request URL and waits on its callback server at
 * `http://127.0.0.1:<port>/callback`; the runner reads the URL from the suite's output, opens it in Chromium,
 * signs in, approves, and lets the browser follow the redirect to the suite's callback. The suite then redeems the
 * code at the token endpoint and judges both responses.
 *
 * @see {@link https://github.com/modelcontextprotocol/conformance | MCP conformance suite}
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process"
import { randomBytes } from "node:crypto"
import { mkdir, mkdtemp, writeFile } from "node:fs/promises"
import { join } from "node:path"
import { startAuthorizationServer } from "@keyway/app-authorization-server"
import { freePort, launchChromium } from "@keyway/testing"
import type { Browser, Page } from "playwright-core"
import { type Check, oneLine, readChecks, resultDirectory, unknownSpecVersion } from "./internal/results.js"
import { type AuthorizationRun, type RunOutcome, type ScenarioResult, suiteCli } from "./runner.js"

/** The registered test client's id. */
export const TEST_CLIENT_ID = "keyway-conformance"

/**
 * The protected resource the test client asks a token for (RFC 8707 `resource`): an MCP endpoint URL on loopback.
 * The authorization server never contacts it; it is the audience of the token.
 */
export const TEST_RESOURCE = "http://127.0.0.1:9100/mcp"

/** The demo user Chromium signs in as. */
export const TEST_USERNAME = "conformance"

/** Options of {@link startAuthorizationServerFixture}. */
export interface FixtureOptions {
  /**
   * Registers the test client as a confidential `client_secret_basic` client and gives the suite its secret.
   * Off by default: the suite's token request then carries no secret (see the README).
   */
  readonly confidential?: boolean
}

/** A running authorization server with the test client, the demo user and the resource. */
export interface AuthorizationServerFixture {
  readonly issuer: string
  readonly clientId: string
  readonly clientSecret?: string
  readonly resource: string
  readonly username: string
  readonly password: string
  /** Every line the server logged, in order (never a password or a token). */
  readonly log: ReadonlyArray<string>
  readonly close: () => Promise<void>
}

const secret = (): string => randomBytes(24).toString("base64url")

/**
 * Starts `@keyway/app-authorization-server` on 127.0.0.1 (any free port, loopback http issuer) with its SQLite
 * database in `dataDir`. The test client's redirect URI is `http://127.0.0.1/callback`: the server accepts any port
 * for a loopback IP redirect URI, as native apps need (RFC 8252 §7.3), and the suite listens on a port of its own.
 */
export const startAuthorizationServerFixture = async (
  dataDir: string,
  options: FixtureOptions = {},
): Promise<AuthorizationServerFixture> => {
  const password = secret()
  const clientSecret = options.confidential === true ? secret() : undefined
  const log: string[] = []
  const server = await startAuthorizationServer(
    {
      port: 0,
      dataDir,
      users: [{ username: TEST_USERNAME, password, displayName: "Conformance Tester" }],
      clients: [
        {
          clientId: TEST_CLIENT_ID,
          clientName: "MCP Conformance Suite",
          redirectUris: ["http://127.0.0.1/callback"],
          ...(clientSecret === undefined
            ? { tokenEndpointAuthMethod: "none" as const }
            : { tokenEndpointAuthMethod: "client_secret_basic" as const, clientSecret }),
        },
      ],
      resources: [
        {
          uri: TEST_RESOURCE,
          name: "Conformance MCP server",
          scopes: { "notes:read": "Read your notes", "notes:write": "Write your notes" },
        },
      ],
    },
    { log: (line) => log.push(line) },
  )
  return {
    issuer: server.issuer,
    clientId: TEST_CLIENT_ID,
    ...(clientSecret === undefined ? {} : { clientSecret }),
    resource: TEST_RESOURCE,
    username: TEST_USERNAME,
    password,
    log,
    close: server.close,
  }
}

/** The authorization server fixture and a headless Chromium, shared by the authorization-server runs. */
export interface AuthorizationEnvironment {
  readonly fixture: AuthorizationServerFixture
  readonly browser: Browser
  readonly close: () => Promise<void>
}

/** Starts the fixture (its data in a fresh directory under `workDir`) and Chromium. */
export const startAuthorizationEnvironment = async (
  workDir: string,
  options: FixtureOptions = {},
): Promise<AuthorizationEnvironment> => {
  await mkdir(workDir, { recursive: true })
  const fixture = await startAuthorizationServerFixture(await mkdtemp(join(workDir, "authorization-server-")), options)
  let chromium: Awaited<ReturnType<typeof launchChromium>>
  try {
    chromium = await launchChromium()
  } catch (error) {
    await fixture.close()
    throw error
  }
  return {
    fixture,
    browser: chromium.browser,
    close: async () => {
      await chromium.close()
      await fixture.close()
    },
  }
}

/** Who signs in at the login page; the fixture's demo user unless a test says otherwise. */
export interface Login {
  readonly username: string
  readonly password: string
}

/** What the page says when it shows an error (`role="alert"`), or its heading. */
const pageSays = async (page: Page): Promise<string> => {
  const alert = page.getByRole("alert").first()
  const heading = oneLine(
    (await page
      .locator("h1")
      .first()
      .textContent()
      .catch(() => null)) ?? "",
  )
  const text = (await alert.isVisible()) ? oneLine((await alert.textContent()) ?? "") : ""
  return `"${heading}" at ${new URL(page.url()).pathname}${text === "" ? "" : `: ${text}`}`
}

/**
 * Plays the user: opens the authorization request, signs in, approves on the consent page (unless the server
 * remembers an earlier consent and redirects at once), and waits until the browser reaches the callback.
 * Rejects with what the page says when the server shows an error or refuses the login.
 */
export const playLoginAndConsent = async (
  browser: Browser,
  authorizationUrl: string,
  callbackOrigin: string,
  login: Login,
  timeoutMs: number,
): Promise<void> => {
  const context = await browser.newContext()
  try {
    const page = await context.newPage()
    page.setDefaultTimeout(timeoutMs)
    page.setDefaultNavigationTimeout(timeoutMs)
    const atCallback = () => page.url().startsWith(`${callbackOrigin}/`)
    const landed = page.waitForURL((url) => url.origin === callbackOrigin, { waitUntil: "commit" })
    // Observed below; without a handler a closed page would reject it unobserved.
    landed.catch(() => undefined)
    const signIn = page.getByRole("button", { name: "Sign in" })
    const approve = page.getByRole("button", { name: "Approve" })
    const alert = page.getByRole("alert")
    await page.goto(authorizationUrl, { waitUntil: "commit" })
    await Promise.race([landed, signIn.or(alert).first().waitFor()])
    if (atCallback()) return
    if (!(await signIn.isVisible()) || (await alert.isVisible())) {
      throw new Error(`the authorization server showed ${await pageSays(page)} instead of the login page`)
    }
    await page.getByLabel("Username").fill(login.username)
    await page.getByLabel("Password").fill(login.password)
    await signIn.click()
    await Promise.race([landed, approve.or(alert).first().waitFor()])
    if (atCallback()) return
    if (await alert.isVisible()) throw new Error(`the login failed: the page showed ${await pageSays(page)}`)
    await approve.click()
    await landed
  } finally {
    await context.close()
  }
}

/** Options of {@link executeAuthorizationRun}. */
export interface AuthorizationRunOptions {
  /** Where the suite writes each scenario's checks.json. */
  readonly outputDir: string
  /** For each browser step; the whole run is given twice as long. */
  readonly timeoutMs: number
  /** Who signs in; the fixture's demo user by default. */
  readonly login?: Login
}

const AUTHORIZATION_PREFIX = "authorization-server-"
const RUNNING_SCENARIO = /^=== Running scenario: (\S+) ===$/gmu

/** Server log lines that explain a failure: refusals, failed logins, errors. */
const telling = (line: string): boolean => /refused|failed|denied|error|invalid/iu.test(line)

/** Judges one scenario from its checks: passed when one check succeeded and none failed or warned. */
const judge = (run: AuthorizationRun, scenario: string, checks: ReadonlyArray<Check>): ScenarioResult => {
  const count = (status: string) => checks.filter((check) => check.status === status).length
  const passed = count("SUCCESS") > 0 && count("FAILURE") === 0 && count("WARNING") === 0
  const bad = checks
    .filter((check) => check.status !== "SUCCESS" && check.status !== "INFO")
    .map(
      (check) =>
        `${check.status.toLowerCase()} ${check.id}: ${check.description ?? ""}` +
        (check.errorMessage === undefined ? "" : ` (${check.errorMessage})`),
    )
  return {
    run: run.label,
    scenario,
    passed,
    checksPassed: count("SUCCESS"),
    checksFailed: count("FAILURE"),
    warnings: count("WARNING"),
    ...(passed || bad.length === 0 ? {} : { detail: oneLine([...new Set(bad)].join("; ")) }),
  }
}

/**
 * Runs `conformance authorization --spec-version <v>` against the fixture and plays the login and consent when the
 * suite asks for them. A scenario without a result (the suite was stopped because the browser could not complete
 * the flow, or the run timed out) fails with the reason. Throws when the suite ran no scenario at all.
 */
export const executeAuthorizationRun = async (
  run: AuthorizationRun,
  environment: Pick<AuthorizationEnvironment, "fixture" | "browser">,
  options: AuthorizationRunOptions,
): Promise<RunOutcome> => {
  const cli = suiteCli()
  const { fixture, browser } = environment
  const outputDir = join(options.outputDir, run.label.replace(/[^a-z0-9.-]+/giu, "_"))
  await mkdir(outputDir, { recursive: true })
  const port = await freePort()
  const callbackOrigin = `http://127.0.0.1:${port}`
  // The settings file keeps the client secret off the command line. The port goes on the command line: the suite
  // lets its --port default (3000) override the file's port.
  const settings = join(outputDir, "settings.json")
  await writeFile(
    settings,
    JSON.stringify({
      url: fixture.issuer,
      clientId: fixture.clientId,
      ...(fixture.clientSecret === undefined ? {} : { clientSecret: fixture.clientSecret }),
      resource: fixture.resource,
    }),
    { mode: 0o600 },
  )
  const logStart = fixture.log.length
  const authorizationEndpoint = `${fixture.issuer.replace(/\/$/u, "")}/authorize?`
  const child: ChildProcess = spawn(
    process.execPath,
    [
      cli.path,
      "authorization",
      "--file",
      settings,
      "--port",
      String(port),
      "--spec-version",
      run.specVersion,
      "-o",
      outputDir,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  )
  let stdout = ""
  let stderr = ""
  let stopped: string | undefined
  let browsing: Promise<void> | undefined
  const stop = (reason: string) => {
    stopped ??= reason
    child.kill("SIGTERM")
  }
  const deadline = setTimeout(
    () => stop(`the run did not end within ${2 * options.timeoutMs} ms`),
    2 * options.timeoutMs,
  )
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString()
    if (browsing !== undefined) return
    // Only complete lines: a chunk may end inside the URL.
    const url = stdout
      .split("\n")
      .slice(0, -1)
      .find((line) => line.trim().startsWith(authorizationEndpoint))
    if (url === undefined) return
    browsing = playLoginAndConsent(
      browser,
      url.trim(),
      callbackOrigin,
      options.login ?? fixture,
      options.timeoutMs,
    ).catch((error: unknown) => {
      stop(
        `the browser could not complete the authorization: ${error instanceof Error ? error.message : String(error)}`,
      )
    })
  })
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const code = await new Promise<number>((resolve, reject) => {
    child.on("error", reject)
    child.on("close", (exit) => resolve(exit ?? 1))
  }).finally(() => clearTimeout(deadline))
  await browsing
  const unknown = unknownSpecVersion(stderr, cli.version, run.specVersion)
  if (unknown !== undefined) return { run, available: false, note: unknown, results: [] }
  const scenarios = [...stdout.matchAll(RUNNING_SCENARIO)].map((match) => match[1] ?? "")
  if (scenarios.length === 0) {
    throw new Error(
      `the conformance suite "${run.label}" ended (exit ${code}) without running a scenario: ${oneLine(stopped ?? stderr)}`,
    )
  }
  if (stopped === undefined && !stdout.includes("=== SUMMARY ===")) {
    throw new Error(`the conformance suite "${run.label}" ended (exit ${code}) without a summary: ${oneLine(stderr)}`)
  }
  const serverSaid = fixture.log
    .slice(logStart)
    .filter(telling)
    .map((line) => `authorization server: ${line}`)
  const results: ScenarioResult[] = []
  for (const scenario of scenarios) {
    const directory = await resultDirectory(outputDir, scenario, AUTHORIZATION_PREFIX)
    // The suite makes the directory when the scenario starts and writes checks.json when it ends.
    const checks = directory === undefined ? undefined : await readChecks(directory).catch(() => undefined)
    const result =
      checks === undefined
        ? {
            run: run.label,
            scenario,
            passed: false,
            checksPassed: 0,
            checksFailed: 1,
            warnings: 0,
            detail: stopped ?? `the suite wrote no result (exit ${code}): ${oneLine(stderr)}`,
          }
        : judge(run, scenario, checks)
    const detail = [result.detail, ...serverSaid].filter((part) => part !== undefined).join("; ")
    results.push(result.passed ? result : { ...result, detail: oneLine(detail) })
  }
  return { run, available: true, results }
}
