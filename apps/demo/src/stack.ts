/**
 * The demo stack: the Keyway authorization server (fresh SQLite in a temporary directory) and the notes MCP server,
 * both on loopback, with a demo user and a pre-registered confidential client.
 *
 * @module
 */
import { randomBytes } from "node:crypto"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { startAuthorizationServer } from "@keyway/app-authorization-server"
import { CALENDAR_SCOPES, NOTE_SCOPES, startCalendarService, startMcpServer } from "@keyway/app-mcp-server"
import { UserAuthenticator } from "@keyway/authorization-server"
import { Grant } from "@keyway/core"
import { dpopScheme } from "@keyway/ext-dpop/resource-server"
import { freePort } from "@keyway/testing"
import { type RunningCodeHost, startCodeHost } from "@keyway/testing/code-host"
import type { Clock } from "effect"
import type { FetchLike } from "./recorder.js"

/** The user who signs in on the login page. */
export interface DemoUser {
  readonly username: string
  readonly password: string
}

/** A pre-registered client, in the JSON shape `--serve` prints (RFC 7591 §3.2.1 member names). */
export interface DemoClient {
  readonly client_id: string
  /** Absent for the public client (RFC 7591 §2: `token_endpoint_auth_method` `none`). */
  readonly client_secret?: string
  readonly redirect_uris: ReadonlyArray<string>
}

/** A running stack. */
export interface Stack {
  /** The authorization server's issuer identifier. */
  readonly issuer: string
  /** The MCP endpoint, which is the protected resource identifier. */
  readonly mcpUrl: string
  readonly dataDir: string
  readonly users: ReadonlyArray<DemoUser>
  readonly clients: ReadonlyArray<DemoClient>
  /** With {@link StackOptions.downstream}: the calendar API and the resource no exchange may target. */
  readonly downstream?: {
    /** The calendar API, its resource identifier. */
    readonly calendarUrl: string
    /** A resource the authorization server knows but the notes server's exchange rules do not name. */
    readonly otherResource: string
  }
  /** With {@link StackOptions.connected}: the code host (its own authorization server and API). */
  readonly codeHost?: RunningCodeHost
  /** Stops both servers and removes the data directory; safe to call more than once. */
  readonly close: () => Promise<void>
}

/** Options of {@link startStack}. */
export interface StackOptions {
  /** Port of the authorization server; a free one when absent or 0. */
  readonly asPort?: number
  /** Port of the MCP server; a free one when absent or 0. */
  readonly mcpPort?: number
  /** Where both servers' log lines go. */
  readonly log?: (source: "authorization server" | "MCP server" | "calendar" | "code host", line: string) => void
  /** The demo user's password; generated when absent. */
  readonly password?: string
  /**
   * Pre-registers a machine client for the client credentials extension (and turns the extension on): it may obtain
   * tokens with `notes:read` only.
   */
  readonly machineClient?: boolean
  /**
   * Trusts a workload issuer for workload identity federation (and turns the extension on): its workloads whose `sub`
   * is `subject` may obtain tokens with `notes:read` only. Its keys are fetched over http on loopback (development).
   */
  readonly workloadIssuer?: { readonly issuer: string; readonly jwksUri: string; readonly subject: string }
  /**
   * Turns DPoP on at both servers (RFC 9449), nonces included: the authorization server binds tokens to the proof's
   * key, the MCP server accepts the `DPoP` scheme beside Bearer.
   */
  readonly dpop?: boolean
  /**
   * Starts the calendar API beside the notes server and turns token exchange on (RFC 8693): the notes server, a
   * confidential client of its own, may exchange a user's token for the notes server (`notes:read`) for one for the
   * calendar (`calendar:read`), which accepts it with the notes server as actor. `fetch` is what the notes server's
   * outbound calls (the exchange, the calendar) go through.
   */
  readonly downstream?: { readonly fetch?: FetchLike }
  /**
   * Starts a code host (node-oidc-provider and its API, `@keyway/testing`) and gives the notes server connected
   * accounts there (`list_code_repositories`), its connections reading `clock`; `fetch` is what they send the code
   * host through.
   */
  readonly connected?: { readonly clock?: Clock.Clock; readonly fetch?: FetchLike }
  /**
   * Turns the device authorization grant on (RFC 8628) with a polling interval of 1 second, so the demo does not wait
   * the default 5, and pre-registers the public client {@link DEVICE_CLIENT_ID} for it.
   */
  readonly device?: boolean
}

