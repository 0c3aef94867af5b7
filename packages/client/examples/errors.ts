import { createAuthClient, isAuthError, KeywayAuthError } from "@keyway/client"

const serverUrl = process.argv[2] ?? "https://mcp.example.com/mcp"
const auth = createAuthClient({ clientName: "my-cli" })
try {
  await auth.fetch(serverUrl, { method: "POST", body: "{}" })
} catch (error) {
  // isAuthError(error) is the same test as error instanceof KeywayAuthError.
  if (!isAuthError(error)) throw error
  console.log(error instanceof KeywayAuthError, error.step, error.reason, error.url)
  console.log(error.message)
} finally {
  await auth.dispose()
}
