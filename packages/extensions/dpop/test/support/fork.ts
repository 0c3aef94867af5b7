/**
 * MCP server processes for tests that need more than one behind one resource: each runs `test/support/instance.ts`
 * over the built package.
 */
import { fileURLToPath } from "node:url"
import { forkInstance } from "@keyway/testing"
import type { InstanceOptions } from "./instance.js"

const INSTANCE = fileURLToPath(new URL("./instance.ts", import.meta.url))

export interface Instance {
  /** The resource's canonical URL on this instance: what the load balancer does. */
  readonly url: string
  readonly stop: () => Promise<void>
}

export const startInstance = async (options: InstanceOptions): Promise<Instance> => {
  const instance = await forkInstance(INSTANCE, options)
  return {
    url: `http://127.0.0.1:${Number(instance.listening.port)}${new URL(options.resource).pathname}`,
    stop: instance.stop,
  }
}
