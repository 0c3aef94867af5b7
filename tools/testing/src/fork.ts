import { type ChildProcess, fork } from "node:child_process"

/** A message over the IPC channel of a forked instance: a `type`, and whatever else the instance sends with it. */
export type InstanceMessage = Readonly<Record<string, unknown>> & { readonly type: string }

/** A server process started by {@link forkInstance}, once it has reported `{ type: "listening", ... }`. */
export interface ForkedInstance {
  readonly process: ChildProcess
  /** The `listening` message (where it listens: a `url`, a `port`, as the instance says). */
  readonly listening: InstanceMessage
  /**
   * Sends `message` and resolves with the next message of type `answer`; rejects on a `{ type: "error", message }`
   * the instance sends instead.
   */
  readonly request: (message: InstanceMessage, answer: string) => Promise<InstanceMessage>
  /** Sends `{ type: "close" }` unless the process has ended, and resolves once it has exited. */
  readonly stop: () => Promise<void>
  /** SIGKILL: the process dies wherever it is, as in a crash; resolves once it has exited. */
  readonly kill: () => Promise<void>
}

/**
 * Forks `script` (a TypeScript file Node runs directly) with `options` as JSON in its first argument, for tests that
 * need more than one server process, or one to crash. The instance reports `{ type: "listening", ... }` over the IPC
 * channel when it is ready and stops on `{ type: "close" }`; its stderr is kept for the error when it exits before.
 *
 * @see {@link https://nodejs.org/api/child_process.html#child_processforkmodulepath-args-options | Node.js `child_process.fork`}
 */
export const forkInstance = (script: string, options: unknown): Promise<ForkedInstance> =>
  new Promise((resolve, reject) => {
    const child = fork(script, [JSON.stringify(options)], {
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
      new Promise<InstanceMessage>((done, fail) => {
        const onMessage = (message: InstanceMessage) => {
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
    next("listening").then((listening) => {
      resolve({
        process: child,
        listening,
        request: (message, answer) => {
          const answered = next(answer)
          child.send(message)
          return answered
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
