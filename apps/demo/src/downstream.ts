/**
 * The downstream demo run (`--scenario downstream`): the notes MCP server calls another protected API, a calendar,
 * for the signed-in user. MCP forbids it to pass the user's token on, so it exchanges that token at the authorization
 * server (OAuth 2.0 Token Exchange, RFC 8693) for one of its own for the calendar, which still names the user and says
 * that the notes server acts for them. The agent is the default run's, unchanged: all of this happens behind the
 * notes server's `summarize_calendar` tool.
 *
 * @module
 */
import { createAuthClient } from "@keyway/client/node"
import { ClientAuth, Grant } from "@keyway/core"
import { createTransport } from "@keyway/mcp-sdk-client"
import { Client } from "@modelcontextprotocol/client"
import { scriptedUser } from "./agent.js"
import type { DemoOptions, DemoResult } from "./flow.js"
import { demoStore, resultText } from "./held.js"
import { DOWNSTREAM_STEPS } from "./narrator.js"
import { type Exchange, recordingFetch } from "./recorder.js"
import { runScripted } from "./run.js"
import { NOTES_SERVER_CLIENT_ID } from "./stack.js"

/** The section titles of the downstream run, in order. */
export const DOWNSTREAM_SECTIONS = {
  connect: "Connect: the agent signs the user in exactly as in the default run (it is not changed at all)",
  inbound: "The token the notes server receives: for the notes server, and for nothing else",
  call: "Call summarize_calendar: the notes server reaches the calendar for the user, by token exchange",
  refused: "A target the policy does not allow: the notes server may not exchange the token for payroll",
} as const

const NAME = "Keyway demo client"

/** Runs the downstream scenario; resolves when the whole flow went as it should. */
export const runDownstreamDemo = (options: DemoOptions): Promise<DemoResult> => {
  // What the notes server sends out while it answers a tool call; shown after the call, in order.
  const outbound: Array<Exchange> = []
  return runScripted(
    options,
    {
      downstream: {
        fetch: recordingFetch(
          (input, init) => globalThis.fetch(input, init),
          (exchange) => outbound.push(exchange),
        ),
      },
    },
    async ({ stack, transcript, progress, redactor, narrator }) => {
      const { issuer, mcpUrl, downstream } = stack
      if (downstream === undefined) throw new Error("the stack has no calendar")
      const user = stack.users[0] as { username: string; password: string }
      redactor.add(user.password, { lowEntropy: true })
      const notesServer = stack.clients.find((c) => c.client_id === NOTES_SERVER_CLIENT_ID)
      if (notesServer?.client_secret === undefined) throw new Error("the stack has no client for the notes server")

      transcript.title(
        "Keyway demo: an MCP server calling another API for its user (OAuth 2.0 Token Exchange, RFC 8693)",
      )
      transcript.lines(
        [
          `authorization server  ${issuer}  (token exchange on: ${NOTES_SERVER_CLIENT_ID} may exchange notes:read on the notes server for calendar:read on the calendar)`,
          `MCP server            ${mcpUrl}  (notes; summarize_calendar reads your calendar for you)`,
          `calendar API          ${downstream.calendarUrl}  (its own resource: calendar:read; accepts ${NOTES_SERVER_CLIENT_ID} acting for a user)`,
          `demo user             ${user.username}`,
          `client                ${NAME}: the default run's agent, unchanged; it only ever talks to the notes server`,
          "tokens, codes, verifiers, secrets and cookies are shown redacted, with a fingerprint (fp) to tell them apart",
        ],
        2,
      )

      const store = demoStore()
      const auth = createAuthClient({
        clientName: NAME,
        fetch: recordingFetch(
          (input, init) => globalThis.fetch(input, init),
          (exchange) => narrator.clientExchange(exchange),
        ),
        store: store.backend,
        userAgent: scriptedUser({ narrator, username: user.username, password: user.password }),
      })
      const mcp = new Client({ name: "keyway-demo", version: "1.0.0" }, { versionNegotiation: { mode: "auto" } })
      try {
        transcript.section(DOWNSTREAM_SECTIONS.connect)
        progress.update("connecting: discovery, registration, login, consent, token")
        await mcp.connect(createTransport(mcpUrl, auth))
        const { tools } = await mcp.listTools()
        transcript.line(`tools: ${tools.map((tool) => tool.name).join(", ")}`)
        if (!tools.some((tool) => tool.name === "summarize_calendar")) {
          throw new Error("the notes server does not offer summarize_calendar")
        }

        transcript.section(DOWNSTREAM_SECTIONS.inbound)
        const held = store.tokens()[0]?.access_token
        if (held === undefined) throw new Error("the agent holds no access token")
        transcript.step(DOWNSTREAM_STEPS.inbound)
        transcript.line(`Authorization: Bearer ${redactor.show(held)}`)
        narrator.accessTokenClaims(held)
        transcript.note(
          "aud = the notes server, client_id = the agent: the calendar would refuse this token, and MCP forbids the notes server to pass it on",
        )

        transcript.section(DOWNSTREAM_SECTIONS.call)
        progress.update("calling summarize_calendar (token exchange, calendar)")
        outbound.length = 0
        const summary = await mcp.callTool({ name: "summarize_calendar", arguments: {} })
        if (summary.isError === true) throw new Error(`summarize_calendar failed: ${resultText(summary)}`)
        transcript.note("while answering that request, the notes server made these calls of its own:", 4)
        for (const exchange of outbound.splice(0)) narrator.downstreamExchange(exchange)
        transcript.section("The tool's answer, as the agent receives it")
        transcript.line(`summarize_calendar → ${JSON.stringify(resultText(summary))}`)

        transcript.section(DOWNSTREAM_SECTIONS.refused)
        progress.update("asking for a token for payroll (refused)")
        transcript.note(
          `the exchange the notes server would make if it asked for another API: its rules name the calendar only, not ${downstream.otherResource}`,
        )
        const refused = await recordingFetch(
          (input, init) => globalThis.fetch(input, init),
          (exchange) => narrator.downstreamExchange(exchange, DOWNSTREAM_STEPS.refused),
        )(`${issuer}/token`, {
          method: "POST",
          headers: {
            "content-type": "application/x-www-form-urlencoded",
            accept: "application/json",
            authorization: ClientAuth.encodeClientSecretBasic(NOTES_SERVER_CLIENT_ID, notesServer.client_secret),
          },
          body: new URLSearchParams({
            grant_type: Grant.TOKEN_EXCHANGE,
            subject_token: held,
            subject_token_type: Grant.ACCESS_TOKEN_TYPE,
            resource: downstream.otherResource,
            scope: "payroll:read",
          }).toString(),
        })
        const answer = (await refused.json()) as { error?: unknown }
        if (refused.status !== 400 || answer.error !== "invalid_target") {
          throw new Error(`the exchange for payroll was answered ${refused.status} ${JSON.stringify(answer)}`)
        }

        transcript.section("Done")
        transcript.lines(
          [
            `${transcript.stepCount} steps. The agent signed the user in and called a tool, as it always does; it never saw`,
            "the calendar. The notes server did not pass the user's token on: it exchanged it for a token for the calendar",
            `that names the same user (sub) and itself as the actor (act.sub = ${NOTES_SERVER_CLIENT_ID}), with only what its rules`,
            "map from the user's scope, and a target its rules do not name was refused. No token or secret is printed here.",
          ],
          2,
        )
        return { steps: transcript.stepCount, issuer, mcpUrl }
      } finally {
        progress.update("shutting down")
        await mcp.close().catch(() => undefined)
        await auth.dispose().catch(() => undefined)
      }
    },
  )
}
