import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { type Config, createAuthorizationServer } from "@keyway/authorization-server"
import { createAuthClient, isAuthError } from "@keyway/client"
import { Options } from "@keyway/core"
import { thrownBy } from "@keyway/testing"
import { expectOAuthError } from "@keyway/testing/oauth"
import { exportJWK, exportPKCS8, generateKeyPair, SignJWT } from "jose"
import { afterEach, describe, expect, it } from "vitest"
import { clientCredentialsGrant } from "../src/authorization-server.js"
import { clientCredentials, selectMethod } from "../src/client.js"
import { EXTENSION_ID } from "../src/index.js"
import { call, SCOPES, SECRET, type Stack, startStack } from "./support/stack.js"

const cleanups: Array<() => Promise<void>> = []
afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

const keys = await generateKeyPair("ES256", { extractable: true })
const publicJwk = { ...(await exportJWK(keys.publicKey)), kid: "k1", alg: "ES256" }

/** The clients every stack configures: a secret client, a key client, an interactive client, a limited client. */
const clients = [
  { clientId: "reporter", clientSecret: SECRET, redirectUris: [], grantTypes: ["client_credentials"] },
  {
    clientId: "signer",
    tokenEndpointAuthMethod: "private_key_jwt" as const,
    jwks: { keys: [publicJwk] },
    redirectUris: [],
    grantTypes: ["client_credentials"],
  },
  { clientId: "interactive", clientSecret: SECRET, redirectUris: ["https://app.example.com/cb"] },
  { clientId: "reader", clientSecret: SECRET, redirectUris: [], grantTypes: ["client_credentials"] },
  {
    clientId: "poster",
    clientSecret: SECRET,
    tokenEndpointAuthMethod: "client_secret_post" as const,
    redirectUris: [],
    grantTypes: ["client_credentials"],
  },
]

const stack = async (extra: Partial<Parameters<typeof createAuthorizationServer>[0]> = {}): Promise<Stack> => {
  const s = await startStack((mcp) => ({
    clients,
    extensions: [clientCredentialsGrant({ clients: { reader: { resources: [mcp[0]], scope: "notes:read" } } })],
    ...extra,
  }))
  cleanups.push(s.close)
  return s
}

const client = (
  options: Parameters<typeof clientCredentials>[0],
  extra: Parameters<typeof createAuthClient>[0] = {},
) => {
  const auth = createAuthClient({ extensions: [clientCredentials(options)], ...extra })
  cleanups.push(() => auth.dispose())
  return auth
}

/** A raw client_credentials request with client_secret_post. */
const raw = (s: Stack, values: Record<string, string>, headers: Record<string, string> = {}) =>
  fetch(`${s.issuer}/token`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(values),
  })

const assertion = (issuer: string, claims: { jti?: string; aud?: string; sub?: string } = {}) =>
  new SignJWT({ jti: claims.jti ?? crypto.randomUUID() })
    .setProtectedHeader({ alg: "ES256", kid: "k1" })
    .setIssuer(claims.sub ?? "signer")
    .setSubject(claims.sub ?? "signer")
    .setAudience(claims.aud ?? issuer)
    .setIssuedAt()
    .setExpirationTime("60s")
    .sign(keys.privateKey)

