import { exportJWK, generateKeyPair, SignJWT } from "jose"
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest"
import { TrustPolicy } from "../src/cimd/index.js"
import {
  DOMAIN,
  type TestServer as HttpsServer,
  sendJson,
  startServer as startHttps,
} from "./outbound/support/https.js"
import { approveConsent, HOST, loginForConsent, REDIRECT, resolverLayer } from "./support/cimd.js"
import { exampleExtension } from "./support/exampleExtension.js"
import { authorizeUrl, MCP, startServer, type TestServer, tokenRequest } from "./support/server.js"

let documents: HttpsServer
let jwtKey: CryptoKey
let publicJwk: Record<string, unknown>
let server: TestServer | undefined
const origin = () => documents.origin("client")

beforeAll(async () => {
  const pair = await generateKeyPair("ES256", { extractable: true })
  jwtKey = pair.privateKey
  publicJwk = { ...(await exportJWK(pair.publicKey)), kid: "doc-key", alg: "ES256" }
  documents = await startHttps((request, response) => {
    const self = `${origin()}${request.url}`
    const base = { client_id: self, client_name: "Doc Client", redirect_uris: [REDIRECT] }
    if (request.url === "/client.json") {
      sendJson(response, { ...base, grant_types: ["authorization_code", "refresh_token"] })
    } else if (request.url === "/jwt.json") {
      sendJson(response, { ...base, token_endpoint_auth_method: "private_key_jwt", jwks: { keys: [publicJwk] } })
    } else if (request.url === "/jwks-uri.json") {
      sendJson(response, {
        ...base,
        token_endpoint_auth_method: "private_key_jwt",
        jwks_uri: `${origin()}/jwks.json`,
      })
    } else if (request.url === "/mismatch.json") {
      sendJson(response, { ...base, client_id: `${origin()}/someone-else.json` })
    } else if (request.url === "/tier.json") {
      sendJson(response, { ...base, example_tier: "gold", example_undeclared: true })
    } else if (request.url === "/bad-tier.json") {
      sendJson(response, { ...base, example_limits: { level: "high" } })
    } else if (request.url === "/no-redirects.json") {
      sendJson(response, { client_id: self, client_name: "Doc Client" })
    } else {
      sendJson(response, { error: "not found" }, {}, 404)
    }
  })
})
afterAll(async () => {
  await documents.close()
})
afterEach(async () => {
  await server?.close()
  server = undefined
})

/** authorize -> login -> consent page (returned for inspection) -> approve -> code. */
const frontChannel = async (clientId: string) => {
  const { consent, cookie, query, verifier } = await loginForConsent(server!, clientId)
  expect(consent.status).toBe(200)
  const consentHtml = await consent.text()
  const answer = await approveConsent(server!, query, cookie, consentHtml)
  expect(answer.status).toBe(303)
  const location = new URL(answer.headers.get("location")!)
  expect(`${location.origin}${location.pathname}`).toBe(REDIRECT)
  return { code: location.searchParams.get("code")!, verifier, consentHtml }
}

const expectErrorPage = async (response: Response, error: string, description: string) => {
  expect(response.status).toBe(400)
  expect(response.headers.get("location")).toBeNull()
  const text = await response.text()
  expect(text).toContain(`data-error="${error}"`)
  expect(text).toContain(`<p data-error-description>${description}</p>`)
}

