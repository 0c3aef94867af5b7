import { Layer } from "effect"
import { expect } from "vitest"
import { ClientMetadataResolver, TrustPolicy } from "../../src/cimd/index.js"
import { OutboundFetch, Resolver } from "../../src/outbound/index.js"
import { certificate, DOMAIN } from "../outbound/support/https.js"
import { authorizeUrl, cookieOf, csrfOf, PASSWORD, type TestServer } from "./server.js"

/** The internet host the loopback HTTPS server stands for: client ID metadata documents live there. */
export const HOST = `client.${DOMAIN}`
export const REDIRECT = "https://app.example.com/callback"

export interface ResolverLayerOptions {
  readonly resolver?: ClientMetadataResolver.ResolverOptions
  readonly policy?: Layer.Layer<TrustPolicy.ClientTrustPolicy>
  /** More names for the DNS stand-in, beside {@link HOST} at 127.0.0.1. */
  readonly hosts?: Readonly<Record<string, ReadonlyArray<string>>>
}

/** The resolver over the loopback HTTPS server, which stands for {@link HOST}; fetching is allowed to HOST only. */
export const resolverLayer = ({
  resolver = {},
  policy = TrustPolicy.ClientTrustPolicy.layerAcceptAny,
  hosts = {},
}: ResolverLayerOptions = {}) =>
  ClientMetadataResolver.ClientMetadataResolver.layer(resolver).pipe(
    Layer.provide(
      OutboundFetch.OutboundFetch.layerTest({
        ca: certificate().cert,
        allow: ({ hostname }) => hostname === HOST,
      }).pipe(Layer.provide(Resolver.Resolver.layerMap({ [HOST]: ["127.0.0.1"], ...hosts }))),
    ),
    Layer.provide(policy),
  )

const form = (values: Record<string, string>) => new URLSearchParams(values).toString()

/** authorize -> login as alice for a URL client: returns the response to the consent page request. */
export const loginForConsent = async (server: TestServer, clientId: string) => {
  const request = await authorizeUrl(server, { client_id: clientId, redirect_uri: REDIRECT })
  const page = await fetch(request.url, { redirect: "manual" })
  expect(page.status).toBe(200)
  const query = new URL(request.url).search.slice(1)
  const login = await fetch(`${server.issuer}/authorize/login`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie: cookieOf(page) ?? "" },
    body: form({ csrf_token: csrfOf(await page.text()), request: query, username: "alice", password: PASSWORD }),
  })
  expect(login.status).toBe(303)
  const cookie = cookieOf(login) ?? ""
  const consent = await fetch(login.headers.get("location")!, { redirect: "manual", headers: { cookie } })
  return { consent, cookie, query, verifier: request.verifier }
}

/** Approves on the consent page whose HTML is `consentHtml`; returns the consent endpoint's response. */
export const approveConsent = (server: TestServer, query: string, cookie: string, consentHtml: string) =>
  fetch(`${server.issuer}/authorize/consent`, {
    method: "POST",
    redirect: "manual",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie },
    body: form({ csrf_token: csrfOf(consentHtml), request: query, decision: "approve" }),
  })
