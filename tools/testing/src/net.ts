import type { Server as HttpServer } from "node:http"
import { type AddressInfo, createServer } from "node:net"

/**
 * A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0, read, released), for a server whose URL must be
 * known before it starts.
 *
 * @see {@link https://nodejs.org/api/net.html#serverlistenport-host-backlog-callback | Node.js `server.listen` with port 0}
 */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

/** Starts a node:http server on 127.0.0.1 port 0 and resolves with its origin (`http://127.0.0.1:<port>`). */
export const listening = async (server: HttpServer): Promise<string> => {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

/** Closes a node:http server with its open connections. */
export const closing = (server: HttpServer): Promise<void> =>
  new Promise<void>((resolve) => {
    server.closeAllConnections()
    server.close(() => resolve())
  })
