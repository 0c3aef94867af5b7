/**
 * The `node:crypto` module where the runtime has one (Node.js 22+, Bun, Deno), found through
 * `process.getBuiltinModule` so that nothing is imported and a bundle for the browser or a worker carries no `node:*`
 * specifier; undefined elsewhere, and the callers use plain JavaScript or Web Crypto instead.
 */
import type * as NodeCrypto from "node:crypto"

export type { NodeCrypto }

export const nodeCrypto: typeof NodeCrypto | undefined = (() => {
  try {
    const process = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process
    return process?.getBuiltinModule?.("node:crypto") as typeof NodeCrypto | undefined
  } catch {
    return undefined
  }
})()
