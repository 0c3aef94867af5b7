/**
 * One authorization server under test, in a process of its own so that its CPU time is its own: Keyway over one
 * storage, or panva's oidc-provider on its built-in memory adapter. Started by bench/token-endpoint.ts with the
 * target and its settings as JSON in argv[2]; prints one line of JSON (its endpoints) when it listens, and answers
 * `GET /cpu` on a second port with its `process.cpuUsage()` (microseconds, user + system), which the load generator
 * reads at the start and the end of each measured window.
 *
 * Both servers are set up alike: one public client (PKCE S256 required, refresh tokens rotated on every use), one
 * resource (RFC 8707) with one scope, ES256-signed JWT access tokens for it, a user whose browser session and consent
 * are established once, by the login and consent steps, before anything is measured.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { Layer, ManagedRuntime } from "effect"
import { exportJWK, generateKeyPair } from "jose"
import Provider from "oidc-provider"
import type * as Keyway from "../dist/index.js"

export interface Settings {
  /** Keyway's library on its Web handler, Keyway's runnable app (apps/authorization-server), or oidc-provider. */
  readonly target: "keyway" | "app" | "oidc-provider"
  /** Keyway's storage: a SQLite file (`groupCommit` as given), its in-memory store, or a PostgreSQL database. */
  readonly storage?:
    | { readonly type: "sqlite"; readonly path: string; readonly groupCommit: boolean }
    | { readonly type: "app"; readonly dataDir: string; readonly password: string }
    | { readonly type: "memory" }
    | { readonly type: "postgres"; readonly connectionString: string }
  readonly clientId: string
  readonly redirectUri: string
  readonly resource: string
  readonly scope: string
  /** Another build of this package to run instead of `dist` (its `index.js`), for before/after rows. */
  readonly module?: string
}

/** What the bench needs to drive a server. */
export interface Endpoints {
  readonly authorization: string
  readonly token: string
  readonly cpu: string
  /** Where the login and consent steps start (Keyway's pages, or oidc-provider's interaction, answered here). */
  readonly flavour: "keyway" | "oidc-provider"
}

const settings = JSON.parse(process.argv[2] ?? "{}") as Settings
const { AuthorizationServer, NodeServer, Storage, UserAuthenticator } = (await import(
  settings.module ?? "../dist/index.js"
)) as typeof Keyway

const listenOn = async (handler: (req: IncomingMessage, res: ServerResponse) => void) => {
  const server = createServer(handler)
  server.keepAliveTimeout = 60_000
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
}

const control = await listenOn((_req, res) => {
  const { user, system } = process.cpuUsage()
  const thread = process.threadCpuUsage()
  res
    .writeHead(200, { "content-type": "application/json" })
    .end(JSON.stringify({ cpu: user + system, thread: thread.user + thread.system }))
})

const keyway = async (): Promise<Endpoints> => {
  const s = settings.storage ?? { type: "memory" }
  const storage =
    s.type === "sqlite"
      ? Storage.layerSqlite({ path: s.path, groupCommit: s.groupCommit })
      : s.type === "postgres"
        ? Storage.layerPostgres({ connectionString: s.connectionString })
        : Storage.layerMemory
  let handler: (request: Request) => Promise<Response> = async () => new Response(null, { status: 503 })
  const running = await NodeServer.listen((request) => handler(request))
  const runtime = ManagedRuntime.make(
    AuthorizationServer.AuthorizationServer.layer({
      issuer: running.url,
      development: { allowHttpLoopbackIssuer: true },
      warn: () => undefined,
      resources: [{ uri: settings.resource, scopes: { [settings.scope]: "Read" } }],
      clients: [{ clientId: settings.clientId, redirectUris: [settings.redirectUri] }],
      // One client sends every request here, far over the per-client and per-family limits a real client would meet.
      rateLimits: { token: false, refresh: false },
    }).pipe(
      Layer.provideMerge(
        Layer.merge(
          storage,
          // The bench's user signs in once; how a password is checked is not what is measured.
          UserAuthenticator.UserAuthenticator.fromFunction(async ({ username }) => ({
            subject: username,
            displayName: username,
          })),
        ),
      ),
    ),
  )
  handler = (request) => runtime.runPromise(AuthorizationServer.AuthorizationServer.use((a) => a.handle(request)))
  return {
    authorization: `${running.url}/authorize`,
    token: `${running.url}/token`,
    cpu: `${control.url}/cpu`,
    flavour: "keyway",
  }
}