describe("client credentials, Keyway's client against Keyway's authorization server", () => {
  it("the metadata lists the grant next to the built-in ones, and the authentication methods", async () => {
    const s = await stack()
    const metadata = (await (await fetch(`${s.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      unknown
    >
    expect(metadata.grant_types_supported).toEqual(["authorization_code", "refresh_token", "client_credentials"])
    expect(metadata.token_endpoint_auth_methods_supported).toEqual([
      "none",
      "client_secret_basic",
      "client_secret_post",
      "private_key_jwt",
    ])
  })

  it("client_secret_basic (chosen from the server's list), the challenge's scope: a token for one resource, no refresh token", async () => {
    const s = await stack()
    const auth = client({ issuer: s.issuer, clientId: "reporter", clientSecret: SECRET })
    const response = await call(auth.fetch, s.mcp[0], "tools/list")
    expect(response.status).toBe(200)
    expect(await response.json()).toMatchObject({
      result: { subject: "reporter", clientId: "reporter", scopes: ["notes:read"] },
    })
    expect(s.tokenRequests).toHaveLength(1)
    const seen = s.tokenRequests[0]!
    expect(seen.authorization).toMatch(/^Basic /)
    expect(Object.fromEntries(seen.form)).toEqual({
      grant_type: "client_credentials",
      resource: s.mcp[0],
      scope: "notes:read",
    })
    const tokens = await auth.tokens(s.mcp[0])
    expect(tokens).toMatchObject({ client_id: "reporter", issuer: s.issuer, resource: s.mcp[0] })
    expect(tokens?.refresh_token).toBeUndefined()
  })

  it("client_secret_post when asked for, never dynamic registration although the server offers it", async () => {
    const s = await stack({ registration: true })
    const auth = client({ issuer: s.issuer, clientId: "poster", clientSecret: SECRET, method: "client_secret_post" })
    expect((await call(auth.fetch, s.mcp[0], "tools/list")).status).toBe(200)
    const seen = s.tokenRequests[0]!
    expect(seen.authorization).toBeNull()
    expect(seen.form.get("client_id")).toBe("poster")
    expect(seen.form.get("client_secret")).toBe(SECRET)
    expect(s.tokenRequests).toHaveLength(1)
  })

  it.each([
    ["issuer", undefined],
    ["token endpoint", "token_endpoint" as const],
  ])(
    "private_key_jwt with the assertion's audience the %s; a CryptoKey's algorithm and thumbprint kid",
    async (_, audience) => {
      const s = await stack()
      const auth = client({
        issuer: s.issuer,
        clientId: "signer",
        privateKey: { key: keys.privateKey, kid: "k1" },
        ...(audience === undefined ? {} : { assertionAudience: audience }),
      })
      expect((await call(auth.fetch, s.mcp[0], "tools/list")).status).toBe(200)
      const seen = s.tokenRequests[0]!
      expect(seen.form.get("client_assertion_type")).toBe("urn:ietf:params:oauth:client-assertion-type:jwt-bearer")
      const [header, payload] = seen.form
        .get("client_assertion")!
        .split(".")
        .slice(0, 2)
        .map((part) => JSON.parse(Buffer.from(part, "base64url").toString()))
      expect(header).toEqual({ alg: "ES256", kid: "k1" })
      expect(payload).toMatchObject({
        iss: "signer",
        sub: "signer",
        aud: audience === undefined ? s.issuer : `${s.issuer}/token`,
      })
      expect(typeof payload.jti).toBe("string")
      expect(payload.exp - payload.iat).toBe(60)
    },
  )

  it("private_key_jwt from a PKCS #8 PEM with its algorithm", async () => {
    const s = await stack()
    const pem = await exportPKCS8(keys.privateKey)
    const auth = client({ issuer: s.issuer, clientId: "signer", privateKey: { key: pem, alg: "ES256", kid: "k1" } })
    expect((await call(auth.fetch, s.mcp[0], "tools/list")).status).toBe(200)
  })

  it("the token works at its own MCP server and is refused (401) by another", async () => {
    const s = await stack()
    const auth = client({ issuer: s.issuer, clientId: "reporter", clientSecret: SECRET })
    expect((await call(auth.fetch, s.mcp[0], "tools/list")).status).toBe(200)
    const token = (await auth.tokens(s.mcp[0]))!.access_token
    const other = await fetch(s.mcp[1], {
      method: "POST",
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    })
    expect(other.status).toBe(401)
    expect(other.headers.get("www-authenticate")).toContain('error="invalid_token"')
  })

  it("obtains a new token before the current one expires, without anyone", async () => {
    const s = await stack()
    const entries = new Map<string, unknown>()
    const store = {
      get: async (key: string) => entries.get(key),
      set: async (key: string, value: unknown) => void entries.set(key, value),
      delete: async (key: string) => void entries.delete(key),
    }
    const auth = client({ issuer: s.issuer, clientId: "reporter", clientSecret: SECRET }, { store })
    expect((await call(auth.fetch, s.mcp[0], "tools/list")).status).toBe(200)
    const first = (await auth.tokens(s.mcp[0]))!.access_token
    // Still valid for 30 s, within the 60 s the client renews ahead.
    const key = `tokens:${s.mcp[0]}`
    entries.set(key, { ...(entries.get(key) as object), expires_at: Date.now() + 30_000 })
    expect((await call(auth.fetch, s.mcp[0], "tools/list")).status).toBe(200)
    expect(s.tokenRequests).toHaveLength(2)
    // For the scope held, not for every scope the server lists.
    expect(s.tokenRequests[1]?.form.get("scope")).toBe("notes:read")
    expect((await auth.tokens(s.mcp[0]))!.access_token).not.toBe(first)
  })

  it("403 insufficient_scope is a typed failure by default", async () => {
    const s = await stack()
    const auth = client({ issuer: s.issuer, clientId: "reader", clientSecret: SECRET })
    expect((await call(auth.fetch, s.mcp[0], "tools/list")).status).toBe(200)
    const error = await call(auth.fetch, s.mcp[0], "tools/call", { name: "write_note", arguments: {} }).catch(
      (e: unknown) => e,
    )
    expect(isAuthError(error)).toBe(true)
    expect(error).toMatchObject({ step: "step-up", reason: "insufficient-scope", status: 403 })
    expect((error as Error).message).toBe(
      `${s.mcp[0]} needs the scope "notes:read notes:write" for tools/call write_note, beyond the token's "notes:read"; this client does not ask for more scope on its own (enable step-up, or configure the scope it requests)`,
    )
  })

  it("with stepUp, asks for the union of scopes, and the server's refusal of more is the typed failure", async () => {
    const s = await stack()
    const auth = client({ issuer: s.issuer, clientId: "reader", clientSecret: SECRET, stepUp: true })
    expect((await call(auth.fetch, s.mcp[0], "tools/list")).status).toBe(200)
    const error = await call(auth.fetch, s.mcp[0], "tools/call", { name: "write_note", arguments: {} }).catch(
      (e: unknown) => e,
    )
    expect(s.tokenRequests.at(-1)?.form.get("scope")).toBe("notes:read notes:write")
    expect(error).toMatchObject({ step: "token", reason: "oauth-error", error: "invalid_scope", status: 400 })
  })

  it("with stepUp, a client allowed the scope gets it", async () => {
    const s = await stack()
    const auth = client(
      { issuer: s.issuer, clientId: "reporter", clientSecret: SECRET, stepUp: true },
      { scope: "notes:read" },
    )
    expect((await call(auth.fetch, s.mcp[0], "tools/list")).status).toBe(200)
    const written = await call(auth.fetch, s.mcp[0], "tools/call", { name: "write_note", arguments: {} })
    expect(written.status).toBe(200)
    expect(await written.json()).toMatchObject({ result: { scopes: ["notes:read", "notes:write"] } })
  })

  it("never sends the credentials to another authorization server than theirs", async () => {
    const s = await stack()
    const auth = client({ issuer: "https://auth.example.com", clientId: "reporter", clientSecret: SECRET })
    const error = await call(auth.fetch, s.mcp[0], "tools/list").catch((e: unknown) => e)
    expect(error).toMatchObject({ step: "token", reason: "issuer-mismatch", url: s.issuer })
    expect((error as Error).message).toBe(
      `${s.mcp[0]} uses the authorization server ${s.issuer}, but the client credentials of reporter belong to https://auth.example.com; they are not sent there`,
    )
    expect(s.tokenRequests).toHaveLength(0)
  })

  it("a key-only client facing a server without private_key_jwt fails before any request", () => {
    expect(selectMethod(["client_secret_basic"], { privateKey: { key: keys.privateKey } })).toBeUndefined()
    expect(selectMethod(undefined, { clientSecret: "x" })).toBe("client_secret_basic")
    expect(
      selectMethod(["client_secret_post", "private_key_jwt"], {
        clientSecret: "x",
        privateKey: { key: keys.privateKey },
      }),
    ).toBe("private_key_jwt")
    expect(
      selectMethod(["client_secret_basic", "client_secret_post"], { clientSecret: "x", method: "client_secret_post" }),
    ).toBe("client_secret_post")
  })

  it("refuses to be made without a secret or a private key", () => {
    expect(thrownBy(() => clientCredentials({ issuer: "https://a", clientId: "c" } as never))).toEqual(
      new Options.InvalidOptions({
        factory: "clientCredentials",
        option: "",
        message: "clientCredentials: give clientSecret, privateKey or both",
      }),
    )
  })

  it("declares the extension in the client capabilities", async () => {
    const { Extension } = await import("@keyway/client")
    expect(
      Extension.capabilities([clientCredentials({ issuer: "https://a", clientId: "c", clientSecret: "s" })]),
    ).toEqual({
      extensions: { [EXTENSION_ID]: {} },
    })
  })
})

describe("client credentials: every refusal of the authorization server", () => {
  const basic = (id: string, secret = SECRET) => ({ authorization: `Basic ${btoa(`${id}:${secret}`)}` })

  it("a wrong secret: invalid_client, 401 with a Basic challenge", async () => {
    const s = await stack()
    const response = await raw(s, { grant_type: "client_credentials", resource: s.mcp[0] }, basic("reporter", "wrong"))
    expect(response.headers.get("www-authenticate")).toBe('Basic realm="token"')
    await expectOAuthError(response, 401, "invalid_client", "client authentication failed")
  })

  it("no client authentication: invalid_client", async () => {
    const s = await stack()
    await expectOAuthError(
      await raw(s, { grant_type: "client_credentials", resource: s.mcp[0] }),
      401,
      "invalid_client",
      "client authentication failed",
    )
  })

  it("a client without the grant: unauthorized_client", async () => {
    const s = await stack()
    await expectOAuthError(
      await raw(s, { grant_type: "client_credentials", resource: s.mcp[0] }, basic("interactive")),
      400,
      "unauthorized_client",
      "this client may not use the client_credentials grant",
    )
  })

  it("the grant on a server without the extension: unsupported_grant_type", async () => {
    const s = await startStack(() => ({ clients: [clients[2]!] }))
    cleanups.push(s.close)
    await expectOAuthError(
      await raw(s, { grant_type: "client_credentials", resource: s.mcp[0] }, basic("interactive")),
      400,
      "unsupported_grant_type",
      "grant_type client_credentials is not supported",
    )
  })

  it("a resource the client may not have: invalid_target; an unknown or malformed one too; none: invalid_request", async () => {
    const s = await stack()
    await expectOAuthError(
      await raw(s, { grant_type: "client_credentials", resource: s.mcp[1] }, basic("reader")),
      400,
      "invalid_target",
      `this client may not obtain tokens for ${s.mcp[1]}`,
    )
    await expectOAuthError(
      await raw(s, { grant_type: "client_credentials", resource: "https://elsewhere.example/mcp" }, basic("reporter")),
      400,
      "invalid_target",
      "resource https://elsewhere.example/mcp is not served by this authorization server",
    )
    await expectOAuthError(
      await raw(s, { grant_type: "client_credentials", resource: "not a uri" }, basic("reporter")),
      400,
      "invalid_target",
      "resource is not a valid absolute URI",
    )
    await expectOAuthError(
      await raw(s, { grant_type: "client_credentials" }, basic("reporter")),
      400,
      "invalid_request",
      "resource is missing: name the MCP server the token is for (RFC 8707)",
    )
  })

  it("scopes beyond the policy, unknown to the resource, or malformed: invalid_scope", async () => {
    const s = await stack()
    await expectOAuthError(
      await raw(s, { grant_type: "client_credentials", resource: s.mcp[0], scope: "notes:write" }, basic("reader")),
      400,
      "invalid_scope",
      "this client may not obtain the scope notes:write",
    )
    await expectOAuthError(
      await raw(s, { grant_type: "client_credentials", resource: s.mcp[0], scope: "admin" }, basic("reporter")),
      400,
      "invalid_scope",
      `${s.mcp[0]} has no scope admin`,
    )
    await expectOAuthError(
      await raw(s, { grant_type: "client_credentials", resource: s.mcp[0], scope: 'bad"scope' }, basic("reporter")),
      400,
      "invalid_scope",
      "scope is malformed",
    )
  })

  it("a default scope when none is asked for: what the policy allows", async () => {
    const s = await stack()
    const response = await raw(s, { grant_type: "client_credentials", resource: s.mcp[0] }, basic("reader"))
    expect(response.status).toBe(200)
    const body = (await response.json()) as Record<string, unknown>
    expect(body).toMatchObject({ token_type: "Bearer", expires_in: 300, scope: "notes:read" })
    expect(body.refresh_token).toBeUndefined()
    expect(Object.keys(body).sort()).toEqual(["access_token", "expires_in", "scope", "token_type"])
  })

  it("a replayed client assertion: invalid_client", async () => {
    const s = await stack()
    const signed = await assertion(s.issuer, { jti: "once" })
    const form = {
      grant_type: "client_credentials",
      resource: s.mcp[0],
      client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
      client_assertion: signed,
    }
    expect((await raw(s, form)).status).toBe(200)
    await expectOAuthError(await raw(s, form), 401, "invalid_client", "client_assertion jti was already used")
  })

  it("a client ID metadata document listing the grant: unauthorized_client (credentials are pre-registered)", async () => {
    const documents = createServer((request, response) => {
      const base = `http://127.0.0.1:${(documents.address() as AddressInfo).port}`
      response.writeHead(200, { "content-type": "application/json", "cache-control": "max-age=3600" })
      response.end(
        JSON.stringify(
          request.url === "/jwks.json"
            ? { keys: [publicJwk] }
            : {
                client_id: `${base}${request.url}`,
                client_name: "Self-described",
                redirect_uris: ["https://app.example.com/callback"],
                grant_types: ["client_credentials"],
                response_types: [],
                token_endpoint_auth_method: "private_key_jwt",
                jwks_uri: `${base}/jwks.json`,
              },
        ),
      )
    })
    await new Promise<void>((resolve) => documents.listen(0, "127.0.0.1", resolve))
    cleanups.push(() => new Promise<void>((resolve) => documents.close(() => resolve())))
    const s = await stack({ clientIdMetadataDocuments: { allowHttpLoopbackClientIds: true } })
    const clientId = `http://127.0.0.1:${(documents.address() as AddressInfo).port}/client.json`
    const response = await raw(s, {
      grant_type: "client_credentials",
      resource: s.mcp[0],
      client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
      client_assertion: await assertion(s.issuer, { sub: clientId }),
    })
    await expectOAuthError(
      response,
      400,
      "unauthorized_client",
      "only pre-registered clients may use the client_credentials grant",
    )
  })

  it("dynamic registration refuses the grant", async () => {
    const s = await stack({ registration: true })
    const response = await fetch(`${s.issuer}/register`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ client_name: "machine", grant_types: ["client_credentials"], response_types: [] }),
    })
    await expectOAuthError(response, 400, "invalid_client_metadata", "grant_type client_credentials is not supported")
  })
})

