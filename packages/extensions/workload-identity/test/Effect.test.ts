import {
  AuthorizationServer,
  Extension as ServerExtension,
  Storage,
  UserAuthenticator,
} from "@keyway/authorization-server"
import { AuthClient, ClientConfig, DiscoveryCache, Extension, TokenStore, UserAgent } from "@keyway/client"
import { Grant } from "@keyway/core"
import { Effect, Layer, ManagedRuntime } from "effect"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { workloadIdentityGrant } from "../src/authorization-server.js"
import { workloadIdentity } from "../src/client.js"
import { type Stack, startStack, startWorkloadIssuer, type WorkloadIssuer } from "./support.js"

describe("the Effect faces", () => {
  let stack: Stack
  let workload: WorkloadIssuer
  beforeAll(async () => {
    stack = await startStack()
    workload = await startWorkloadIssuer(() => "https://as.example/token")
  })
  afterAll(async () => {
    await stack?.close()
    await workload?.close()
  })

  it("the client's layer takes the extension from Extensions.layer", async () => {
    const assertion = await stack.workload.sign({})
    const layer = AuthClient.AuthClient.layer.pipe(
      Layer.provide(Extension.Extensions.layer([workloadIdentity({ assertion })])),
      Layer.provide(ClientConfig.ClientConfig.layer()),
      Layer.provide(TokenStore.TokenStore.layerMemory),
      Layer.provide(DiscoveryCache.DiscoveryCache.layerMemory),
      Layer.provide(UserAgent.UserAgent.layerHeadless()),
    )
    const runtime = ManagedRuntime.make(layer)
    try {
      const tokens = await runtime.runPromise(
        AuthClient.AuthClient.use((client) => client.authorize(stack.mcp[0], { scope: "notes:read" })),
      )
      expect(tokens).toMatchObject({ scope: "notes:read", resource: stack.mcp[0], issuer: stack.issuer })
      expect(stack.asRequests.filter((r) => r.startsWith("POST"))).toContain(`POST /token ${Grant.JWT_BEARER}`)
    } finally {
      await runtime.dispose()
    }
  })

  it("the authorization server's layer takes the extension from Extensions.layer", async () => {
    const resource = "https://mcp.example/mcp"
    const options = {
      issuer: "https://as.example",
      resources: [{ uri: resource, scopes: { "notes:read": "Read notes" } }],
      warn: () => {},
    }
    const layer = AuthorizationServer.AuthorizationServer.layer(options).pipe(
      Layer.provide(
        ServerExtension.Extensions.layer([
          workloadIdentityGrant({
            issuers: [
              {
                issuer: workload.issuer,
                jwks: { keys: [workload.publicJwk] },
                rules: [
                  { claims: { sub: "spiffe://example.org/agent" }, resources: [resource], scopes: ["notes:read"] },
                ],
              },
            ],
            log: () => {},
          }),
        ]),
      ),
      Layer.provideMerge(Layer.merge(Storage.layerMemory, UserAuthenticator.UserAuthenticator.layerUsers([]))),
    )
    const runtime = ManagedRuntime.make(layer)
    try {
      const assertion = await workload.sign({})
      const request = new Request("https://as.example/token", {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams({ grant_type: Grant.JWT_BEARER, assertion, resource }),
      })
      const response = await runtime.runPromise(
        AuthorizationServer.AuthorizationServer.use((server) => server.handle(request)).pipe(Effect.orDie),
      )
      expect(response.status).toBe(200)
      expect(await response.json()).toMatchObject({ token_type: "Bearer", scope: "notes:read" })
    } finally {
      await runtime.dispose()
    }
  })
})
