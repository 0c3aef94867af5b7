import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { exportJWK, generateKeyPair, type JWK, type JWTPayload, SignJWT } from "jose"
import { toNodeListener, type WebHandler } from "../src/node/Node.js"

export interface Running {
  readonly origin: string
  readonly port: number
  readonly close: () => Promise<void>
}

const listen = async (server: Server): Promise<Running> => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const { port } = server.address() as AddressInfo
  return {
    origin: `http://127.0.0.1:${port}`,
    port,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}

/** A loopback server whose Web handler can be set after the port is known. */
export const startWebServer = async (): Promise<Running & { readonly setHandler: (h: WebHandler) => void }> => {
  let handler: WebHandler = () => new Response("no handler", { status: 500 })
  const running = await listen(createServer(toNodeListener((request) => handler(request))))
  return {
    ...running,
    setHandler: (h) => {
      handler = h
    },
  }
}

export const startNodeServer = async (
  listener: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<Running> => listen(createServer(listener))

export interface SigningKey {
  readonly kid: string
  readonly privateKey: CryptoKey
  readonly publicJwk: JWK
}

export const makeKey = async (kid: string, alg = "ES256"): Promise<SigningKey> => {
  const { privateKey, publicKey } = await generateKeyPair(alg, { extractable: true })
  const publicJwk = { ...(await exportJWK(publicKey)), kid, alg, use: "sig" }
  return { kid, privateKey, publicJwk }
}

export interface JwksState {
  keys: Array<SigningKey>
  hits: number
  down: boolean
}

/** A JWKS endpoint on loopback: its keys can rotate, it counts fetches and can be made to fail. */
export const startJwks = async (
  keys: Array<SigningKey>,
): Promise<Running & { readonly state: JwksState; readonly url: string }> => {
  const state: JwksState = { keys, hits: 0, down: false }
  const running = await startNodeServer((_req, res) => {
    state.hits++
    if (state.down) {
      res.writeHead(503, { "content-type": "text/plain" }).end("down")
      return
    }
    res
      .writeHead(200, { "content-type": "application/jwk-set+json" })
      .end(JSON.stringify({ keys: state.keys.map((k) => k.publicJwk) }))
  })
  return { ...running, state, url: `${running.origin}/jwks` }
}

export const now = (): number => Math.floor(Date.now() / 1000)

export const mint = (
  key: SigningKey,
  claims: JWTPayload & Record<string, unknown>,
  header: { readonly typ?: string; readonly alg?: string; readonly kid?: string } = {},
): Promise<string> =>
  new SignJWT(claims)
    .setProtectedHeader({ alg: header.alg ?? "ES256", typ: header.typ ?? "at+jwt", kid: header.kid ?? key.kid })
    .sign(key.privateKey)

/**
 * An RFC 9068 access token for `audience` from `issuer`, signed by `key`: subject `user-1`, client `client-1`, ten
 * minutes to live, a fresh `jti`; `extra` claims are added or replace these.
 */
export const accessToken = (
  key: SigningKey,
  issuer: string,
  audience: string,
  scope: string,
  extra: Record<string, unknown> = {},
): Promise<string> =>
  mint(key, {
    iss: issuer,
    aud: audience,
    sub: "user-1",
    client_id: "client-1",
    scope,
    iat: now(),
    exp: now() + 600,
    jti: crypto.randomUUID(),
    ...extra,
  })

export interface IntrospectionState {
  hits: number
  down: boolean
  answers: Record<string, Record<string, unknown>>
  lastAuthorization: string | undefined
  lastBody: string
}

/**
 * An RFC 7662 introspection endpoint on loopback: it takes client `rs` with secret `s3cret` (Basic or in the form) or
 * the bearer token `rs-token`, answers each token from `state.answers` (inactive otherwise), and can be made to fail.
 */
export const startIntrospection = async (): Promise<Running & { state: IntrospectionState; url: string }> => {
  const state: IntrospectionState = { hits: 0, down: false, answers: {}, lastAuthorization: undefined, lastBody: "" }
  const running = await startNodeServer((req, res) => {
    let body = ""
    req.on("data", (d) => {
      body += d
    })
    req.on("end", () => {
      state.hits++
      state.lastAuthorization = req.headers.authorization
      state.lastBody = body
      if (state.down) {
        res.writeHead(500).end()
        return
      }
      const form = new URLSearchParams(body)
      const basic = `Basic ${btoa("rs:s3cret")}`
      const authed =
        req.headers.authorization === basic ||
        req.headers.authorization === "Bearer rs-token" ||
        (form.get("client_id") === "rs" && form.get("client_secret") === "s3cret")
      if (req.method !== "POST" || !authed) {
        // A body of many chunks: a reader that lets go of it early leaves the rest unread.
        res
          .writeHead(401, { "content-type": "application/json" })
          .end(JSON.stringify({ error: "invalid_client", error_description: "x".repeat(256 * 1024) }))
        return
      }
      const answer = state.answers[form.get("token") ?? ""] ?? { active: false }
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(answer))
    })
  })
  return { ...running, state, url: `${running.origin}/introspect` }
}

/** An unsigned (`alg: none`) JWT. */
export const unsecured = (claims: Record<string, unknown>): string => {
  const enc = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url")
  return `${enc({ alg: "none", typ: "at+jwt" })}.${enc(claims)}.`
}
