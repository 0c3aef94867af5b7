import { createAuthClient, isAuthError } from "@keyway/client/node"
import { deviceAuthorization } from "@keyway/ext-device-authorization/client"

// Ctrl-C stops the polling; the authorization then fails with `cancelled`.
const controller = new AbortController()
process.once("SIGINT", () => controller.abort())

const auth = createAuthClient({
  clientName: "report-agent",
  store: { file: "tokens.json" },
  extensions: [
    deviceAuthorization({
      // The system browser where one can open, the device flow elsewhere (SSH, containers, CI).
      when: "no-browser",
      signal: controller.signal,
      show: ({ verificationUri, verificationUriComplete, userCode, expiresIn }) => {
        console.error(`On your phone or computer, open ${verificationUriComplete ?? verificationUri}`)
        console.error(`and check that it shows ${userCode} (valid ${Math.floor(expiresIn / 60)} minutes).`)
      },
    }),
  ],
})

try {
  const response = await auth.fetch("https://mcp.example.com/mcp", {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  })
  console.log(response.status)
} catch (error) {
  if (!isAuthError(error)) throw error
  console.error(error.error === "access_denied" ? "Refused on the other device." : error.message)
} finally {
  await auth.dispose()
}