describe("client ID metadata documents at the authorization server", () => {
  it("advertises client_id_metadata_document_supported by default, and not when disabled", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer() })
    const on = (await (await fetch(`${server.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      unknown
    >
    expect(on.client_id_metadata_document_supported).toBe(true)
    await server.close()
    server = await startServer({ clientIdMetadataDocuments: { enabled: false } })
    const off = (await (await fetch(`${server.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<
      string,
      unknown
    >
    expect(off).not.toHaveProperty("client_id_metadata_document_supported")
  })

  it("authorize -> login -> consent -> code -> token with a URL client_id (public client)", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer() })
    const clientId = `${origin()}/client.json`
    const { code, verifier, consentHtml } = await frontChannel(clientId)
    expect(consentHtml).toContain(`<p class="host" data-client-host>${HOST}</p>`)
    expect(consentHtml).toContain("data-client-unverified")
    expect(consentHtml).toContain("<span data-client-name>Doc Client</span>")
    const response = await tokenRequest(server, {
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: REDIRECT,
      client_id: clientId,
      resource: MCP,
    })
    expect(response.status).toBe(200)
    const body = (await response.json()) as { access_token: string; refresh_token?: string }
    expect(JSON.parse(Buffer.from(body.access_token.split(".")[1]!, "base64url").toString())).toMatchObject({
      client_id: clientId,
      aud: MCP,
      sub: "alice",
    })
    expect(typeof body.refresh_token).toBe("string")
  })

  it("marks a client on the allow-list as verified", async () => {
    server = await startServer({
      clientMetadataResolver: resolverLayer({
        policy: TrustPolicy.ClientTrustPolicy.layer({ allow: [`*.${DOMAIN}`] }),
      }),
    })
    const { consentHtml } = await frontChannel(`${origin()}/client.json`)
    expect(consentHtml).toContain("data-client-verified")
    expect(consentHtml).not.toContain("data-client-unverified")
  })

  it("a private_key_jwt client authenticates with a key from its document's inline jwks", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer() })
    const clientId = `${origin()}/jwt.json`
    const { code, verifier } = await frontChannel(clientId)
    const assertion = (audience: string) =>
      new SignJWT({ jti: crypto.randomUUID() })
        .setProtectedHeader({ alg: "ES256", kid: "doc-key" })
        .setIssuer(clientId)
        .setSubject(clientId)
        .setAudience(audience)
        .setIssuedAt()
        .setExpirationTime("2m")
        .sign(jwtKey)
    const grant = {
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: REDIRECT,
      client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
    }
    const unauthenticated = await tokenRequest(server, { ...grant, client_id: clientId })
    expect(unauthenticated.status).toBe(401)
    expect(await unauthenticated.json()).toMatchObject({
      error: "invalid_client",
      error_description: "this client must authenticate with private_key_jwt",
    })
    const response = await tokenRequest(server, {
      ...grant,
      client_assertion: await assertion(`${server.issuer}/token`),
    })
    expect(response.status).toBe(200)
  })

  it("a private_key_jwt client whose jwks_uri answers 404: 401 invalid_client", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer() })
    const clientId = `${origin()}/jwks-uri.json`
    const { code, verifier } = await frontChannel(clientId)
    const assertion = await new SignJWT({ jti: crypto.randomUUID() })
      .setProtectedHeader({ alg: "ES256", kid: "doc-key" })
      .setIssuer(clientId)
      .setSubject(clientId)
      .setAudience(`${server.issuer}/token`)
      .setIssuedAt()
      .setExpirationTime("2m")
      .sign(jwtKey)
    const response = await tokenRequest(server, {
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: REDIRECT,
      client_assertion_type: "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
      client_assertion: assertion,
    })
    expect(response.status).toBe(401)
    expect(await response.json()).toEqual({
      error: "invalid_client",
      error_description: `the client's jwks_uri could not be fetched: ${origin()}/jwks.json answered HTTP 404, expected 200`,
    })
  })

  it("a document whose client_id differs from its URL: invalid_client on the error page, no redirect", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer() })
    const clientId = `${origin()}/mismatch.json`
    const { url } = await authorizeUrl(server, { client_id: clientId, redirect_uri: REDIRECT })
    const response = await fetch(url, { redirect: "manual" })
    await expectErrorPage(
      response,
      "invalid_client",
      `client ID metadata document: &quot;client_id&quot; must equal the document URL exactly: expected &quot;${clientId}&quot;, got &quot;${origin()}/someone-else.json&quot;`,
    )
  })

  it("a document without redirect_uris, an unreachable document and a URL without a path are refused on the page", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer() })
    const cases: ReadonlyArray<[string, string, string]> = [
      [
        `${origin()}/no-redirects.json`,
        "invalid_client",
        "client ID metadata document: &quot;redirect_uris&quot; is required",
      ],
      [
        `${origin()}/missing.json`,
        "invalid_client",
        `the client ID metadata document could not be fetched: ${origin()}/missing.json answered HTTP 404, expected 200`,
      ],
      [
        `https://${HOST}`,
        "invalid_request",
        "client_id is not a valid client ID metadata document URL: must contain a path component",
      ],
    ]
    for (const [clientId, error, description] of cases) {
      const { url } = await authorizeUrl(server, { client_id: clientId, redirect_uri: REDIRECT })
      await expectErrorPage(await fetch(url, { redirect: "manual" }), error, description)
    }
  })

  it("keeps the fields an extension declares: the extension reads them on the client's token requests", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer(), extensions: [exampleExtension] })
    const redeem = async (clientId: string) => {
      const { code, verifier } = await frontChannel(clientId)
      return tokenRequest(server!, {
        grant_type: "authorization_code",
        code,
        code_verifier: verifier,
        redirect_uri: REDIRECT,
        client_id: clientId,
        resource: MCP,
      })
    }
    const tiered = await redeem(`${origin()}/tier.json`)
    expect(tiered.status).toBe(200)
    expect(tiered.headers.get("example-tier")).toBe("gold")
    const plain = await redeem(`${origin()}/client.json`)
    expect(plain.status).toBe(200)
    expect(plain.headers.get("example-tier")).toBe("none")
  })

  it("a document with a value the declaring extension's schema refuses: invalid_client on the page, naming the field", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer(), extensions: [exampleExtension] })
    const { url } = await authorizeUrl(server, { client_id: `${origin()}/bad-tier.json`, redirect_uri: REDIRECT })
    await expectErrorPage(
      await fetch(url, { redirect: "manual" }),
      "invalid_client",
      "client ID metadata document: &quot;example_limits.level&quot; must be a number",
    )
  })

  it("a server whose extensions do not declare the field ignores it", async () => {
    server = await startServer({ clientMetadataResolver: resolverLayer() })
    const { code, verifier } = await frontChannel(`${origin()}/bad-tier.json`)
    const response = await tokenRequest(server, {
      grant_type: "authorization_code",
      code,
      code_verifier: verifier,
      redirect_uri: REDIRECT,
      client_id: `${origin()}/bad-tier.json`,
      resource: MCP,
    })
    expect(response.status).toBe(200)
  })

  it("when disabled, a URL client_id is an unknown client", async () => {
    server = await startServer({ clientIdMetadataDocuments: { enabled: false } })
    const fetched = documents.requests.length
    const { url } = await authorizeUrl(server, { client_id: `${origin()}/client.json`, redirect_uri: REDIRECT })
    const response = await fetch(url, { redirect: "manual" })
    await expectErrorPage(response, "invalid_client", "the client_id is not known to this server")
    expect(documents.requests.length).toBe(fetched)
  })
})
