import { createAuthorizationServer } from "@keyway/authorization-server"
import { workloadIdentityGrant } from "@keyway/ext-workload-identity/authorization-server"

const mcpServer = "https://mcp.example.com/mcp"

const server = createAuthorizationServer({
  issuer: "https://auth.example.com",
  resources: [{ uri: mcpServer, name: "Notes", scopes: { "notes:read": "Read notes", "notes:write": "Write notes" } }],
  storage: { type: "sqlite", path: "./keyway-as.db" },
  extensions: [
    workloadIdentityGrant({
      issuers: [
        {
          // The cluster's service account issuer and where it publishes its keys.
          issuer: "https://oidc.cluster.example.com",
          jwksUri: "https://oidc.cluster.example.com/openid/v1/jwks",
          rules: [
            {
              // One workload: the notes-agent service account of the agents namespace, read-only.
              claims: { sub: "system:serviceaccount:agents:notes-agent" },
              resources: [mcpServer],
              scopes: ["notes:read"],
            },
          ],
        },
      ],
      // Every decision, issued or refused (never the assertion or the token), to your audit log.
      log: (event) => console.log(JSON.stringify(event)),
    }),
  ],
})

const running = await server.listen({ port: 8080, host: "0.0.0.0" })
console.log(`listening on ${running.url}, issuer ${server.issuer}`)
