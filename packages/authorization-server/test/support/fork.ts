/**
 * Authorization-server processes for tests that need more than one, or one to crash: each runs
 * `test/support/instance.ts` over the built package (run `tsc -b tsconfig.json` first).
 */
import { type ChildProcess, fork } from "node:child_process"
import { fileURLToPath } from "node:url"
import type { Rotation } from "../../src/KeyRotation.js"

const INSTANCE = fileURLToPath(new URL("./instance.ts", import.meta.url))

export interface Instance {
  readonly url: string
  /** The same URL on this instance: what the load balancer does. */
  readonly at: (url: string) => string
  readonly rotate: () => Promise<Rotation>
  readonly stop: () => Promise<void>
  /** SIGKILL: the process dies wherever it is, as in a crash; resolves once it has exited. */
  readonly kill: () => Promise<void>
}

export const startInstance = (options: Record<string, unknown>, issuer: string): Promise<Instance> =>
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
    const next = (type: string) =>
      new Promise<Record<string, unknown>>((done, fail) => {
        const onMessage = (message: Record<string, unknown>) => {
          if (message.type === type) {
            child.off("message", onMessage)
            done(message)
          } else if (message.type === "error") {
            child.off("message", onMessage)
            fail(new Error(String(message.message)))
          }
        }
        child.on("message", onMessage)
      })
    next("listening").then((message) => {
      const url = String(message.url)
      resolve({
        url,
        at: (target) => target.replace(issuer, url),
        rotate: async () => {
          const answer = next("rotated")
          child.send({ type: "rotate" })
          return (await answer).rotation as Rotation
        },
        stop: async () => {
          if (child.exitCode === null && child.signalCode === null) child.send({ type: "close" })
          await exited
        },
        kill: async () => {
          child.kill("SIGKILL")
          await exited
        },
      })
    }, reject)
  })
