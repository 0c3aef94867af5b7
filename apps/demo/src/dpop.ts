/**
 * The DPoP demo run (`--scenario dpop`): a machine client (client credentials) whose tokens are bound to its key
 * (RFC 9449), with nonces at both servers. The transcript decodes one proof (no key material) and shows a replayed
 * proof and the bound token sent as a bearer token refused.
 *
 * @module
 */
import { createAuthClient, Extension } from "@keyway/client"
import { clientCredentials } from "@keyway/ext-client-credentials/client"
import { dpop } from "@keyway/ext-dpop/client"
import { createTransport } from "@keyway/mcp-sdk-client"
import { Client } from "@modelcontextprotocol/client"
import { calculateJwkThumbprint, decodeJwt, decodeProtectedHeader, type JWK } from "jose"
import type { DemoOptions, DemoResult } from "./flow.js"
import { demoStore, resultText } from "./held.js"
import { type Exchange, recordingFetch } from "./recorder.js"
import { runScripted } from "./run.js"
import { MACHINE_CLIENT_ID } from "./stack.js"

/** The section titles of the DPoP run, in order. */
export const DPOP_SECTIONS = {
  connect: "Connect: the client binds its token to a key; both servers ask for a nonce first (RFC 9449 §8, §9)",
  proof:
    "One DPoP proof, decoded: the request it was made for, signed by the key the token is bound to (no key material shown)",
  replay: "Replay: the same proof sent again is refused (RFC 9449 §11.1)",
  bearer: "The bound token presented as a bearer token is refused (RFC 9449 §7.2)",
} as const

/** Runs the DPoP scenario; resolves when the whole flow went as it should. */
export const runDpopDemo = (options: DemoOptions): Promise<DemoResult> =>
  runScripted(
    options,
    { machineClient: true, dpop: true },
    async ({ stack, transcript, progress, narrator, redactor }) => {
      const { issuer, mcpUrl } = stack
      const machine = stack.clients.find((c) => c.client_id === MACHINE_CLIENT_ID)
      if (machine?.client_secret === undefined) throw new Error("the stack has no machine client")

      transcript.title("Keyway demo: DPoP, access tokens bound to the client's key (RFC 9449)")
      transcript.lines(
        [
          `authorization server  ${issuer}  (client credentials and DPoP on, nonces required)`,
          `MCP server            ${mcpUrl}  (DPoP scheme beside Bearer, nonces required)`,
          `client                ${MACHINE_CLIENT_ID} with @keyway/ext-client-credentials and @keyway/ext-dpop`,
          "tokens and secrets are shown redacted, with a fingerprint (fp) to tell them apart",
        ],
        2,
      )

      const exchanges: Array<Exchange> = []
      const store = demoStore()
      const extensions = [
        clientCredentials({ issuer, clientId: MACHINE_CLIENT_ID, clientSecret: machine.client_secret }),
        dpop(),
      ]
      const auth = createAuthClient({
        clientName: "Keyway demo DPoP client",
        extensions,
        fetch: recordingFetch(
          (input, init) => globalThis.fetch(input, init),
          (exchange) => {
            exchanges.push(exchange)
            narrator.clientExchange(exchange)
          },
        ),
        store: store.backend,
      })
      const mcp = new Client(
        { name: "keyway-demo-dpop", version: "1.0.0" },
        { capabilities: Extension.capabilities(extensions), versionNegotiation: { mode: "auto" } },
      )
      try {
        transcript.section(DPOP_SECTIONS.connect)
        progress.update("connecting: discovery, a DPoP-bound token, nonces")
        await mcp.connect(createTransport(mcpUrl, auth))
        const listed = await mcp.callTool({ name: "list_notes", arguments: {} })
        transcript.line(`list_notes → ${JSON.stringify(resultText(listed))}`)
        const tokenAnswers = exchanges.filter((e) => e.url.pathname === "/token").map((e) => e.status)
        transcript.note(
          `token endpoint answers: ${tokenAnswers.join(", ")} (400 use_dpop_nonce with a DPoP-Nonce, then the retry with the nonce)`,
        )

        const presented = exchanges.filter(
          (e) => e.url.href === mcpUrl && e.status === 200 && e.requestHeaders.get("dpop") !== null,
        )
        const last = presented.at(-1)
        const proof = last?.requestHeaders.get("dpop")
        const authorization = last?.requestHeaders.get("authorization")
        if (last === undefined || proof == null || authorization == null || !authorization.startsWith("DPoP ")) {
          throw new Error("the client sent no DPoP-bound request")
        }
        const accessToken = authorization.slice("DPoP ".length)
        redactor.add(accessToken)

        transcript.section(DPOP_SECTIONS.proof)
        const header = decodeProtectedHeader(proof)
        const jwk = header.jwk as JWK
        const claims = decodeJwt(proof)
        const bound = (decodeJwt(accessToken).cnf as { jkt?: string } | undefined)?.jkt
        const jkt = await calculateJwkThumbprint(jwk)
        transcript.json({
          header: { typ: header.typ, alg: header.alg, jwk: { kty: jwk.kty, crv: jwk.crv } },
          claims: {
            htm: claims.htm,
            htu: claims.htu,
            iat: claims.iat,
            jti: claims.jti,
            ath: claims.ath,
            nonce: claims.nonce,
          },
        })
        transcript.note(
          `the key's thumbprint ${jkt === bound ? "equals" : "DIFFERS FROM"} the token's cnf.jkt; ath is the SHA-256 of the access token; a new jti on every request`,
        )

        const send = (headers: Record<string, string>) =>
          globalThis.fetch(mcpUrl, {
            method: "POST",
            headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
            body: last.requestBody ?? "{}",
          })

        transcript.section(DPOP_SECTIONS.replay)
        progress.update("replaying a proof")
        const replayed = await send({ authorization, dpop: proof })
        transcript.line(`HTTP ${replayed.status}  WWW-Authenticate: ${replayed.headers.get("www-authenticate") ?? ""}`)
        await replayed.body?.cancel()
        if (replayed.status !== 401) throw new Error(`the replayed proof was answered ${replayed.status}`)

        transcript.section(DPOP_SECTIONS.bearer)
        progress.update("presenting the bound token as a bearer token")
        const asBearer = await send({ authorization: `Bearer ${accessToken}` })
        transcript.line(`HTTP ${asBearer.status}  WWW-Authenticate: ${asBearer.headers.get("www-authenticate") ?? ""}`)
        await asBearer.body?.cancel()
        if (asBearer.status !== 401) throw new Error(`the bound token as Bearer was answered ${asBearer.status}`)

        transcript.section("Done")
        transcript.lines(
          [
            `${transcript.stepCount} steps. The access token is bound to a key that never left the client: every request`,
            "carried a fresh proof for its method and URL, a replayed proof and the token alone were refused. No token,",
            "secret or key material is printed here.",
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
