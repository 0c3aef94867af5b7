import { createServer } from "node:net"

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
