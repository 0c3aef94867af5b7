/**
 * Authorization-server processes for tests that need more than one, or one to crash: each runs
 * `test/support/instance.ts` over the built package (run `tsc -b tsconfig.json` first).
 */
import { fileURLToPath } from "node:url"
import { forkInstance } from "@keyway/testing"
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

export const startInstance = async (options: Record<string, unknown>, issuer: string): Promise<Instance> => {
  const instance = await forkInstance(INSTANCE, options)
  const url = String(instance.listening.url)
  return {
    url,
    at: (target) => target.replace(issuer, url),
    rotate: async () => (await instance.request({ type: "rotate" }, "rotated")).rotation as Rotation,
    stop: instance.stop,
    kill: instance.kill,
  }
}
