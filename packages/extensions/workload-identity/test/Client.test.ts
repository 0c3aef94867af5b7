import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import {
  AuthClient,
  ClientConfig,
  createAuthClient,
  DiscoveryCache,
  Extension,
  isAuthError,
  type KeywayAuthError,
  TokenStore,
  UserAgent,
} from "@keyway/client"
import { Grant } from "@keyway/core"
import { Layer, ManagedRuntime } from "effect"
import { TestClock } from "effect/testing"
import { decodeJwt } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { workloadIdentity } from "../src/client.js"
import { assertionFile } from "../src/node.js"
import { type Stack, startStack } from "./support.js"

const JWT_BEARER = `POST /token ${Grant.JWT_BEARER}`

const listTools = (client: { fetch: (url: string, init: RequestInit) => Promise<Response> }, url: string) =>
  client.fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list", params: {} }),
  })

const failure = async (promise: Promise<unknown>): Promise<KeywayAuthError> => {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  if (!isAuthError(error)) throw new Error(`expected an AuthError, got ${String(error)}`)
  return error
}

describe("Keyway's client with workload identity against Keyway's authorization server", () => {
  let stack: Stack
  beforeAll(async () => {
    stack = await startStack()
  })
  afterAll(async () => {
    await stack?.close()
  })

  it("obtains a token with the workload's JWT (minted for the server's audience) and calls the MCP server", async () => {
    const asked: Array<unknown> = []
    const client = createAuthClient({
      extensions: [
        workloadIdentity({
          assertion: async (context) => {
            asked.push(context)
            return stack.workload.sign({ aud: context.tokenEndpoint })
          },
        }),
      ],
    })
    try {
      stack.asRequests.length = 0
      const response = await listTools(client, stack.mcp[0])
      expect(response.status).toBe(200)
      expect(await response.json()).toMatchObject({ result: { subject: "spiffe://example.org/agent" } })
      expect(asked).toEqual([{ issuer: stack.issuer, tokenEndpoint: stack.tokenEndpoint, resource: stack.mcp[0] }])
      // Discovery, then one JWT bearer request: no registration, no authorization endpoint.
      expect(stack.asRequests.filter((r) => r.startsWith("POST"))).toEqual([JWT_BEARER])
      const tokens = await client.tokens(stack.mcp[0])
      expect(tokens).toMatchObject({ scope: "notes:read", resource: stack.mcp[0], issuer: stack.issuer })
      expect(tokens).not.toHaveProperty("client_id")
      expect(tokens).not.toHaveProperty("refresh_token")
    } finally {
      await client.dispose()
    }
  })

  it("sends grant_type, assertion, resource and scope, and no client authentication", async () => {
    const bodies: Array<URLSearchParams> = []
    const headers: Array<Headers> = []
    const assertion = await stack.workload.sign({})
    const client = createAuthClient({
      scope: "notes:read",
      fetch: async (input, init) => {
        if (String(input) === stack.tokenEndpoint) {
          bodies.push(new URLSearchParams(String(init?.body)))
          headers.push(new Headers(init?.headers))
        }
        return fetch(input, init)
      },
      extensions: [workloadIdentity({ assertion })],
    })
    try {
      expect((await listTools(client, stack.mcp[0])).status).toBe(200)
      expect(bodies.map((b) => Object.fromEntries(b))).toEqual([
        { grant_type: Grant.JWT_BEARER, assertion, resource: stack.mcp[0], scope: "notes:read" },
      ])
      expect(headers[0]?.has("authorization")).toBe(false)
    } finally {
      await client.dispose()
    }
  })

  it("never sends a rejected assertion again and never falls back to another grant", async () => {
    const assertion = await stack.workload.sign({ aud: "https://other-as.example" })
    const client = createAuthClient({ extensions: [workloadIdentity({ assertion })] })
    try {
      stack.asRequests.length = 0
      const first = await failure(listTools(client, stack.mcp[0]))
      expect(first).toMatchObject({
        step: "token",
        reason: "invalid-grant",
        error: "invalid_grant",
        status: 400,
        url: stack.tokenEndpoint,
        message: `the token endpoint ${stack.tokenEndpoint} answered HTTP 400 invalid_grant: the assertion's aud does not name this authorization server (accepted: ${stack.issuer}, ${stack.tokenEndpoint}); the workload assertion is not sent again (a rejected assertion is never replayed)`,
      })
      const second = await failure(listTools(client, stack.mcp[0]))
      expect(second).toMatchObject({
        step: "token",
        reason: "invalid-grant",
        url: stack.tokenEndpoint,
        message: `the authorization server ${stack.issuer} already refused this workload assertion and it is never sent twice; a new assertion is needed (mint one, or wait for the platform to rotate the token)`,
      })
      expect(second).not.toHaveProperty("status")
      expect(second).not.toHaveProperty("error")
      // One token request in all, and nothing of the authorization code flow.
      expect(stack.asRequests.filter((r) => r.startsWith("POST"))).toEqual([JWT_BEARER])
      expect(stack.asRequests.filter((r) => /\/(authorize|register)/.test(r))).toEqual([])
    } finally {
      await client.dispose()
    }
  })

  it("surfaces invalid_scope and invalid_target with the server's code", async () => {
    const scoped = createAuthClient({
      scope: "notes:write",
      extensions: [workloadIdentity({ assertion: () => stack.workload.sign({}) })],
    })
    const elsewhere = createAuthClient({ extensions: [workloadIdentity({ assertion: () => stack.workload.sign({}) })] })
    try {
      expect(await failure(listTools(scoped, stack.mcp[0]))).toMatchObject({
        reason: "oauth-error",
        error: "invalid_scope",
        status: 400,
      })
      expect(await failure(listTools(elsewhere, stack.mcp[1]))).toMatchObject({
        reason: "oauth-error",
        error: "invalid_target",
        status: 400,
        message: `the token endpoint ${stack.tokenEndpoint} answered HTTP 400 invalid_target: the workload spiffe://example.org/agent may not obtain tokens for ${stack.mcp[1]}; the workload assertion is not sent again (a rejected assertion is never replayed)`,
      })
    } finally {
      await scoped.dispose()
      await elsewhere.dispose()
    }
  })

  it("surfaces unauthorized_client with the server's code, and does not send the assertion again", async () => {
    let tokenRequests = 0
    const assertion = await stack.workload.sign({})
    const client = createAuthClient({
      // A server that does not let workloads use the grant (Keyway's answers unauthorized_client only to clients).
      fetch: async (input, init) => {
        if (String(input) !== stack.tokenEndpoint) return fetch(input, init)
        tokenRequests++
        return Response.json(
          { error: "unauthorized_client", error_description: "workloads may not use this grant here" },
          { status: 400 },
        )
      },
      extensions: [workloadIdentity({ assertion })],
    })
    try {
      expect(await failure(listTools(client, stack.mcp[0]))).toMatchObject({
        step: "token",
        reason: "oauth-error",
        error: "unauthorized_client",
        status: 400,
        message: `the token endpoint ${stack.tokenEndpoint} answered HTTP 400 unauthorized_client: workloads may not use this grant here; the workload assertion is not sent again (a rejected assertion is never replayed)`,
      })
      expect(await failure(listTools(client, stack.mcp[0]))).toMatchObject({ reason: "invalid-grant" })
      expect(tokenRequests).toBe(1)
    } finally {
      await client.dispose()
    }
  })

  it("reports a source that fails without a request", async () => {
    const client = createAuthClient({
      extensions: [
        workloadIdentity({
          assertion: () => {
            throw new Error("the platform has no token for this pod")
          },
        }),
      ],
    })
    try {
      stack.asRequests.length = 0
      expect(await failure(listTools(client, stack.mcp[0]))).toMatchObject({
        step: "token",
        reason: "invalid-input",
        message: "the workload assertion could not be obtained: the platform has no token for this pod",
      })
      expect(stack.asRequests.filter((r) => r.startsWith("POST"))).toEqual([])
    } finally {
      await client.dispose()
    }
  })

  it("reads a token file at each request and picks up its rotation", async () => {
    const dir = mkdtempSync(join(tmpdir(), "keyway-wif-file-"))
    const path = join(dir, "token")
    const client = createAuthClient({ extensions: [workloadIdentity({ assertion: assertionFile(path) })] })
    try {
      expect(await failure(listTools(client, stack.mcp[0]))).toMatchObject({
        reason: "invalid-input",
        message: expect.stringMatching(
          new RegExp(`^the workload assertion could not be obtained: cannot read the token file ${path}: `),
        ),
      })
      writeFileSync(path, "\n")
      expect(await failure(listTools(client, stack.mcp[0]))).toMatchObject({
        reason: "invalid-input",
        message: `the workload assertion could not be obtained: the token file ${path} is empty`,
      })
      const first = await stack.workload.sign({})
      writeFileSync(path, `${first}\n`)
      expect((await listTools(client, stack.mcp[0])).status).toBe(200)
      const firstToken = (await client.tokens(stack.mcp[0]))?.access_token
      // The server forgets nothing: a second authorization with the same file is a replay, refused and not retried.
      await client.logout(stack.mcp[0])
      expect(await failure(listTools(client, stack.mcp[0]))).toMatchObject({ error: "invalid_grant" })
      // The platform rotates the file: the new JWT is used.
      const rotated = await stack.workload.sign({})
      writeFileSync(path, rotated)
      expect((await listTools(client, stack.mcp[0])).status).toBe(200)
      const secondToken = (await client.tokens(stack.mcp[0]))?.access_token
      expect(secondToken).toBeDefined()
      expect(secondToken).not.toBe(firstToken)
    } finally {
      await client.dispose()
      rmSync(dir, { recursive: true, force: true })
    }
  })

  it("declares the extension in the MCP client capabilities", () => {
    expect(Extension.capabilities([workloadIdentity({ assertion: "x" })])).toEqual({
      extensions: { "io.modelcontextprotocol/auth/wif": {} },
    })
    expect(AuthClient).toBeDefined()
  })
})

