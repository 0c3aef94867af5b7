import { exportJWK, generateKeyPair, SignJWT } from "jose"
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest"
import type { ClientMetadataResolver } from "../src/cimd/index.js"
import {
  DOMAIN,
  type TestServer as HttpsServer,
  sendJson,
  startServer as startHttps,
} from "./outbound/support/https.js"
import { approveConsent, resolverLayer as cimdResolverLayer, loginForConsent, REDIRECT } from "./support/cimd.js"
import { MCP, startServer, type TestServer, tokenRequest } from "./support/server.js"

/** Resolves to a private address: the guard must refuse it. */
const PRIVATE_HOST = `intranet.${DOMAIN}`

interface Key {
  readonly privateKey: CryptoKey
  readonly jwk: Record<string, unknown>
}
const makeKey = async (kid: string): Promise<Key> => {
  const pair = await generateKeyPair("ES256", { extractable: true })
  return { privateKey: pair.privateKey, jwk: { ...(await exportJWK(pair.publicKey)), kid, alg: "ES256" } }
}

let documents: HttpsServer
let first: Key
let second: Key
/** The keys `/jwks.json` publishes right now. */
let published: Array<Record<string, unknown>> = []
let server: TestServer | undefined
const origin = () => documents.origin("client")
const jwksFetches = () => documents.requests.filter((r) => r.path === "/jwks.json").length

beforeAll(async () => {
  first = await makeKey("key-1")
  second = await makeKey("key-2")
  documents = await startHttps((request, response) => {
    const self = `${origin()}${request.url}`
    const document = (jwksUri: string) =>
      sendJson(response, {
        client_id: self,
        client_name: "Key Client",
        redirect_uris: [REDIRECT],
        token_endpoint_auth_method: "private_key_jwt",
        jwks_uri: jwksUri,
      })
    if (request.url === "/client.json") document(`${origin()}/jwks.json`)
    else if (request.url === "/private-keys.json") document(`https://${PRIVATE_HOST}:${documents.port}/jwks.json`)
    else if (request.url === "/garbled.json") document(`${origin()}/garbled-jwks`)
    else if (request.url === "/secret-keys.json") document(`${origin()}/secret-jwks`)
    else if (request.url === "/jwks.json") sendJson(response, { keys: published }, { "cache-control": "max-age=600" })
    else if (request.url === "/garbled-jwks") {
      response.writeHead(200, { "content-type": "application/json" })
      response.end("{ keys: not json")
    } else if (request.url === "/secret-jwks") sendJson(response, { keys: [{ ...first.jwk, d: "private" }] })
    else sendJson(response, { error: "not found" }, {}, 404)
  })
})
afterAll(async () => {
  await documents.close()
})
beforeEach(() => {
  published = [first.jwk]
})
afterEach(async () => {
  await server?.close()
  server = undefined
})

const resolverLayer = (resolver: ClientMetadataResolver.ResolverOptions = {}) =>
  cimdResolverLayer({ resolver, hosts: { [PRIVATE_HOST]: ["10.1.2.3"] } })

/** authorize -> login -> consent -> approve: an authorization code for the URL client. */
const obtainCode = async (clientId: string) => {
  const { consent, cookie, query, verifier } = await loginForConsent(server!, clientId)
  let location: URL
  if (consent.status === 302) location = new URL(consent.headers.get("location")!)
  else {
    expect(consent.status).toBe(200)
    const answer = await approveConsent(server!, query, cookie, await consent.text())
    expect(answer.status).toBe(303)
    location = new URL(answer.headers.get("location")!)
  }
  return { code: location.searchParams.get("code")!, verifier }
}

const assertion = (clientId: string, key: Key) =>
  new SignJWT({ jti: crypto.randomUUID() })
    .setProtectedHeader({ alg: "ES256", kid: key.jwk.kid as string })
    .setIssuer(clientId)
    .setSubject(clientId)
    .setAudience(`${server!.issuer}/token`)
    .setIssuedAt()
    .setExpirationTime("2m")
    .sign(key.privateKey)

