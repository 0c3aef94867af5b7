/**
 * The state of one diagnosis as it walks from the MCP server to its authorization servers, the way a client does:
 * each stage reads what the stages before it found, adds what it finds, and returns its findings.
 *
 * @module
 */
import type { Revision } from "@keyway/core"
import type { CheckEntry, Finding } from "./Finding.js"
import type { Probe } from "./Probe.js"

/** Options of a diagnosis (the command line's, parsed). */
export interface DiagnoseOptions {
  /** The revisions to check for; every revision by default. */
  readonly revisions?: ReadonlyArray<Revision.Revision>
  /**
   * Sign in and run the whole flow: `browser` opens the system browser; `test-user` signs in as the given user on a
   * Keyway authorization server's login page without a browser (for test accounts).
   */
  readonly login?:
    | { readonly kind: "browser" }
    | { readonly kind: "test-user"; readonly username: string; readonly password: string }
  /**
   * Another resource the same authorization server serves: with `login`, the doctor obtains a token for it (a refresh
   * with this `resource`, else a second authorization) and checks that the MCP server refuses it. Without it the
   * audience check is not made.
   *
   * @see {@link https://www.rfc-editor.org/rfc/rfc8707.html#section-2.2 | RFC 8707 §2.2}
   */
  readonly otherResource?: string
  /** A client ID and secret for a real client credentials token request. */
  readonly clientCredentials?: { readonly clientId: string; readonly clientSecret: string }
  /** Host a client ID metadata document on a loopback URL and try it (only when asked). */
  readonly clientIdMetadataDocument?: boolean
  /** The fetch to use; the global one by default. */
  readonly fetch?: typeof globalThis.fetch
  /** Per request, in milliseconds; 10,000 by default. */
  readonly timeoutMs?: number
  /** The local clock, in milliseconds since the epoch (for the skew check); `Date.now` by default. */
  readonly now?: () => number
}

/** What the walk found about one authorization server. */
export interface AuthorizationServerFound {
  /** The issuer as the protected resource metadata names it. */
  readonly issuer: string
  /** Its metadata document, when one was found, and where (the first location that answered with it). */
  metadata?: Readonly<Record<string, unknown>>
  metadataUrl?: string
}

/** A diagnosis in progress. */
export interface Walk {
  /** The MCP server's URL, as given. */
  readonly target: string
  readonly revisions: ReadonlyArray<Revision.Revision>
  readonly options: DiagnoseOptions
  readonly probe: Probe
  /** The unauthenticated request's answer: status and `WWW-Authenticate`. */
  unauthenticated?: { readonly status: number | undefined; readonly wwwAuthenticate: string | null }
  /** The protected resource metadata, when found, and the URL it came from. */
  resourceMetadata?: { readonly url: string; readonly document: Readonly<Record<string, unknown>> }
  /** The authorization servers, by issuer, in the order the metadata lists them. */
  readonly authorizationServers: Map<string, AuthorizationServerFound>
  /** Tokens the login stage obtained, for the checks that use one. */
  token?: {
    readonly accessToken: string
    readonly refreshToken?: string
    readonly scope?: string
    readonly expiresIn?: number
  }
  /** Set when the walk cannot go on (the server is unreachable): the verdict is "could not run". */
  stopped?: string
}

/** One stage of the walk: its checks, run in order, over what the walk found so far. */
export interface Stage {
  readonly name: string
  /** The checks it may report, by ID. */
  readonly catalog: Readonly<Record<string, CheckEntry>>
  readonly run: (walk: Walk) => Promise<ReadonlyArray<Finding>>
}
