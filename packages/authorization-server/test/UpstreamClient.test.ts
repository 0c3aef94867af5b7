import { createServer, type Server } from "node:http"
import type { AddressInfo } from "node:net"
import { Effect, Result } from "effect"
import { TestClock } from "effect/testing"
import { afterEach, describe, expect, it } from "vitest"
import { UpstreamClient, UpstreamFailure } from "../src/internal/upstreamClient.js"
import { resolveUpstream } from "../src/internal/upstreamOptions.js"

let server: Server | undefined

afterEach(async () => {
  server?.closeAllConnections()
  await new Promise<void>((resolve) => (server === undefined ? resolve() : server.close(() => resolve())))
  server = undefined
})

/**
 * An upstream whose RFC 8414 document is `document(issuer)`, and whose token endpoint answers `token` (status and
 * body); counts the metadata requests.
 */
const upstream = async (
  document: (issuer: string) => unknown,
  token: { readonly status: number; readonly body: unknown } = { status: 404, body: {} },
) => {
  const requests: Array<string> = []
  server = createServer((req, res) => {
    requests.push(req.url ?? "")
    if (req.url === "/token") {
      res.writeHead(token.status, { "content-type": "application/json" })
      res.end(JSON.stringify(token.body))
    } else if (req.url === "/.well-known/oauth-authorization-server") {
      res.writeHead(200, { "content-type": "application/json" })
      res.end(JSON.stringify(document(issuer)))
    } else {
      res.writeHead(404)
      res.end()
    }
  })
  await new Promise<void>((resolve) => server?.listen(0, "127.0.0.1", resolve))
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const resolved = resolveUpstream({ issuer, clientId: "keyway", scope: "openid" }, true)
  if ("error" in resolved) throw new Error(resolved.error)
  return { client: new UpstreamClient(resolved.upstream), issuer, requests }
}

const good = (issuer: string) => ({
  issuer,
  authorization_endpoint: `${issuer}/authorize`,
  token_endpoint: `${issuer}/token`,
  code_challenge_methods_supported: ["S256"],
})

const run = <A, E>(effect: Effect.Effect<A, E>) => Effect.runPromise(effect.pipe(Effect.provide(TestClock.layer())))

describe("UpstreamClient metadata discovery", () => {
  it("keeps the metadata for an hour of the Effect clock, then fetches it again", async () => {
    const { client, issuer, requests } = await upstream(good)
    const fetched = await run(
      Effect.gen(function* () {
        const first = yield* client.metadata
        yield* TestClock.adjust("59 minutes")
        yield* client.metadata
        const before = requests.length
        yield* TestClock.adjust("2 minutes")
        yield* client.metadata
        return { first, before, after: requests.length }
      }),
    )
    expect(fetched.first.token_endpoint).toBe(`${issuer}/token`)
    expect([fetched.before, fetched.after]).toEqual([1, 2])
  })

  it.each<[string, (issuer: string) => unknown, (issuer: string) => string]>([
    [
      "another issuer",
      (issuer) => ({ ...good(issuer), issuer: "https://elsewhere.example" }),
      (issuer) =>
        `has issuer "https://elsewhere.example" but "${issuer}" was expected (compared exactly, without normalisation); refusing to use it`,
    ],
    [
      "no PKCE S256",
      (issuer) => ({ ...good(issuer), code_challenge_methods_supported: ["plain"] }),
      () =>
        "lists code_challenge_methods_supported [plain] without S256; the authorization server must support PKCE S256",
    ],
    [
      "no token endpoint",
      (issuer) => ({ ...good(issuer), token_endpoint: undefined }),
      () => "has no token_endpoint; the authorization code flow needs it",
    ],
  ])(
    "refuses metadata with %s as an UpstreamFailure carrying core's message, and retries next time",
    async (_, document, problem) => {
      const { client, issuer, requests } = await upstream(document)
      const url = `${issuer}/.well-known/oauth-authorization-server`
      const [first, second] = await run(Effect.all([Effect.result(client.metadata), Effect.result(client.metadata)]))
      for (const result of [first, second]) {
        if (Result.isSuccess(result)) throw new Error("expected a failure")
        expect(result.failure._tag).toBe("UpstreamFailure")
        expect(result.failure.message).toBe(`the authorization server metadata at ${url} ${problem(issuer)}`)
      }
      expect(requests).toEqual([url.slice(issuer.length), url.slice(issuer.length)])
    },
  )
})

describe("UpstreamClient code exchange", () => {
  const failureOf = async (status: number, body: unknown) => {
    const { client, issuer } = await upstream(good, { status, body })
    const metadata = await run(client.metadata)
    const outcome = await client
      .exchange(metadata, "code", "v".repeat(43), "http://127.0.0.1/cb")
      .catch((e: unknown) => e)
    return { outcome, endpoint: `${issuer}/token` }
  }

  it("takes any token type and reads the tokens only, even with an expires_in that is a string", async () => {
    const body = { access_token: "at", token_type: "N_A", id_token: "h.p.s", expires_in: "3600" }
    expect((await failureOf(200, body)).outcome).toEqual(body)
  })

  it("refuses an error response and a response without an access token, saying which", async () => {
    const refused = await failureOf(400, { error: "invalid_grant", error_description: "code expired" })
    expect(refused.outcome).toEqual(
      new UpstreamFailure({
        message: `upstream: the token endpoint ${refused.endpoint} answered HTTP 400 invalid_grant: code expired`,
      }),
    )
    const empty = await failureOf(200, { token_type: "Bearer" })
    expect(empty.outcome).toEqual(
      new UpstreamFailure({
        message: `upstream: the token response from ${empty.endpoint} has no access_token; the authorization server must return one (RFC 6749 §5.1)`,
      }),
    )
  })
})
