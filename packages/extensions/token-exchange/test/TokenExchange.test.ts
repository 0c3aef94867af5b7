import { Grant } from "@keyway/core"
import { decodeJwt } from "jose"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { API, exchange, introspect, MCP, type Storage, signIn, startServer, type TestServer } from "./support/server.js"

describe.each(["memory", "sqlite"] as const satisfies ReadonlyArray<Storage>)(
  "token exchange with %s storage",
  (storage) => {
    let server: TestServer
    beforeAll(async () => {
      server = await startServer({ storage })
    })
    afterAll(async () => {
      await server?.close()
    })

    it("exchanges alice's token for the MCP server for one for the API, with the MCP server as the actor", async () => {
      const user = await signIn(server)
      const response = await exchange(server, user.access_token)
      expect(response.status).toBe(200)
      expect(response.headers.get("cache-control")).toBe("no-store")
      const body = (await response.json()) as Record<string, unknown>
      expect(body).toEqual({
        access_token: expect.any(String),
        issued_token_type: Grant.ACCESS_TOKEN_TYPE,
        token_type: "Bearer",
        expires_in: expect.any(Number),
        scope: "files:read files:write",
      })
      const subject = decodeJwt(user.access_token)
      const claims = decodeJwt(body.access_token as string)
      expect(claims).toMatchObject({
        iss: server.issuer,
        sub: "alice",
        aud: API,
        client_id: "notes-mcp",
        scope: "files:read files:write",
        act: { sub: "notes-mcp" },
      })
      expect(claims.exp).toBeLessThanOrEqual(subject.exp as number)
      expect(body.expires_in).toBe((claims.exp as number) - (claims.iat as number))
      expect(await introspect(server, body.access_token as string)).toMatchObject({
        active: true,
        sub: "alice",
        aud: API,
        client_id: "notes-mcp",
        act: { sub: "notes-mcp" },
      })
      expect(subject.aud).toBe(MCP)
    })
  },
)
