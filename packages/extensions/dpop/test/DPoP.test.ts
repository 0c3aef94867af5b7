import { createAuthClient, isAuthError } from "@keyway/client"
import { clientCredentials } from "@keyway/ext-client-credentials/client"
import { expectOAuthError } from "@keyway/testing/oauth"
import { base64url, calculateJwkThumbprint, decodeJwt, SignJWT } from "jose"
import { afterEach, describe, expect, it } from "vitest"
import { dpop } from "../src/client.js"
import { EXTENSION_ID } from "../src/index.js"
import { dpopScheme } from "../src/resource-server.js"
import { makeKey, type TestKey } from "./support/keys.js"
import { call, SECRET, type Stack, type StackOptions, startStack } from "./support/stack.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const stack = async (options: StackOptions = {}): Promise<Stack> => {
  const s = await startStack(options)
  cleanups.push(s.close)
  return s
}

const client = (s: Stack, extensions = [dpop()]) => {
  const auth = createAuthClient({
    extensions: [clientCredentials({ issuer: s.issuer, clientId: "machine", clientSecret: SECRET }), ...extensions],
  })
  cleanups.push(() => auth.dispose())
  return auth
}

const key = await makeKey()
const otherKey = await makeKey()

const seconds = () => Math.floor(Date.now() / 1000)
const ath = async (token: string) =>
  base64url.encode(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(token))))

/** A proof with these claims (htm, htu, iat, jti, ath, nonce overridable), signed by `signer`. */
const proof = (
  claims: { htm: string; htu: string; iat?: number; jti?: string; ath?: string; nonce?: string },
  signer: TestKey = key,
  header: Record<string, unknown> = {},
) =>
  new SignJWT({
    htm: claims.htm,
    htu: claims.htu,
    ...(claims.ath === undefined ? {} : { ath: claims.ath }),
    ...(claims.nonce === undefined ? {} : { nonce: claims.nonce }),
  })
    .setProtectedHeader({ typ: "dpop+jwt", alg: "ES256", jwk: signer.jwk, ...header })
    .setJti(claims.jti ?? crypto.randomUUID())
    .setIssuedAt(claims.iat ?? seconds())
    .sign(signer.privateKey)

const tokenRequest = (s: Stack, headers: Record<string, string>) =>
  fetch(`${s.issuer}/token`, {
    method: "POST",
    headers: {
      "content-type": "application/x-www-form-urlencoded",
      authorization: `Basic ${btoa(`machine:${SECRET}`)}`,
      ...headers,
    },
    body: new URLSearchParams({ grant_type: "client_credentials", resource: s.mcp, scope: "notes:read" }),
  })

const boundToken = async (s: Stack): Promise<string> => {
  const response = await tokenRequest(s, { dpop: await proof({ htm: "POST", htu: `${s.issuer}/token` }) })
  expect(response.status).toBe(200)
  return ((await response.json()) as { access_token: string }).access_token
}

