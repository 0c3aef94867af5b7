import { createServer } from "node:http"
import { createAuthorizationServer, NodeServer } from "@keyway/authorization-server"
import type { ProtectedResource } from "@keyway/resource-server"
import { closing, listening } from "@keyway/testing"
import { json, type Listening, listen } from "@keyway/testing/peers"

/** One request as a loopback server saw it. */
export interface Seen {
  readonly method: string
  readonly path: string
  readonly authorization: string | undefined
  readonly url: string
  readonly headers: Readonly<Record<string, string | ReadonlyArray<string> | undefined>>
  readonly body: string
}

/** A downstream API on loopback that records every request and answers 200 `{ "ok": true }`. */
export const startDownstream = async (): Promise<Listening & { readonly seen: Array<Seen> }> => {
  const seen: Array<Seen> = []
  const peer = await listen((request, url, body) => {
    seen.push({
      method: request.method ?? "",
      path: url.pathname,
      url: url.href,
      authorization: request.headers.authorization,
      headers: request.headers,
      body,
    })
    return json(200, { ok: true })
  })
  return { ...peer, seen }
}

/** An authorization server on loopback that publishes `metadata(origin)` and answers its token endpoint with `token`. */
export const startFakeIssuer = async (
  metadata: (origin: string) => Record<string, unknown>,
  token: (body: URLSearchParams) => { readonly status: number; readonly body: unknown } = () => ({
    status: 400,
    body: { error: "invalid_grant" },
  }),
): Promise<Listening & { readonly seen: Array<Seen> }> => {
  const seen: Array<Seen> = []
  let origin = ""
  const peer = await listen((request, url, body) => {
    seen.push({
      method: request.method ?? "",
      path: url.pathname,
      url: url.href,
      authorization: request.headers.authorization,
      headers: request.headers,
      body,
    })
    if (url.pathname === "/.well-known/oauth-authorization-server") return json(200, metadata(origin))
    if (url.pathname === "/token") {
      const answer = token(new URLSearchParams(body))
      return json(answer.status, answer.body)
    }
    return json(404, { error: "not_found" })
  })
  origin = peer.origin
  return { ...peer, seen }
}

/** A plain Keyway authorization server (no token exchange grant) on loopback. */
export const startPlainAuthorizationServer = async (): Promise<{ issuer: string; close: () => Promise<void> }> => {
  const server = createServer()
  const issuer = await listening(server)
  const as = createAuthorizationServer({
    issuer,
    resources: [{ uri: `${issuer}/mcp`, name: "Notes", scopes: { "notes:read": "Read notes" } }],
    development: { allowHttpLoopbackIssuer: true },
    warn: () => {},
  })
  server.on("request", NodeServer.toNodeListener(as.handler, { publicUrl: issuer }))
  return {
    issuer,
    close: async () => {
      await closing(server)
      await as.close()
    },
  }
}

/** The inbound authentication of a request, as the resource server gives it to its handler. */
export const inbound = (issuer: string | undefined, accessToken: string): ProtectedResource.Authenticated => ({
  token: {
    scopes: ["notes:read"],
    audience: ["https://notes.example.com/mcp"],
    claims: {},
    ...(issuer === undefined ? {} : { issuer }),
  },
  accessToken,
})

/** A fetch that counts what it sends, by path. */
export const countingFetch = () => {
  const counts = new Map<string, number>()
  const fetch: typeof globalThis.fetch = (input, init) => {
    const path = new URL(input instanceof Request ? input.url : String(input)).pathname
    counts.set(path, (counts.get(path) ?? 0) + 1)
    return globalThis.fetch(input, init)
  }
  return { fetch, count: (path: string) => counts.get(path) ?? 0 }
}