/** Redeems a fresh code with an assertion signed by `key`. */
const redeem = async (clientId: string, key: Key) => {
  const { code, verifier } = await obtainCode(clientId)
  return tokenRequest(server!, {
    grant_type: "authorization_code",
    code,
    code_verifier: verifier,
    redirect_uri: REDIRECT,
    resource: MCP,
    client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
    client_assertion: await assertion(clientId, key),
  })
}

describe("private_key_jwt with the keys at a client ID metadata document's jwks_uri", () => {
  it("accepts an assertion signed by a key from jwks_uri, and reuses the cached set", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer() })
    const clientId = `${origin()}/client.json`
    const before = jwksFetches()
    const response = await redeem(clientId, first)
    expect(response.status).toBe(200)
    const body = (await response.json()) as { access_token: string }
    expect(JSON.parse(Buffer.from(body.access_token.split(".")[1]!, "base64url").toString())).toMatchObject({
      client_id: clientId,
      aud: MCP,
    })
    expect(jwksFetches()).toBe(before + 1)
    // max-age=600: the second assertion is verified against the cached set.
    expect((await redeem(clientId, first)).status).toBe(200)
    expect(jwksFetches()).toBe(before + 1)
  })

  it("fetches the set again once when the assertion names an unknown kid (key rotation)", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer({ jwksRefetchCooldownSeconds: 0 }) })
    const clientId = `${origin()}/client.json`
    expect((await redeem(clientId, first)).status).toBe(200)
    const before = jwksFetches()
    published = [first.jwk, second.jwk]
    const rotated = await redeem(clientId, second)
    expect(rotated.status).toBe(200)
    expect(jwksFetches()).toBe(before + 1)
  })

  it("an unknown kid that is still unknown after the refetch: 401 invalid_client", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer({ jwksRefetchCooldownSeconds: 0 }) })
    const clientId = `${origin()}/client.json`
    expect((await redeem(clientId, first)).status).toBe(200)
    const before = jwksFetches()
    const response = await redeem(clientId, second)
    expect(response.status).toBe(401)
    expect(await response.json()).toEqual({
      error: "invalid_client",
      error_description: "client_assertion rejected: no applicable key found in the JSON Web Key Set",
    })
    expect(jwksFetches()).toBe(before + 1)
  })

  it("within the refetch cool-down an unknown kid does not make the server fetch again", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer() })
    const clientId = `${origin()}/client.json`
    expect((await redeem(clientId, first)).status).toBe(200)
    const before = jwksFetches()
    published = [first.jwk, second.jwk]
    const response = await redeem(clientId, second)
    expect(response.status).toBe(401)
    expect(await response.json()).toMatchObject({ error: "invalid_client" })
    expect(jwksFetches()).toBe(before)
  })

  it("a jwks_uri on a private address is refused by the SSRF guard: 401 invalid_client", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer() })
    const response = await redeem(`${origin()}/private-keys.json`, first)
    expect(response.status).toBe(401)
    const uri = `https://${PRIVATE_HOST}:${documents.port}/jwks.json`
    expect(await response.json()).toEqual({
      error: "invalid_client",
      error_description: `the client's jwks_uri could not be fetched: refused ${uri}: address 10.1.2.3 of ${PRIVATE_HOST} is private (10.0.0.0/8)`,
    })
  })

  it("a jwks_uri answering with something that is not JSON: 401 invalid_client", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer() })
    const response = await redeem(`${origin()}/garbled.json`, first)
    expect(response.status).toBe(401)
    const body = (await response.json()) as { error: string; error_description: string }
    expect(body.error).toBe("invalid_client")
    expect(body.error_description).toMatch(
      new RegExp(`^the client's jwks_uri could not be fetched: ${origin()}/garbled-jwks did not send valid JSON: `),
    )
  })

  it("a jwks_uri publishing a private key: 401 invalid_client", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer() })
    const response = await redeem(`${origin()}/secret-keys.json`, first)
    expect(response.status).toBe(401)
    expect(await response.json()).toEqual({
      error: "invalid_client",
      error_description:
        "the client's jwks_uri did not return a JWK Set of public keys: 'keys.0.d' must not be present: only public keys may be published",
    })
  })
})
