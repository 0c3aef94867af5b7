import { beforeAll, describe, expect, it } from "vitest"
import { CONNECTED_SECTIONS, runConnectedDemo } from "../src/connected.js"
import { CONNECTED_STEPS, STEPS } from "../src/narrator.js"
import { describe as describeSecret } from "../src/redact.js"
import { positions } from "./support/positions.js"
import { recorded } from "./support/recorded.js"

describe("runConnectedDemo: the user's own account at a code host, through URL-mode elicitation", () => {
  let out = ""
  let err = ""
  let secrets: ReadonlyArray<string> = []
  let providerTokens: ReadonlyArray<string> = []
  let result: Awaited<ReturnType<typeof runConnectedDemo>>

  beforeAll(async () => {
    ;({ out, err, secrets, result } = await recorded((options) =>
      runConnectedDemo({ ...options, onCodeHostTokens: (tokens) => (providerTokens = tokens) }),
    ))
  })

  it("prints each step in order: ask, connect at the code host, retry, silent call, refresh, disconnect, ask again", () => {
    const mcpOrigin = new URL(result.mcpUrl).origin
    const codeHost = /code host {13}(\S+)/u.exec(out)?.[1] ?? "(no code host URL)"
    const elicited = [
      "the notes server answers with a URL-mode elicitation; the agent shows the user:",
      "server   keyway-notes",
      `host     ${new URL(result.mcpUrl).host}`,
      `url      ${mcpOrigin}/connect/codehost?ref=[redacted, 43 chars, fp `,
      "message  Keyway notes needs access to your Code Host account. Open the link to connect it.",
    ]
    const order = [
      CONNECTED_SECTIONS.connect,
      STEPS.challenge,
      STEPS.token,
      "tools: list_notes, read_note, write_note, delete_note, list_code_repositories",
      CONNECTED_SECTIONS.ask,
      "JSON-RPC tools/call list_code_repositories",
      ...elicited,
      "alice answers accept",
      CONNECTED_SECTIONS.follow,
      CONNECTED_STEPS.connectPage,
      `→ GET ${mcpOrigin}/connect/codehost?…`,
      "Set-Cookie: keyway_connect=[redacted, 43 chars",
      "Keyway notes asks to connect your Code Host account for the user alice",
      CONNECTED_STEPS.start,
      "ref   [redacted, 43 chars",
      "csrf  [redacted, 43 chars",
      `Location: ${codeHost}/auth?…`,
      "client_id              keyway-notes",
      `redirect_uri           ${mcpOrigin}/connect/codehost/callback`,
      "code_challenge_method  S256",
      CONNECTED_STEPS.provider,
      "prompt    login",
      "login     alice",
      "password  [redacted]",
      "prompt  consent",
      `Location: ${mcpOrigin}/connect/codehost/callback?…`,
      "code   [redacted, 43 chars",
      `iss    ${codeHost}`,
      CONNECTED_STEPS.callback,
      "code host: authorization_code grant for keyway-notes",
      'MCP server: connected "alice" at codehost',
      "Your Code Host account is connected",
      CONNECTED_SECTIONS.retried,
      STEPS.mcp,
      "code host: API: GET /api/repos for alice 200",
      'list_code_repositories → "3 repositories at Code Host:\\nalice/keyway\\nalice/notes-app\\nalice/dotfiles"',
      CONNECTED_SECTIONS.silent,
      "code host: API: GET /api/repos for alice 200",
      'list_code_repositories → "3 repositories at Code Host:',
      CONNECTED_SECTIONS.refresh,
      "the code host ends its 1 access token(s) (their lifetime, 300 s, is over)",
      "code host: refresh_token grant for keyway-notes",
      "code host: API: GET /api/repos for alice 200",
      'list_code_repositories → "3 repositories at Code Host:',
      CONNECTED_SECTIONS.disconnect,
      CONNECTED_STEPS.disconnect,
      `→ POST ${mcpOrigin}/connect/codehost/disconnect`,
      "← 200 OK",
      "code host: revocation request (RFC 7009)",
      "The account is disconnected; its access was revoked and forgotten.",
      ...elicited,
      "alice answers decline",
      'list_code_repositories → "Your codehost account was not connected (the elicitation was answered \\"decline\\"), so this tool cannot run. Call it again to connect."  (isError)',
      "Done",
    ]
    expect(positions(out, order).map((at, i) => (at < 0 ? `missing: ${order[i]}` : "ok"))).toEqual(
      order.map(() => "ok"),
    )
    // Connected once, asked twice (the second time after disconnecting), refreshed once.
    expect(out.split("alice answers accept")).toHaveLength(2)
    expect(out.split("alice answers decline")).toHaveLength(2)
  })

  it("prints no credential, and no code host token in the transcript or the logs", () => {
    // The code host issued an access token, its refresh, and a refresh token at least.
    expect(providerTokens.length).toBeGreaterThanOrEqual(3)
    for (const token of providerTokens) {
      expect(out.includes(token), `code host token in the transcript: ${describeSecret(token)}`).toBe(false)
      expect(err.includes(token), `code host token on stderr: ${describeSecret(token)}`).toBe(false)
    }
    for (const secret of secrets) expect(out.includes(secret), `leaked ${describeSecret(secret)}`).toBe(false)
    expect(out).not.toMatch(/eyJ[\w-]+\.[\w-]+\.[\w-]+/)
  })
})
