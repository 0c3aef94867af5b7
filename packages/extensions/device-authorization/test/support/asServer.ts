import { AuthorizationServer, NodeServer, Operations, Storage, UserAuthenticator } from "@keyway/authorization-server"
import { Grant } from "@keyway/core"
import { Clock, type Effect, Layer, ManagedRuntime } from "effect"
import { TestClock } from "effect/testing"
import { type DeviceAuthorizationOptions, deviceAuthorization } from "../../src/authorization-server.js"

export const MCP = "https://mcp.example.com/mcp"
export const SECRET = "s3cr3t-s3cr3t-s3cr3t-s3cr3t-s3cr3t-0123"
export const PASSWORD = "correct horse battery staple"
export const START = 1_800_000_000

let aliceHash: string | undefined
const alicePasswordHash = async () => {
  aliceHash ??= await UserAuthenticator.hashPassword(PASSWORD)
  return aliceHash
}

export interface DeviceServer {
  /** Where this instance answers (the issuer unless it stands behind another's). */
  readonly url: string
  readonly issuer: string
  /** Moves the server's `TestClock` forward. */
  readonly adjust: (seconds: number) => Promise<void>
  readonly now: () => number
  /** Runs an effect on the server's stores and clock (`Administration`, `GrantStore`). */
  readonly run: <A, E>(effect: Effect.Effect<A, E, AuthorizationServer.StorageServices>) => Promise<A>
  readonly close: () => Promise<void>
}

/**
 * Keyway's authorization server (Effect face, on `TestClock` from {@link START}) with the device authorization
 * extension, on a loopback port, over `storage` (memory by default). Clients: `-tv` (public, device and refresh
 * grants), `box` (client_secret_basic, device grant), `web` (public, code flow only), `narrow` (public, device grant,
 * registered with `tools:read` only).
 */
export const startDeviceServer = async (
  options: {
    readonly storage?: Layer.Layer<AuthorizationServer.StorageServices, Storage.StorageError>
    readonly device?: DeviceAuthorizationOptions
    /** The issuer of another instance this one stands behind (one database serves one issuer). */
    readonly issuer?: string
    /** The resource's URI; {@link MCP} by default. */
    readonly resource?: string
    /** Where the clock starts, in seconds since the epoch; {@link START} by default. */
    readonly startAt?: number
    /** Receives the server's security events. */
    readonly onSecurityEvent?: Operations.SecurityEventFn
    /** Turns dynamic client registration on (RFC 7591). */
    readonly registration?: boolean
  } = {},
): Promise<DeviceServer> => {
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
  const running = await NodeServer.listen((request) => handler(request))
  const users = [{ username: "alice", passwordHash: await alicePasswordHash(), displayName: "Alice Example" }]
  const serverOptions: AuthorizationServer.ServerOptions = {
    issuer: options.issuer ?? running.url,
    development: { allowHttpLoopbackIssuer: true },
    warn: () => undefined,
    // Both instances of one issuer sign the same session cookies.
    sessionSecret: "device-tests-session-secret-0123456789",
    resources: [
      {
        uri: options.resource ?? MCP,
        name: "Example MCP",
        scopes: { "tools:read": "List the tools", "tools:call": "Call tools for you" },
      },
    ],
    users,
    // `box` may introspect, to see what a revocation did to the access tokens.
    introspectionClients: ["box"],
    clients: [
      {
        clientId: "-tv",
        clientName: "Living Room TV",
        redirectUris: [],
        grantTypes: [Grant.DEVICE_CODE, "refresh_token"],
      },
      {
        clientId: "box",
        clientName: "Build Box",
        redirectUris: [],
        grantTypes: [Grant.DEVICE_CODE],
        clientSecret: SECRET,
        tokenEndpointAuthMethod: "client_secret_basic",
      },
      { clientId: "web", clientName: "Web", redirectUris: ["https://web.example.com/cb"] },
      { clientId: "narrow", redirectUris: [], grantTypes: [Grant.DEVICE_CODE], scope: "tools:read" },
    ],
    extensions: [deviceAuthorization(options.device)],
    ...(options.registration === true ? { registration: true } : {}),
  }
  const runtime = ManagedRuntime.make(
    AuthorizationServer.AuthorizationServer.layer(serverOptions).pipe(
      Layer.provideMerge(
        Layer.merge(options.storage ?? Storage.layerMemory, UserAuthenticator.UserAuthenticator.layerUsers(users)),
      ),
      Layer.provideMerge(Layer.succeed(Operations.SecurityEvents)(options.onSecurityEvent)),
      Layer.provideMerge(
        Layer.provideMerge(
          Layer.effectDiscard(TestClock.setTime((options.startAt ?? START) * 1000)),
          TestClock.layer(),
        ),
      ),
    ),
  )
  handler = (request) => runtime.runPromise(AuthorizationServer.AuthorizationServer.use((s) => s.handle(request)))
  await runtime.runPromise(AuthorizationServer.AuthorizationServer.useSync(() => undefined))
  return {
    url: running.url,
    issuer: serverOptions.issuer,
    adjust: (seconds) => runtime.runPromise(TestClock.adjust(seconds * 1000)),
    now: () => Math.floor(runtime.runSync(Clock.currentTimeMillis) / 1000),
    run: (effect) => runtime.runPromise(effect),
    close: async () => {
      await running.close()
      await runtime.dispose()
    },
  }
}

