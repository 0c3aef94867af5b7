/**
 * One authorization-server process for test/ScaleOut.test.ts. Node runs it directly (type stripping) over the built
 * package, so run `tsc -b tsconfig.json` first:
 *
 *     node test/support/instance.ts '<AuthorizationServerOptions as JSON>'
 *
 * It listens on 127.0.0.1 port 0 and, over the IPC channel of `child_process.fork`, reports
 * `{ type: "listening", url }`, answers `{ type: "rotate" }` with `{ type: "rotated", rotation }` and stops on
 * `{ type: "close" }` or when the parent goes away.
 */
import type { AuthorizationServerOptions } from "../../dist/AuthorizationServer.js"
import { createAuthorizationServer } from "../../dist/index.js"

const options = JSON.parse(process.argv[2] ?? "{}") as AuthorizationServerOptions
const server = createAuthorizationServer({ ...options, warn: () => undefined })
const running = await server.listen()

let closing: Promise<void> | undefined
const close = () => {
  closing ??= running
    .close()
    .then(() => server.close())
    .finally(() => process.exit(0))
  return closing
}

process.on("message", (message: { readonly type: string }) => {
  if (message.type === "rotate") {
    server.rotateSigningKey().then(
      (rotation) => process.send?.({ type: "rotated", rotation }),
      (error: unknown) => process.send?.({ type: "error", message: String(error) }),
    )
  } else if (message.type === "close") {
    void close()
  }
})
process.on("disconnect", () => void close())
process.send?.({ type: "listening", url: running.url })
