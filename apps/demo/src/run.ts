/**
 * What every demo run does around its script: the transcript, progress and redactor, the stack started for it (and
 * stopped on abort), the narrator, and the clean-up whatever happens.
 *
 * @module
 */
import type { DemoOptions, DemoResult } from "./flow.js"
import { Narrator } from "./narrator.js"
import { Redactor } from "./redact.js"
import { type Stack, type StackOptions, startStack } from "./stack.js"
import { Progress, Transcript } from "./transcript.js"

/** What a script gets. */
export interface Scripted {
  readonly stack: Stack
  readonly transcript: Transcript
  readonly progress: Progress
  readonly redactor: Redactor
  readonly narrator: Narrator
}

/**
 * Starts the stack with `stackOptions`, registers its clients' secrets with the redactor, runs `script`, and always
 * stops the stack, the progress display and reports the secrets seen (`onSecrets`).
 */
export const runScripted = async (
  options: DemoOptions,
  stackOptions: Pick<StackOptions, "machineClient" | "workloadIssuer" | "dpop" | "downstream" | "connected" | "device">,
  script: (scripted: Scripted) => Promise<DemoResult>,
): Promise<DemoResult> => {
  const progress = new Progress(options.err, options.progress ?? "off")
  const redactor = new Redactor()
  const transcript = new Transcript({ write: options.out, redactor, progress, color: options.color ?? false })
  let narrator: Narrator | undefined
  let stack: Stack | undefined
  const onAbort = () => {
    void stack?.close().catch(() => undefined)
  }
  options.signal?.addEventListener("abort", onAbort, { once: true })
  try {
    progress.update("starting the authorization server and the MCP server")
    stack = await startStack({
      ...stackOptions,
      ...(options.asPort === undefined ? {} : { asPort: options.asPort }),
      ...(options.mcpPort === undefined ? {} : { mcpPort: options.mcpPort }),
      log: (source, line) => narrator?.serverLog(source, line),
    })
    if (options.signal?.aborted === true) throw new Error("interrupted")
    for (const client of stack.clients) if (client.client_secret !== undefined) redactor.add(client.client_secret)
    narrator = new Narrator(transcript, redactor, { mcpUrl: stack.mcpUrl, issuer: stack.issuer })
    return await script({ stack, transcript, progress, redactor, narrator })
  } catch (error) {
    if (options.signal?.aborted === true) throw new Error("interrupted")
    throw error
  } finally {
    options.signal?.removeEventListener("abort", onAbort)
    await stack?.close().catch(() => undefined)
    progress.stop()
    options.onSecrets?.(redactor.secrets())
  }
}
