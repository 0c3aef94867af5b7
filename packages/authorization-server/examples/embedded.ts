import { createAuthorizationServer, NodeServer, UserAuthenticator } from "@keyway/authorization-server"

// Development on loopback; in production an https issuer behind your TLS-terminating proxy.
const port = Number(process.env.PORT ?? 9000)
const issuer = `http://127.0.0.1:${port}`
const resource = process.env.MCP_RESOURCE ?? "http://127.0.0.1:3000/mcp"

const server = createAuthorizationServer({
  issuer,
  resources: [{ uri: resource, name: "Notes", scopes: { "notes:read": "Read your notes" } }],
  users: [{ username: "alice", passwordHash: await UserAuthenticator.hashPassword("correct horse battery staple") }],
  registration: true, // dynamic client registration, as MCP clients expect
  development: { allowHttpLoopbackIssuer: true }, // http is for loopback development only
})
await server.ready()
// server.handler is a (request: Request) => Promise<Response>: mount it in any server; here node:http.
NodeServer.createNodeServer(server.handler, { publicUrl: issuer, allow: server.allow }).listen(port, "127.0.0.1", () =>
  console.log(`authorization server ${issuer}`),
)