const oidcProvider = async (): Promise<Endpoints> => {
  const { privateKey } = await generateKeyPair("ES256", { extractable: true })
  const signing = { ...(await exportJWK(privateKey)), kid: "bench-es256", alg: "ES256", use: "sig" }
  let provider: Provider | undefined
  const { url } = await listenOn((req, res) => {
    if (req.url?.startsWith("/interaction/") === true) void interaction(req, res)
    else provider!.callback()(req, res)
  })
  provider = new Provider(url, {
    clients: [
      {
        client_id: settings.clientId,
        // A web client: oidc-provider asks a native one for consent on every authorization.
        application_type: "web",
        token_endpoint_auth_method: "none",
        redirect_uris: [settings.redirectUri],
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        id_token_signed_response_alg: "ES256",
      },
    ],
    jwks: { keys: [signing] },
    cookies: { keys: ["a bench key that is long enough to sign the cookies"] },
    features: {
      devInteractions: { enabled: false },
      resourceIndicators: {
        enabled: true,
        defaultResource: () => settings.resource,
        useGrantedResource: () => true,
        getResourceServerInfo: () => ({
          scope: settings.scope,
          audience: settings.resource,
          accessTokenFormat: "jwt",
          jwt: { sign: { alg: "ES256" } },
        }),
      },
    },
    // As Keyway: a refresh token for every client allowed the grant, not tied to the browser session.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed("refresh_token"),
    expiresWithSession: async () => false,
    findAccount: (_ctx, sub) => ({ accountId: sub, claims: () => ({ sub }) }),
  })
  // The login and consent step, once per bench run: the user signs in and grants the resource's scope.
  const interaction = async (req: IncomingMessage, res: ServerResponse) => {
    try {
      const accountId = "bench-user"
      const grant = new provider!.Grant({ accountId, clientId: settings.clientId })
      grant.addResourceScope(settings.resource, settings.scope)
      const grantId = await grant.save()
      await provider!.interactionFinished(
        req,
        res,
        { login: { accountId }, consent: { grantId } },
        { mergeWithLastSubmission: false },
      )
    } catch (error) {
      res.writeHead(500).end(String(error))
    }
  }
  return { authorization: `${url}/auth`, token: `${url}/token`, cpu: `${control.url}/cpu`, flavour: "oidc-provider" }
}

/**
 * The runnable app as its users start it (`startAuthorizationServer` of apps/authorization-server, built), on its
 * default storage (SQLite in its data directory) with its own users: the bench's user with the bench's password.
 */
const app = async (): Promise<Endpoints> => {
  const s = settings.storage
  if (s?.type !== "app") throw new Error("the app target needs its data directory and password")
  const { startAuthorizationServer } = (await import("../../../apps/authorization-server/dist/index.js")) as {
    startAuthorizationServer: (config: object, options: object) => Promise<{ readonly issuer: string }>
  }
  const running = await startAuthorizationServer(
    {
      port: 0,
      dataDir: s.dataDir,
      users: [{ username: "bench-user", password: s.password }],
      resources: [{ uri: settings.resource, scopes: { [settings.scope]: "Read" } }],
      clients: [{ clientId: settings.clientId, redirectUris: [settings.redirectUri] }],
      // One client sends every request here, far over the per-client and per-family limits a real client would meet.
      rateLimits: false,
    },
    { log: () => undefined },
  )
  return {
    authorization: `${running.issuer}/authorize`,
    token: `${running.issuer}/token`,
    cpu: `${control.url}/cpu`,
    flavour: "keyway",
  }
}

const endpoints =
  settings.target === "keyway" ? await keyway() : settings.target === "app" ? await app() : await oidcProvider()
process.stdout.write(`${JSON.stringify(endpoints)}\n`)
// A normal exit on SIGTERM, so that a `--cpu-prof` run writes its profile.
process.on("SIGTERM", () => process.exit(0))
