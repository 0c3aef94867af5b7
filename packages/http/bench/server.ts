/**
 * Bridge benchmark server process: one endpoint on node:http answering `{"ok":true}`, in one of the modes
 * "bare" (a plain node:http listener, no Web objects), "bridge" (this package's toNodeListener) or "previous" (the
 * `toNodeListener` exported by the module at argv[3], e.g. an older build, for a before/after comparison). POST bodies
 * are read in full by the handler. Prints {port} once listening; answers each stdin line with its CPU time so far.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http"
import type { AddressInfo } from "node:net"
import { createInterface } from "node:readline"
import { pathToFileURL } from "node:url"
import { toNodeListener } from "../dist/node.js"

const mode = process.argv[2] ?? "bridge"
const body = `{"ok":true}`

const web = async (request: Request): Promise<Response> => {
  if (request.body !== null) await request.text()
  return new Response(body, { headers: { "content-type": "application/json" } })
}

const bare = (req: IncomingMessage, res: ServerResponse): void => {
  const answer = () => {
    res.writeHead(200, { "content-type": "application/json", "content-length": String(body.length) })
    res.end(body)
  }
  if (req.method === "GET") answer()
  else {
    req.resume()
    req.on("end", answer)
  }
}

type Listener = (req: IncomingMessage, res: ServerResponse) => void
let listener: Listener
if (mode === "bare") listener = bare
else if (mode === "bridge") listener = toNodeListener(web)
else {
  const previous = (await import(pathToFileURL(process.argv[3]!).href)) as {
    toNodeListener: (handler: typeof web) => Listener
  }
  listener = previous.toNodeListener(web)
}

const server = createServer(listener)
await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
process.stdout.write(`${JSON.stringify({ port: (server.address() as AddressInfo).port })}\n`)
createInterface({ input: process.stdin }).on("line", () => {
  const { user, system } = process.cpuUsage()
  process.stdout.write(`${JSON.stringify({ cpu: user + system })}\n`)
})
