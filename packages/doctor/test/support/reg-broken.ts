/**
 * Authorization servers misconfigured on purpose, each a real loopback server (the OAuth peer of
 * `@keyway/testing/peers`) with one fault that MCP users meet.
 */
import { type AuthorizationServerOptions, json, listen, makeAuthorizationServer } from "@keyway/testing/peers"

export interface BrokenServer {
  readonly issuer: string
  readonly close: () => Promise<void>
}

export type Fault =
  | "refuses-loopback-port"
  | "refuses-private-scheme"
  | "rejects-resource-at-authorization"
  | "rejects-resource-at-token"

const invalidRedirect = (uri: string) =>
  json(400, { error: "invalid_redirect_uri", error_description: `redirect URI ${uri} is not allowed` })

const registerReply =
  (fault: Fault): NonNullable<AuthorizationServerOptions["registerReply"]> =>
  (requested) => {
    const uris = (requested.redirect_uris as ReadonlyArray<string> | undefined) ?? []
    for (const uri of uris) {
      const url = new URL(uri)
      // The exact-match allow list some servers keep: loopback without a port only.
      if (fault === "refuses-loopback-port" && url.protocol === "http:" && url.port !== "") return invalidRedirect(uri)
      if (fault === "refuses-private-scheme" && url.protocol !== "http:" && url.protocol !== "https:") {
        return invalidRedirect(uri)
      }
    }
    return undefined
  }

/** Starts the OAuth peer with one fault. */
export const startBroken = async (fault: Fault): Promise<BrokenServer> => {
  const parts = makeAuthorizationServer({
    registerReply: registerReply(fault),
    authorizeReply: (url) => {
      if (fault !== "rejects-resource-at-authorization" || !url.searchParams.has("resource")) return undefined
      const back = new URL(url.searchParams.get("redirect_uri") ?? "")
      back.searchParams.set("error", "invalid_target")
      back.searchParams.set("error_description", "unknown resource")
      back.searchParams.set("state", url.searchParams.get("state") ?? "")
      return { status: 302, headers: { location: back.href } }
    },
  })
  const listening = await listen((request, url, body) =>
    fault === "rejects-resource-at-token" && url.pathname === "/token" && new URLSearchParams(body).has("resource")
      ? json(400, { error: "invalid_target", error_description: "the resource parameter is not supported" })
      : parts.handler(request, url, body),
  )
  const peer = parts.attach(listening)
  return { issuer: peer.issuer, close: peer.close }
}
