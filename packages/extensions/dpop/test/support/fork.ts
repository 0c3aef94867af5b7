/**
 * MCP server processes for tests that need more than one behind one resource: each runs `test/support/instance.ts`
 * over the built package.
 */
import { type ChildProcess, fork } from "node:child_process"
import { fileURLToPath } from "node:url"
import type { InstanceOptions } from "./instance.js"

const INSTANCE = fileURLToPath(new URL("./instance.ts", import.meta.url))

export interface Instance {
  /** The resource's canonical URL on this instance: what the load balancer does. */
  readonly url: string
  readonly stop: () => Promise<void>
}

export const startInstance = (options: InstanceOptions): Promise<Instance> =>
  new Promise((resolve, reject) => {
    const child: ChildProcess = fork(INSTANCE, [JSON.stringify(options)], {
      execArgv: [],
      stdio: ["ignore", "inherit", "pipe", "ipc"],
    })
    let stderr = ""
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
    })
    const exited = new Promise<void>((done) => child.once("exit", () => done()))
    child.once("exit", (code) => reject(new Error(`instance exited with ${code} before listening: ${stderr}`)))
    child.once("message", (message: { readonly type: string; readonly port: number }) => {
      const resource = new URL(options.resource)
      resolve({
        url: `http://127.0.0.1:${message.port}${resource.pathname}`,
        stop: async () => {
          if (child.exitCode === null && child.signalCode === null) child.send({ type: "close" })
          await exited
        },
      })
    })
  })
