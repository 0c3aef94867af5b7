import { homedir } from "node:os"
import { createAuthClient } from "@keyway/client/node"

const serverUrl = process.argv[2] ?? "https://mcp.example.com/mcp"
const auth = createAuthClient({ clientName: "my-cli", store: { file: `${homedir()}/.my-cli/auth.json` } })
const response = await auth.fetch(serverUrl, {
  method: "POST",
  headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
})
console.log(response.status, await response.text())
await auth.dispose()