describe("client credentials: configuration", () => {
  const base = {
    issuer: "https://auth.example.com",
    resources: [{ uri: "https://mcp.example.com/mcp", scopes: SCOPES }],
  }
  const refused = (options: Partial<Config.ConfigOptions>) => {
    try {
      createAuthorizationServer({ ...base, ...options })
    } catch (error) {
      return (error as Error).message
    }
    return undefined
  }

  it("a client with the grant needs the extension, credentials, and no redirect URI", () => {
    expect(refused({ clients: [clients[0]!] })).toBe(
      "clients[0].grantTypes: client_credentials is served by an extension that is not configured: add clientCredentialsGrant() from @keyway/ext-client-credentials/authorization-server to extensions",
    )
    expect(
      refused({
        clients: [{ clientId: "public", redirectUris: [], grantTypes: ["client_credentials"] }],
        extensions: [clientCredentialsGrant()],
      }),
    ).toBe(
      `${EXTENSION_ID}: client public is public (no credentials): the client credentials grant is for confidential clients only (RFC 6749 §4.4)`,
    )
    expect(refused({ clients: [clients[0]!], extensions: [clientCredentialsGrant()] })).toBeUndefined()
  })

  it("policies must name configured clients with the grant, and configured resources", () => {
    expect(refused({ clients: [clients[0]!], extensions: [clientCredentialsGrant({ clients: { nobody: {} } })] })).toBe(
      `${EXTENSION_ID}: clients.nobody: no such client is configured`,
    )
    expect(
      refused({ clients: [clients[2]!], extensions: [clientCredentialsGrant({ clients: { interactive: {} } })] }),
    ).toBe(`${EXTENSION_ID}: clients.interactive: the client's grantTypes do not include client_credentials`)
    expect(
      refused({
        clients: [clients[0]!],
        extensions: [clientCredentialsGrant({ clients: { reporter: { resources: ["https://other.example/mcp"] } } })],
      }),
    ).toBe(`${EXTENSION_ID}: clients.reporter.resources: https://other.example/mcp is not a configured resource`)
    expect(
      thrownBy(() => clientCredentialsGrant({ clients: { reporter: { scope: 3 as unknown as string } } })),
    ).toEqual(
      new Options.InvalidOptions({
        factory: "clientCredentialsGrant",
        option: "clients.reporter.scope",
        message: "clientCredentialsGrant: clients.reporter.scope: must be a string",
      }),
    )
  })
})