describe("DPoP, Keyway's client, authorization server and resource server over HTTP", () => {
  it("binds the token to the client's key, presents it with the DPoP scheme and a fresh proof per request", async () => {
    const s = await stack({ schemes: [dpopScheme()] })
    const auth = client(s)
    for (let i = 0; i < 2; i++) {
      const response = await call(auth.fetch, s.mcp)
      expect(response.status).toBe(200)
    }
    expect(s.tokenRequests).toHaveLength(1)
    const tokenProof = decodeJwt(s.tokenRequests[0]?.dpop ?? "")
    expect(tokenProof).toMatchObject({ htm: "POST", htu: `${s.issuer}/token` })
    const authenticated = s.mcpRequests.filter((r) => r.authorization !== null)
    expect(authenticated.map((r) => [r.authorization?.split(" ")[0], r.status])).toEqual([
      ["DPoP", 200],
      ["DPoP", 200],
    ])
    const proofs = authenticated.map((r) => decodeJwt(r.dpop ?? ""))
    expect(new Set(proofs.map((p) => p.jti)).size).toBe(2)
    const accessToken = authenticated[0]?.authorization?.slice("DPoP ".length) ?? ""
    expect(proofs[0]).toMatchObject({ htm: "POST", htu: s.mcp, ath: await ath(accessToken) })
    const claims = decodeJwt(accessToken)
    const header = JSON.parse(new TextDecoder().decode(base64url.decode(s.tokenRequests[0]?.dpop?.split(".")[0] ?? "")))
    expect(claims.cnf).toEqual({ jkt: await calculateJwkThumbprint(header.jwk) })
    expect(header.typ).toBe("dpop+jwt")
    expect(header.jwk.d).toBeUndefined()
  })

  it("answers nonces at both servers with one retry each, and reuses them afterwards", async () => {
    const s = await stack({
      server: { nonce: true },
      schemes: [dpopScheme({ nonce: { secret: "rs-secret" } })],
      authorizationServer: { sessionSecret: "x".repeat(40) },
    })
    const auth = client(s)
    expect((await call(auth.fetch, s.mcp)).status).toBe(200)
    expect((await call(auth.fetch, s.mcp)).status).toBe(200)
    expect(s.tokenRequests.map((r) => [r.status, decodeJwt(r.dpop ?? "").nonce !== undefined])).toEqual([
      [400, false],
      [200, true],
    ])
    const authenticated = s.mcpRequests.filter((r) => r.authorization !== null)
    expect(authenticated.map((r) => [r.status, decodeJwt(r.dpop ?? "").nonce !== undefined])).toEqual([
      [401, false],
      [200, true],
      [200, true],
    ])
  })

  it("lists the algorithms in both metadata documents and challenges with DPoP beside Bearer", async () => {
    const s = await stack({ schemes: [dpopScheme({ algorithms: ["ES256", "EdDSA"], boundTokensRequired: true })] })
    const asMetadata = await (await fetch(`${s.issuer}/.well-known/oauth-authorization-server`)).json()
    expect(asMetadata.dpop_signing_alg_values_supported).toEqual(["ES256"])
    const origin = new URL(s.mcp).origin
    const prm = await (await fetch(`${origin}/.well-known/oauth-protected-resource/mcp`)).json()
    expect(prm).toMatchObject({
      dpop_signing_alg_values_supported: ["ES256", "EdDSA"],
      dpop_bound_access_tokens_required: true,
    })
    const response = await call(fetch, s.mcp)
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(
      `Bearer resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp", scope="notes:read", DPoP resource_metadata="${origin}/.well-known/oauth-protected-resource/mcp", scope="notes:read", algs="ES256 EdDSA"`,
    )
  })

  it("declares the extension identifier", () => {
    expect(EXTENSION_ID).toBe("io.modelcontextprotocol/auth/dpop")
    expect(dpop().id).toBe(EXTENSION_ID)
  })
})

