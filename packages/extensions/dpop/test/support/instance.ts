/**
 * One MCP server process for test/ScaleOut.test.ts: a protected endpoint with the DPoP scheme and the replay store it
 * is told. Node runs it directly (type stripping) over the built package, so build it first:
 *
 *     node test/support/instance.ts '<InstanceOptions as JSON>'
 *
 * It listens on 127.0.0.1 port 0, with the resource's origin as its public URL (as behind a TLS-terminating load
 * balancer), reports `{ type: "listening", port }` over the IPC channel of `child_process.fork`, and stops on
 * `{ type: "close" }` or when the parent goes away.
 */
import { createProtectedResource, jwt, Node } from "@keyway/resource-server/node"
import { postgresReplayCache, type ReplayCache, sqliteReplayCache } from "../../dist/node.js"
import { dpopScheme } from "../../dist/resource-server.js"

/** What an instance is started with. */
export interface InstanceOptions {
  readonly resource: string
  readonly issuer: string
  readonly jwksUri: string
  readonly store:
    | { readonly type: "memory" }
    | { readonly type: "sqlite"; readonly path: string }
    | { readonly type: "postgres"; readonly connectionString: string }
}

const options = JSON.parse(process.argv[2] ?? "{}") as InstanceOptions
const store: (ReplayCache & { readonly close: () => Promise<void> }) | undefined =
  options.store.type === "sqlite"
    ? sqliteReplayCache({ path: options.store.path })
    : options.store.type === "postgres"
      ? await postgresReplayCache({ connectionString: options.store.connectionString })
      : undefined
const protectedResource = createProtectedResource({
  resource: options.resource,
  authorizationServers: [options.issuer],
  verifier: jwt({ jwksUri: options.jwksUri }),
  presentationSchemes: [dpopScheme(store === undefined ? {} : { replayCache: store })],
})
const handler = protectedResource.protect((_request, { token }) =>
  Response.json({ jsonrpc: "2.0", id: 1, result: { subject: token.subject, pid: process.pid } }),
)
const running = await Node.listen(handler, { publicUrl: new URL(options.resource).origin })

let closing: Promise<void> | undefined
const close = () => {
  closing ??= running
    .close()
    .then(() => protectedResource.close())
    .then(() => store?.close())
    .finally(() => process.exit(0))
  return closing
}
process.on("message", (message: { readonly type: string }) => {
  if (message.type === "close") void close()
})
process.on("disconnect", () => void close())
process.send?.({ type: "listening", port: running.port })
