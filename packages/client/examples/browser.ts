import { createAuthClient, TokenStore, UserAgent } from "@keyway/client"

// A web app in the browser: a public client (no secret), its callback page on its own origin.
const auth = createAuthClient({
  clientName: "My notes app",
  applicationType: "web",
  userAgent: UserAgent.redirect({ redirectUri: `${location.origin}/callback` }),
  store: TokenStore.webStorage(),
})
if (location.pathname === "/callback") {
  // The callback page: checks state and iss, redeems the code with the PKCE verifier, then back to the app.
  await auth.complete(location.href)
  location.replace("/")
} else {
  // The first call without a token takes the page to the authorization server; after the callback it succeeds.
  const response = await auth.fetch("https://mcp.example.com/mcp", {
    method: "POST",
    headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  })
  console.log(response.status, await response.text())
}