const FORM = { "content-type": "application/x-www-form-urlencoded" }

/** POSTs a form to `path` of the instance at `url`. */
export const post = (url: string, path: string, values: Record<string, string>, headers: Record<string, string> = {}) =>
  fetch(`${url}${path}`, {
    method: "POST",
    redirect: "manual",
    headers: { ...FORM, ...headers },
    body: new URLSearchParams(values).toString(),
  })

export const cookieOf = (response: Response): string | undefined => response.headers.getSetCookie()[0]?.split(";")[0]
export const csrfOf = (html: string): string => /name="csrf_token" value="([^"]+)"/.exec(html)?.[1] ?? ""

/** A device authorization for `-tv` unless the values say otherwise; its JSON. */
export const authorizeDevice = async (url: string, values: Record<string, string> = {}) => {
  const response = await post(url, "/device_authorization", { client_id: "-tv", resource: MCP, ...values })
  if (response.status !== 200) throw new Error(`device authorization answered ${response.status}`)
  return (await response.json()) as {
    readonly device_code: string
    readonly user_code: string
    readonly verification_uri: string
    readonly verification_uri_complete: string
    readonly expires_in: number
    readonly interval: number
  }
}

/** Polls the token endpoint once for `-tv` (or `values.client_id`). */
export const poll = (
  url: string,
  deviceCode: string,
  values: Record<string, string | undefined> = {},
  headers: Record<string, string> = {},
) => {
  const all: Record<string, string | undefined> = {
    grant_type: Grant.DEVICE_CODE,
    device_code: deviceCode,
    client_id: "-tv",
    ...values,
  }
  const sent = Object.fromEntries(Object.entries(all).filter((e): e is [string, string] => e[1] !== undefined))
  return post(url, "/token", sent, headers)
}

/** alice signs in on the verification page; the session cookie. */
export const signIn = async (url: string): Promise<string> => {
  const first = await fetch(`${url}/device`)
  const cookie = cookieOf(first) ?? ""
  const login = await post(
    url,
    "/device",
    { csrf_token: csrfOf(await first.text()), request: "", username: "alice", password: PASSWORD },
    { cookie },
  )
  if (login.status !== 303) throw new Error(`login answered ${login.status}`)
  return cookieOf(login) ?? ""
}

/** Enters `userCode` on the page (signed in with `cookie`); the answer. */
export const enterCode = async (url: string, cookie: string, userCode: string) => {
  const page = await fetch(`${url}/device`, { headers: { cookie } })
  return post(url, "/device", { csrf_token: csrfOf(await page.text()), user_code: userCode }, { cookie })
}

/** alice enters the code and decides; the final page's HTML. */
export const decide = async (url: string, userCode: string, decision: "approve" | "deny", cookie?: string) => {
  const session = cookie ?? (await signIn(url))
  const consent = await enterCode(url, session, userCode)
  if (consent.status !== 200) throw new Error(`code entry answered ${consent.status}`)
  const html = await consent.text()
  const answer = await post(
    url,
    "/device",
    { csrf_token: csrfOf(html), user_code: userCode, decision },
    { cookie: session },
  )
  return { status: answer.status, html: await answer.text(), consent: html }
}