/** The notes server's client at the code host of the connected-account scenario. */
export const CODE_HOST_CLIENT_ID = "keyway-notes"
/** Seconds a code host access token lives (shorter than a connect flow's 600, so the completion page outlives it). */
export const CODE_HOST_TOKEN_TTL = 300

/** Re-exported for the demo's users: a loopback port that was free a moment ago. */
export { freePort }

/** The confidential client every stack pre-registers (`client_secret_basic`). */
export const CONFIDENTIAL_CLIENT_ID = "demo-confidential"
/** The public client every stack pre-registers (PKCE only, no secret). */
export const PUBLIC_CLIENT_ID = "demo-public"
/** The machine client of the client credentials scenario (`client_secret_basic`, `notes:read` only). */
export const MACHINE_CLIENT_ID = "demo-machine"
/** The notes MCP server's own client at the authorization server, for token exchange (`client_secret_basic`). */
export const NOTES_SERVER_CLIENT_ID = "notes-server"
/** The public client of the device scenario: the device authorization and refresh grants, no redirect URI. */
export const DEVICE_CLIENT_ID = "demo-device"
/** The demo user's name. */
export const DEMO_USERNAME = "alice"
/** Loopback redirect without a port: any port matches (RFC 8252 §7.3). */
export const LOOPBACK_REDIRECT = "http://127.0.0.1/callback"

/**
 * Starts the authorization server, then the MCP server. Both need each other's URL, so the ports are chosen first;
 * on any failure whatever started is stopped again.
 */
export const startStack = async (options: StackOptions = {}): Promise<Stack> => {
  const chosen = (port: number | undefined) => (port !== undefined && port !== 0 ? port : undefined)
  // A port found free may be taken by another process before the server binds it: with ports of our choosing, try
  // again with new ones (a few times); a port the caller asked for is the caller's to free.
  for (let attempt = 1; ; attempt++) {
    const asPort = chosen(options.asPort) ?? (await freePort())
    const mcpPort = chosen(options.mcpPort) ?? (await freePort())
    try {
      return await startOn(options, asPort, mcpPort)
    } catch (error) {
      const taken = (error as { code?: unknown } | null)?.code === "EADDRINUSE"
      const ours = chosen(options.asPort) === undefined || chosen(options.mcpPort) === undefined
      if (!taken || !ours || attempt >= 5) throw error
    }
  }
}

/** The calendar's events for the demo user: today's and tomorrow's (demo data reads the wall clock). */
const demoEvents = () => {
  const day = (offset: number) => new Date(Date.now() + offset * 86_400_000).toISOString().slice(0, 10)
  return [
    { day: day(0), start: "09:30", end: "09:45", title: "Standup" },
    { day: day(0), start: "14:00", end: "15:00", title: "Design review: token exchange" },
    { day: day(1), start: "11:00", end: "11:30", title: "1:1 with Bob" },
  ]
}