describe("re-acquisition before expiry", () => {
  let stack: Stack
  beforeAll(async () => {
    stack = await startStack({ accessTokenTtl: 3 })
  })
  afterAll(async () => {
    await stack?.close()
  })

  /**
   * The client's Effect face on a TestClock that stands still until `adjust` moves it, so the test says exactly
   * when a token stops being fresh. Tokens live 3 s and are obtained again 2 s before they expire: fresh for 1000 ms
   * after they were obtained.
   */
  const clockedClient = (extension: Extension.ClientExtension) => {
    const runtime = ManagedRuntime.make(
      AuthClient.AuthClient.layer.pipe(
        Layer.provide(Extension.Extensions.layer([extension])),
        Layer.provide(ClientConfig.ClientConfig.layer({ refreshSkewSeconds: 2 })),
        Layer.provide(TokenStore.TokenStore.layerMemory),
        Layer.provide(DiscoveryCache.DiscoveryCache.layerMemory),
        Layer.provide(UserAgent.UserAgent.layerHeadless()),
        Layer.provideMerge(Layer.provideMerge(Layer.effectDiscard(TestClock.setTime(Date.now())), TestClock.layer())),
      ),
    )
    return {
      fetch: (url: string, init: RequestInit) =>
        runtime.runPromise(AuthClient.AuthClient.use((client) => client.fetch(url, init))),
      tokens: (url: string) => runtime.runPromise(AuthClient.AuthClient.use((client) => client.tokens(url))),
      adjust: (millis: number) => runtime.runPromise(TestClock.adjust(millis)),
      dispose: () => runtime.dispose(),
    }
  }

  it("obtains a new token with a new assertion when the current one is about to expire", async () => {
    let minted = 0
    const client = clockedClient(
      workloadIdentity({
        assertion: () => {
          minted++
          return stack.workload.sign({})
        },
      }),
    )
    try {
      stack.asRequests.length = 0
      expect((await listTools(client, stack.mcp[0])).status).toBe(200)
      const first = (await client.tokens(stack.mcp[0]))?.access_token as string
      expect(minted).toBe(1)
      // 999 ms later the token is still fresh: used as it is.
      await client.adjust(999)
      expect((await listTools(client, stack.mcp[0])).status).toBe(200)
      expect((await client.tokens(stack.mcp[0]))?.access_token).toBe(first)
      expect(minted).toBe(1)
      // 1000 ms: within the skew of its expiry, so obtained again before the request.
      await client.adjust(1)
      expect((await listTools(client, stack.mcp[0])).status).toBe(200)
      const second = (await client.tokens(stack.mcp[0]))?.access_token as string
      expect(second).not.toBe(first)
      expect(decodeJwt(second).jti).not.toBe(decodeJwt(first).jti)
      expect(minted).toBe(2)
      // Both obtained before the MCP server ever had to answer 401 for an expired token.
      expect(stack.asRequests.filter((r) => r.startsWith("POST"))).toEqual([JWT_BEARER, JWT_BEARER])
    } finally {
      await client.dispose()
    }
  })

  it("keeps a token that still works when re-acquisition is refused", async () => {
    const assertion = await stack.workload.sign({})
    const client = clockedClient(workloadIdentity({ assertion }))
    try {
      expect((await listTools(client, stack.mcp[0])).status).toBe(200)
      const first = (await client.tokens(stack.mcp[0]))?.access_token
      await client.adjust(1000)
      // The same JWT again is a replay: refused once, and the unexpired token keeps being used.
      expect((await listTools(client, stack.mcp[0])).status).toBe(200)
      expect((await listTools(client, stack.mcp[0])).status).toBe(200)
      expect((await client.tokens(stack.mcp[0]))?.access_token).toBe(first)
      const refusals = stack.log.filter((e) => e.outcome === "refused" && e.jti === decodeJwt(assertion).jti)
      expect(refusals).toHaveLength(1)
    } finally {
      await client.dispose()
    }
  })
})
