import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { Grant } from "@keyway/core"
import { exportJWK, generateKeyPair, type JWTPayload, SignJWT } from "jose"

/** A loopback identity provider: JWKS, metadata, and a token exchange endpoint that issues ID-JAGs. */
export interface TestIdp {
  readonly issuer: string
  /** Signs an ID-JAG (or anything else, by `header`) with the provider's key. */
  readonly sign: (claims: JWTPayload, header?: { typ?: string | undefined; key?: CryptoKey }) => Promise<string>
  /** The token exchange requests seen. */
  readonly exchanges: Array<{ form: URLSearchParams; authorization: string | null }>
  /** How many times its JWK Set was fetched. */
  readonly jwksFetches: () => number
  /** How many TCP connections it accepted, whatever came over them. */
  readonly connections: () => number
  /** What the next exchanges answer: the default issues an ID-JAG for the request. */
  answer: ((form: URLSearchParams) => Promise<Response>) | undefined
  readonly close: () => Promise<void>
}

export const startIdp = async (options: { clientId: string; lifetime?: number }): Promise<TestIdp> => {
  const keys = await generateKeyPair("ES256", { extractable: true })
  const jwk = { ...(await exportJWK(keys.publicKey)), kid: "idp-1", alg: "ES256", use: "sig" }
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const sign = (claims: JWTPayload, header: { typ?: string | undefined; key?: CryptoKey } = {}) =>
    new SignJWT(claims)
      .setProtectedHeader({
        alg: "ES256",
        kid: "idp-1",
        ...("typ" in header ? (header.typ === undefined ? {} : { typ: header.typ }) : { typ: Grant.ID_JAG_TYP }),
      })
      .sign(header.key ?? keys.privateKey)
  let jwksFetches = 0
  let connections = 0
  server.on("connection", () => connections++)
  const idp: TestIdp = {
    issuer,
    sign,
    jwksFetches: () => jwksFetches,
    connections: () => connections,
    exchanges: [],
    answer: undefined,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
  server.on("request", async (req, res) => {
    const send = async (response: Response) => {
      res.writeHead(response.status, Object.fromEntries(response.headers))
      res.end(await response.text())
    }
    if (req.url === "/jwks") {
      jwksFetches++
      return send(Response.json({ keys: [jwk] }))
    }
    if (req.url === "/.well-known/oauth-authorization-server") {
      return send(Response.json({ issuer, token_endpoint: `${issuer}/token`, jwks_uri: `${issuer}/jwks` }))
    }
    if (req.url !== "/token" || req.method !== "POST") return send(new Response("not found", { status: 404 }))
    const chunks: Array<Buffer> = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const form = new URLSearchParams(Buffer.concat(chunks).toString())
    idp.exchanges.push({ form, authorization: req.headers.authorization ?? null })
    if (idp.answer !== undefined) return send(await idp.answer(form))
    const now = Math.floor(Date.now() / 1000)
    const scope = form.get("scope")
    const assertion = await sign({
      iss: issuer,
      sub: `user:${form.get("subject_token")}`,
      aud: form.get("audience") ?? "",
      resource: form.get("resource") ?? "",
      client_id: options.clientId,
      jti: crypto.randomUUID(),
      iat: now,
      exp: now + (options.lifetime ?? 300),
      ...(scope === null ? {} : { scope }),
    })
    return send(
      Response.json({
        access_token: assertion,
        issued_token_type: Grant.ID_JAG_TOKEN_TYPE,
        token_type: "N_A",
        expires_in: options.lifetime ?? 300,
      }),
    )
  })
  return idp
}