const startOn = async (options: StackOptions, asPort: number, mcpPort: number): Promise<Stack> => {
  const log = options.log ?? (() => {})
  const issuer = `http://127.0.0.1:${asPort}`
  const mcpUrl = `http://127.0.0.1:${mcpPort}/mcp`
  const downstream =
    options.downstream === undefined
      ? undefined
      : {
          calendarPort: await freePort(),
          otherResource: `http://127.0.0.1:${await freePort()}/payroll`,
          clientSecret: randomBytes(32).toString("base64url"),
          fetch: options.downstream.fetch,
        }
  const calendarUrl = downstream === undefined ? undefined : `http://127.0.0.1:${downstream.calendarPort}/calendar`
  const user: DemoUser = {
    username: DEMO_USERNAME,
    password: options.password ?? randomBytes(12).toString("base64url"),
  }
  const clientSecret = randomBytes(32).toString("base64url")
  const client: DemoClient = {
    client_id: CONFIDENTIAL_CLIENT_ID,
    client_secret: clientSecret,
    redirect_uris: [LOOPBACK_REDIRECT],
  }
  const publicClient: DemoClient = { client_id: PUBLIC_CLIENT_ID, redirect_uris: [LOOPBACK_REDIRECT] }
  const machineClient: DemoClient | undefined =
    options.machineClient === true
      ? { client_id: MACHINE_CLIENT_ID, client_secret: randomBytes(32).toString("base64url"), redirect_uris: [] }
      : undefined
  const dataDir = await mkdtemp(join(tmpdir(), "keyway-demo-"))
  const removeData = () => rm(dataDir, { recursive: true, force: true })
  let as: Awaited<ReturnType<typeof startAuthorizationServer>> | undefined
  let calendar: Awaited<ReturnType<typeof startCalendarService>> | undefined
  let codeHost: RunningCodeHost | undefined
  try {
    as = await startAuthorizationServer(
      {
        issuer,
        port: asPort,
        dataDir,
        users: [
          {
            username: user.username,
            passwordHash: await UserAuthenticator.hashPassword(user.password),
            displayName: "Alice (demo user)",
          },
        ],
        clients: [
          {
            clientId: client.client_id,
            clientName: "Demo confidential client",
            clientSecret,
            redirectUris: client.redirect_uris,
            tokenEndpointAuthMethod: "client_secret_basic",
          },
          {
            clientId: publicClient.client_id,
            clientName: "Demo public client",
            redirectUris: publicClient.redirect_uris,
            tokenEndpointAuthMethod: "none",
          },
          ...(machineClient === undefined
            ? []
            : [
                {
                  clientId: machineClient.client_id,
                  clientName: "Demo machine client",
                  clientSecret: machineClient.client_secret as string,
                  redirectUris: [],
                  grantTypes: ["client_credentials"],
                },
              ]),
          ...(options.device === true
            ? [
                {
                  clientId: DEVICE_CLIENT_ID,
                  clientName: "Demo terminal agent",
                  redirectUris: [],
                  grantTypes: [Grant.DEVICE_CODE, "refresh_token"],
                  tokenEndpointAuthMethod: "none" as const,
                },
              ]
            : []),
          ...(downstream === undefined
            ? []
            : [
                {
                  clientId: NOTES_SERVER_CLIENT_ID,
                  clientName: "Keyway notes MCP server",
                  clientSecret: downstream.clientSecret,
                  redirectUris: [],
                  grantTypes: [Grant.TOKEN_EXCHANGE],
                },
              ]),
        ],
        resources: [
          { uri: mcpUrl, name: "Keyway notes", scopes: NOTE_SCOPES },
          ...(downstream === undefined || calendarUrl === undefined
            ? []
            : [
                { uri: calendarUrl, name: "Keyway calendar", scopes: CALENDAR_SCOPES },
                { uri: downstream.otherResource, name: "Payroll", scopes: { "payroll:read": "Read your payslips" } },
              ]),
        ],
        registration: true,
        ...(machineClient === undefined &&
        options.workloadIssuer === undefined &&
        options.dpop !== true &&
        options.device !== true &&
        calendarUrl === undefined
          ? {}
          : {
              extensions: {
                ...(machineClient === undefined
                  ? {}
                  : { clientCredentials: { clients: { [MACHINE_CLIENT_ID]: { scope: "notes:read" } } } }),
                ...(options.workloadIssuer === undefined
                  ? {}
                  : {
                      workloadIdentity: {
                        issuers: [
                          {
                            issuer: options.workloadIssuer.issuer,
                            jwksUri: options.workloadIssuer.jwksUri,
                            rules: [
                              {
                                claims: { sub: options.workloadIssuer.subject },
                                resources: [mcpUrl],
                                scopes: ["notes:read"],
                              },
                            ],
                          },
                        ],
                        development: { allowHttpLoopbackJwks: true },
                      },
                    }),
                ...(options.dpop === true ? { dpop: { nonce: true } } : {}),
                ...(options.device === true ? { deviceAuthorization: { interval: 1 } } : {}),
                ...(calendarUrl === undefined
                  ? {}
                  : {
                      tokenExchange: {
                        clients: {
                          [NOTES_SERVER_CLIENT_ID]: {
                            exchanges: [{ from: mcpUrl, to: calendarUrl, scopes: { "calendar:read": "notes:read" } }],
                          },
                        },
                      },
                    }),
              },
            }),
      },
      { log: (line) => log("authorization server", line) },
    )
    if (downstream !== undefined) {
      calendar = await startCalendarService({
        authorizationServer: as.issuer,
        port: downstream.calendarPort,
        actors: [NOTES_SERVER_CLIENT_ID],
        events: { [DEMO_USERNAME]: demoEvents() },
        log: (line) => log("calendar", line),
      })
    }
    const codeHostSecret = randomBytes(32).toString("base64url")
    if (options.connected !== undefined) {
      codeHost = await startCodeHost({
        clientId: CODE_HOST_CLIENT_ID,
        clientSecret: codeHostSecret,
        redirectUris: [`${new URL(mcpUrl).origin}/connect/codehost/callback`],
        repositories: { [DEMO_USERNAME]: ["keyway", "notes-app", "dotfiles"] },
        accessTokenTtl: CODE_HOST_TOKEN_TTL,
        log: (line) => log("code host", line),
      })
    }
    const connected = options.connected
    const mcp = await startMcpServer({
      authorizationServer: as.issuer,
      port: mcpPort,
      log: (line) => log("MCP server", line),
      ...(options.dpop === true ? { presentationSchemes: [dpopScheme({ nonce: {} })] } : {}),
      ...(downstream === undefined || calendar === undefined
        ? {}
        : {
            calendar: {
              url: calendar.url,
              clientId: NOTES_SERVER_CLIENT_ID,
              clientSecret: downstream.clientSecret,
              ...(downstream.fetch === undefined ? {} : { fetch: downstream.fetch }),
            },
          }),
      ...(codeHost === undefined || connected === undefined
        ? {}
        : {
            connections: {
              providers: {
                codehost: {
                  name: "Code Host",
                  issuer: codeHost.issuer,
                  clientId: CODE_HOST_CLIENT_ID,
                  clientSecret: codeHostSecret,
                  scopes: ["openid", "offline_access"],
                  apiBase: codeHost.apiBase,
                },
              },
              codeHost: "codehost",
              vaultPath: join(dataDir, "vault.db"),
              vaultKeys: `demo:${randomBytes(32).toString("base64url")}`,
              ...(connected.clock === undefined ? {} : { clock: connected.clock }),
              ...(connected.fetch === undefined ? {} : { fetch: connected.fetch }),
            },
          }),
    })
    const started = as
    const startedCalendar = calendar
    const startedCodeHost = codeHost
    let closing: Promise<void> | undefined
    return {
      issuer: started.issuer,
      mcpUrl: mcp.url,
      dataDir,
      users: [user],
      clients: [
        client,
        publicClient,
        ...(machineClient === undefined ? [] : [machineClient]),
        ...(options.device === true ? [{ client_id: DEVICE_CLIENT_ID, redirect_uris: [] }] : []),
        ...(downstream === undefined
          ? []
          : [{ client_id: NOTES_SERVER_CLIENT_ID, client_secret: downstream.clientSecret, redirect_uris: [] }]),
      ],
      ...(downstream === undefined || startedCalendar === undefined
        ? {}
        : { downstream: { calendarUrl: startedCalendar.url, otherResource: downstream.otherResource } }),
      ...(startedCodeHost === undefined ? {} : { codeHost: startedCodeHost }),
      close: () => {
        closing ??= (async () => {
          const results = await Promise.allSettled([
            mcp.close(),
            started.close(),
            ...(startedCalendar === undefined ? [] : [startedCalendar.close()]),
            ...(startedCodeHost === undefined ? [] : [startedCodeHost.close()]),
          ])
          await removeData()
          const failed = results.find((r): r is PromiseRejectedResult => r.status === "rejected")
          if (failed !== undefined) throw failed.reason
        })()
        return closing
      },
    }
  } catch (error) {
    await calendar?.close().catch(() => undefined)
    await codeHost?.close().catch(() => undefined)
    await as?.close().catch(() => undefined)
    await removeData()
    throw error
  }
}