describe("the authorization server refuses bad proofs (RFC 9449 §4.3, §8)", () => {
  const cases: ReadonlyArray<readonly [string, (s: Stack) => Promise<Record<string, string>>, string, string]> = [
    [
      "a wrong htm",
      async (s) => ({ dpop: await proof({ htm: "GET", htu: `${s.issuer}/token` }) }),
      "invalid_dpop_proof",
      "the DPoP proof's htm is not POST",
    ],
    [
      "a wrong htu",
      async (s) => ({ dpop: await proof({ htm: "POST", htu: `${s.issuer}/other` }) }),
      "invalid_dpop_proof",
      "the DPoP proof's htu does not match the request URL",
    ],
    [
      "a stale iat",
      async (s) => ({ dpop: await proof({ htm: "POST", htu: `${s.issuer}/token`, iat: seconds() - 120 }) }),
      "invalid_dpop_proof",
      "the DPoP proof's iat is outside the window",
    ],
    [
      "another typ",
      async (s) => ({ dpop: await proof({ htm: "POST", htu: `${s.issuer}/token` }, key, { typ: "JWT" }) }),
      "invalid_dpop_proof",
      "the DPoP proof's typ is not dpop+jwt",
    ],
    [
      "two proofs",
      async (s) => {
        const p = await proof({ htm: "POST", htu: `${s.issuer}/token` })
        return { dpop: `${p}, ${p}` }
      },
      "invalid_dpop_proof",
      "exactly one DPoP proof is allowed",
    ],
    [
      "a jti of 257 characters",
      async (s) => ({ dpop: await proof({ htm: "POST", htu: `${s.issuer}/token`, jti: "j".repeat(257) }) }),
      "invalid_dpop_proof",
      "the DPoP proof's jti is longer than 256 characters",
    ],
    [
      "a signature by another key",
      async (s) => ({ dpop: await proof({ htm: "POST", htu: `${s.issuer}/token` }, key, { jwk: otherKey.jwk }) }),
      "invalid_dpop_proof",
      "the DPoP proof's signature does not verify with its jwk",
    ],
  ]
  for (const [name, headers, error, description] of cases) {
    it(`${name}: 400 ${error}`, async () => {
      const s = await stack()
      const response = await tokenRequest(s, await headers(s))
      await expectOAuthError(response, 400, error, description)
    })
  }

  it("a replayed jti: 400 invalid_dpop_proof", async () => {
    const s = await stack()
    const once = await proof({ htm: "POST", htu: `${s.issuer}/token` })
    expect((await tokenRequest(s, { dpop: once })).status).toBe(200)
    const again = await tokenRequest(s, { dpop: once })
    await expectOAuthError(again, 400, "invalid_dpop_proof", "the DPoP proof was already used")
  })

  it("no nonce where one is required: 400 use_dpop_nonce with DPoP-Nonce; a forged nonce likewise", async () => {
    const s = await stack({ server: { nonce: true } })
    const first = await tokenRequest(s, { dpop: await proof({ htm: "POST", htu: `${s.issuer}/token` }) })
    await expectOAuthError(first, 400, "use_dpop_nonce", "a DPoP nonce is required")
    const nonce = first.headers.get("dpop-nonce") ?? ""
    expect(nonce).not.toBe("")
    const forged = await tokenRequest(s, {
      dpop: await proof({ htm: "POST", htu: `${s.issuer}/token`, nonce: `${nonce}x` }),
    })
    await expectOAuthError(forged, 400, "use_dpop_nonce", "the DPoP nonce is stale")
    const ok = await tokenRequest(s, { dpop: await proof({ htm: "POST", htu: `${s.issuer}/token`, nonce }) })
    expect(ok.status).toBe(200)
    expect(ok.headers.get("dpop-nonce")).toBe(nonce)
    expect(((await ok.json()) as { token_type: string }).token_type).toBe("DPoP")
  })

  it("DPoP required for a client: a request without a proof is refused, another client still gets Bearer", async () => {
    const s = await stack({ server: { required: ["machine"] } })
    const refused = await tokenRequest(s, {})
    await expectOAuthError(
      refused,
      400,
      "invalid_dpop_proof",
      "this client must send a DPoP proof with its token requests",
    )
    const other = await tokenRequest(s, { authorization: `Basic ${btoa(`other:${SECRET}`)}` })
    expect(other.status).toBe(200)
    expect(((await other.json()) as { token_type: string }).token_type).toBe("Bearer")
  })

  it("introspection reports the confirmation of a bound token", async () => {
    const s = await stack()
    const token = await boundToken(s)
    const response = await fetch(`${s.issuer}/introspect`, {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        authorization: `Basic ${btoa(`machine:${SECRET}`)}`,
      },
      body: new URLSearchParams({ token }),
    })
    expect(await response.json()).toMatchObject({ active: true, token_type: "DPoP", cnf: { jkt: key.jkt } })
  })
})

