import { randomBytes } from "node:crypto"
import type {
  OAuthClientMetadata,
  OAuthClientProvider,
  OAuthDiscoveryState,
  StoredOAuthClientInformation,
  StoredOAuthTokens,
} from "@modelcontextprotocol/client"
import { loginAndConsent, REDIRECT_URI } from "./stack.js"

/**
 * An `OAuthClientProvider` of the official SDK whose "browser" is the authorization server's HTML forms driven over
 * HTTP: `redirectToAuthorization` logs in, approves, and keeps the redirect back (code, state, iss) for the test to
 * hand to `finishAuth`. Everything else (discovery, registration, PKCE, resource, token requests) is the SDK's own.
 */
export class FormDrivingProvider implements OAuthClientProvider {
  client: StoredOAuthClientInformation | undefined
  stored: StoredOAuthTokens | undefined
  verifier: string | undefined
  discovery: OAuthDiscoveryState | undefined
  /** Every state value the SDK was given, in order. */
  readonly states: Array<string> = []
  /** Every authorization URL the SDK sent the "browser" to. */
  readonly authorizationUrls: Array<URL> = []
  /** Every redirect back to the client, in order. */
  readonly callbacks: Array<URL> = []

  get redirectUrl(): string {
    return REDIRECT_URI
  }

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: "MCP SDK interop test",
      redirect_uris: [REDIRECT_URI],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    }
  }

  state(): string {
    const state = randomBytes(16).toString("base64url")
    this.states.push(state)
    return state
  }

  clientInformation(): StoredOAuthClientInformation | undefined {
    return this.client
  }

  saveClientInformation(info: StoredOAuthClientInformation): void {
    this.client = info
  }

  tokens(): StoredOAuthTokens | undefined {
    return this.stored
  }

  saveTokens(tokens: StoredOAuthTokens): void {
    this.stored = tokens
  }

  async redirectToAuthorization(url: URL): Promise<void> {
    this.authorizationUrls.push(url)
    this.callbacks.push(await loginAndConsent(url.href))
  }

  saveCodeVerifier(verifier: string): void {
    this.verifier = verifier
  }

  codeVerifier(): string {
    if (this.verifier === undefined) throw new Error("no code verifier saved")
    return this.verifier
  }

  saveDiscoveryState(state: OAuthDiscoveryState): void {
    this.discovery = state
  }

  discoveryState(): OAuthDiscoveryState | undefined {
    return this.discovery
  }
}
