import { createAuthClient } from "@keyway/client/node"
import { createTransport } from "@keyway/mcp-sdk-client"
import { Client } from "@modelcontextprotocol/client"

const serverUrl = process.argv[2] ?? "https://mcp.example.com/mcp"
const auth = createAuthClient({ clientName: "my-agent" })
const client = new Client({ name: "my-agent", version: "1.0.0" })
await client.connect(createTransport(serverUrl, auth))
console.log(JSON.stringify(await client.listTools()))
await client.close()
await auth.dispose()
