import { rawRequest } from "@keyway/testing/raw"
import { afterEach, describe, expect, it } from "vitest"
import { listen, type RunningServer } from "../src/node/Node.js"
import { createProtectedResource } from "../src/ProtectedResource.js"
import { custom } from "../src/TokenVerifier.js"

const running: Array<RunningServer> = []
afterEach(async () => {
  for (const r of running.splice(0)) await r.close()
})

describe("the protected resource on node:http", () => {
  const guard = createProtectedResource({
    resource: "https://mcp.example.com/mcp",
    authorizationServers: ["https://as.example.com"],
    verifier: custom(() => null),
  })

  it("with publicUrl, a caller's Host reaches neither the metadata nor the challenge", async () => {
    const server = await listen(
      guard.protect(() => new Response("never")),
      {
        publicUrl: "https://mcp.example.com",
      },
    )
    running.push(server)
    const metadata = await rawRequest(
      server.port,
      "GET /.well-known/oauth-protected-resource/mcp HTTP/1.1\r\nHost: evil.example\r\n\r\n",
    )
    expect(metadata.status).toBe(200)
    expect(metadata.body).not.toContain("evil")
    const challenge = await rawRequest(
      server.port,
      "POST /mcp HTTP/1.1\r\nHost: evil.example\r\nContent-Length: 0\r\n\r\n",
    )
    expect(challenge.status).toBe(401)
    expect(challenge.headers["www-authenticate"]).toBe(
      'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource/mcp"',
    )
  })
})
