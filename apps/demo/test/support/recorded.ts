import type { DemoOptions, DemoResult } from "../../src/flow.js"

/** A demo run's transcript, stderr and every credential it saw, with its result. */
export interface Recorded {
  readonly out: string
  readonly err: string
  readonly secrets: ReadonlyArray<string>
  readonly result: DemoResult
}

/** Runs a demo with its transcript and stderr captured (plain progress lines on stderr). */
export const recorded = async (run: (options: DemoOptions) => Promise<DemoResult>): Promise<Recorded> => {
  let out = ""
  let err = ""
  let secrets: ReadonlyArray<string> = []
  const result = await run({
    out: (text) => {
      out += text
    },
    err: (text) => {
      err += text
    },
    progress: "lines",
    onSecrets: (seen) => {
      secrets = seen
    },
  })
  return { out, err, secrets, result }
}
