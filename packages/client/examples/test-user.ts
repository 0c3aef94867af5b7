import { homedir } from "node:os"
import { join } from "node:path"
import { createAuthClient, UserAgent } from "@keyway/client/node"

const serverUrl = process.argv[2] ?? "https://mcp.example.com/mcp"
// Tests and automation only: signs in with test credentials and approves on Keyway's authorization server.
const auth = createAuthClient({
  clientName: "my-tests",
  userAgent: UserAgent.testUser({ username: "alice", password: "correct horse battery staple" }),
  // Kept between runs: the client registers once and reuses its registration (and its tokens).
  store: { file: join(homedir(), ".my-tests", "auth.json") },
})
const response = await auth.fetch(serverUrl, {
  method: "POST",
  headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
})
console.log(response.status, await response.text())
await auth.dispose()