describe("the resource server refuses bad presentations (RFC 9449 §7)", () => {
  const metadata = (s: Stack) => `${new URL(s.mcp).origin}/.well-known/oauth-protected-resource/mcp`
  const challenge = (s: Stack, error: string, description: string) =>
    `DPoP resource_metadata="${metadata(s)}", algs="ES256", error="${error}", error_description="${description}"`

  const cases: ReadonlyArray<
    readonly [string, (s: Stack, token: string) => Promise<Record<string, string>>, string, string]
  > = [
    [
      "a wrong htm",
      async (s, t) => ({ dpop: await proof({ htm: "GET", htu: s.mcp, ath: await ath(t) }) }),
      "invalid_dpop_proof",
      "the DPoP proof's htm is not POST",
    ],
    [
      "a wrong htu",
      async (s, t) => ({ dpop: await proof({ htm: "POST", htu: `${s.mcp}/other`, ath: await ath(t) }) }),
      "invalid_dpop_proof",
      "the DPoP proof's htu does not match the request URL",
    ],
    [
      "a stale iat",
      async (s, t) => ({ dpop: await proof({ htm: "POST", htu: s.mcp, ath: await ath(t), iat: seconds() - 120 }) }),
      "invalid_dpop_proof",
      "the DPoP proof's iat is outside the window",
    ],
    [
      "an ath of another token",
      async (s) => ({ dpop: await proof({ htm: "POST", htu: s.mcp, ath: await ath("other") }) }),
      "invalid_dpop_proof",
      "the DPoP proof's ath does not match the access token",
    ],
    [
      "another key",
      async (s, t) => ({ dpop: await proof({ htm: "POST", htu: s.mcp, ath: await ath(t) }, otherKey) }),
      "invalid_dpop_proof",
      "the DPoP proof's key is not the key the access token is bound to",
    ],
    [
      "a jti of 257 characters",
      async (s, t) => ({ dpop: await proof({ htm: "POST", htu: s.mcp, ath: await ath(t), jti: "-".repeat(257) }) }),
      "invalid_dpop_proof",
      "the DPoP proof's jti is longer than 256 characters",
    ],
    ["no proof", async () => ({}), "invalid_dpop_proof", "the DPoP proof is missing"],
  ]
  for (const [name, headers, error, description] of cases) {
    it(`${name}: 401 ${error}`, async () => {
      const s = await stack({ schemes: [dpopScheme()] })
      const token = await boundToken(s)
      const response = await call(fetch, s.mcp, { authorization: `DPoP ${token}`, ...(await headers(s, token)) })
      expect(response.status).toBe(401)
      expect(response.headers.get("www-authenticate")).toBe(challenge(s, error, description))
    })
  }

  it("a jti of 256 characters, beginning with '-': accepted once, then refused as replayed", async () => {
    const s = await stack({ schemes: [dpopScheme()] })
    const token = await boundToken(s)
    const once = await proof({ htm: "POST", htu: s.mcp, ath: await ath(token), jti: `-${"j".repeat(255)}` })
    expect((await call(fetch, s.mcp, { authorization: `DPoP ${token}`, dpop: once })).status).toBe(200)
    const again = await call(fetch, s.mcp, { authorization: `DPoP ${token}`, dpop: once })
    expect(again.status).toBe(401)
    expect(again.headers.get("www-authenticate")).toBe(
      challenge(s, "invalid_dpop_proof", "the DPoP proof was already used"),
    )
  })

  it("a replayed jti: 401 invalid_dpop_proof", async () => {
    const s = await stack({ schemes: [dpopScheme()] })
    const token = await boundToken(s)
    const once = await proof({ htm: "POST", htu: s.mcp, ath: await ath(token) })
    expect((await call(fetch, s.mcp, { authorization: `DPoP ${token}`, dpop: once })).status).toBe(200)
    const again = await call(fetch, s.mcp, { authorization: `DPoP ${token}`, dpop: once })
    expect(again.status).toBe(401)
    expect(again.headers.get("www-authenticate")).toBe(
      challenge(s, "invalid_dpop_proof", "the DPoP proof was already used"),
    )
  })

  it("a bound token presented as Bearer: 401 invalid_token with the DPoP challenge", async () => {
    const s = await stack({ schemes: [dpopScheme()] })
    const token = await boundToken(s)
    const response = await call(fetch, s.mcp, { authorization: `Bearer ${token}` })
    expect(response.status).toBe(401)
    expect(response.headers.get("www-authenticate")).toBe(
      challenge(s, "invalid_token", "The access token is bound to a key: present it with the DPoP scheme"),
    )
  })

  it("bound tokens required: an unbound token presented as Bearer: 401 invalid_token with the DPoP challenge", async () => {
    const s = await stack({ server: null, schemes: [dpopScheme({ boundTokensRequired: true })] })
    const response = await tokenRequest(s, {})
    const token = ((await response.json()) as { access_token: string }).access_token
    const presented = await call(fetch, s.mcp, { authorization: `Bearer ${token}` })
    expect(presented.status).toBe(401)
    expect(presented.headers.get("www-authenticate")).toBe(
      challenge(s, "invalid_token", "This resource accepts access tokens presented with the DPoP scheme only"),
    )
    // Without the requirement the same token is accepted as Bearer.
    const open = await stack({ server: null, schemes: [dpopScheme()] })
    const other = ((await (await tokenRequest(open, {})).json()) as { access_token: string }).access_token
    expect((await call(fetch, open.mcp, { authorization: `Bearer ${other}` })).status).toBe(200)
  })

  it("a Bearer token presented as DPoP: 401 invalid_token", async () => {
    const s = await stack({ server: null, schemes: [dpopScheme()] })
    const response = await tokenRequest(s, {})
    const token = ((await response.json()) as { access_token: string }).access_token
    const presented = await call(fetch, s.mcp, {
      authorization: `DPoP ${token}`,
      dpop: await proof({ htm: "POST", htu: s.mcp, ath: await ath(token) }),
    })
    expect(presented.status).toBe(401)
    expect(presented.headers.get("www-authenticate")).toBe(
      challenge(s, "invalid_token", "The access token is not bound to a DPoP key"),
    )
  })

  it("no nonce where one is required: 401 use_dpop_nonce with DPoP-Nonce, then accepted with it", async () => {
    const s = await stack({ schemes: [dpopScheme({ nonce: {} })] })
    const token = await boundToken(s)
    const first = await call(fetch, s.mcp, {
      authorization: `DPoP ${token}`,
      dpop: await proof({ htm: "POST", htu: s.mcp, ath: await ath(token) }),
    })
    expect(first.status).toBe(401)
    expect(first.headers.get("www-authenticate")).toBe(challenge(s, "use_dpop_nonce", "a DPoP nonce is required"))
    const nonce = first.headers.get("dpop-nonce") ?? ""
    const second = await call(fetch, s.mcp, {
      authorization: `DPoP ${token}`,
      dpop: await proof({ htm: "POST", htu: s.mcp, ath: await ath(token), nonce }),
    })
    expect(second.status).toBe(200)
  })

  it("an iat window driven by the injected clock", async () => {
    let now = Date.now()
    const s = await stack({ schemes: [dpopScheme({ now: () => now })] })
    const token = await boundToken(s)
    const at = seconds()
    // 61 s after the proof's iat by the injected clock, however long the token took to get.
    now = (at + 61) * 1000
    const late = await call(fetch, s.mcp, {
      authorization: `DPoP ${token}`,
      dpop: await proof({ htm: "POST", htu: s.mcp, ath: await ath(token), iat: at }),
    })
    expect(late.status).toBe(401)
    expect(late.headers.get("www-authenticate")).toBe(
      challenge(s, "invalid_dpop_proof", "the DPoP proof's iat is outside the window"),
    )
  })
})

describe("the client's token type check (RFC 9449 §5)", () => {
  it("refuses a Bearer token answered to a proof by default", async () => {
    const s = await stack({ server: null })
    const auth = client(s)
    const error = await call(auth.fetch, s.mcp).then(
      () => undefined,
      (e: unknown) => e,
    )
    expect(isAuthError(error) && [error.step, error.reason]).toEqual(["token", "unsupported-token-type"])
    expect((error as Error).message).toBe(
      `the token endpoint ${s.issuer}/token answered a DPoP proof with token_type Bearer: the token is not bound to this client's key (set bearerResponse: "accept" to use such tokens)`,
    )
  })

  it("accepts it when configured, and presents it as Bearer", async () => {
    const s = await stack({ server: null })
    const auth = client(s, [dpop({ bearerResponse: "accept" })])
    expect((await call(auth.fetch, s.mcp)).status).toBe(200)
    expect(s.mcpRequests.filter((r) => r.authorization !== null)[0]?.authorization?.startsWith("Bearer ")).toBe(true)
  })
})
