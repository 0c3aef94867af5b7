/**
 * The `node:crypto` module and node:buffer's `Buffer` where the runtime has one (Node.js 22+, Bun, Deno), found through
 * `process.getBuiltinModule` so that nothing is imported and a bundle for the browser or a worker carries no `node:*`
 * specifier; undefined elsewhere, and the callers use plain JavaScript or Web Crypto instead.
 */
import type * as NodeBuffer from "node:buffer"
import type * as NodeCrypto from "node:crypto"

export type { NodeCrypto }

const builtin = <A>(id: string): A | undefined => {
  try {
    const process = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process
    return process?.getBuiltinModule?.(id) as A | undefined
  } catch {
    return undefined
  }
}

export const nodeCrypto: typeof NodeCrypto | undefined = builtin<typeof NodeCrypto>("node:crypto")

export const nodeBuffer: typeof NodeBuffer.Buffer | undefined = builtin<typeof NodeBuffer>("node:buffer")?.Buffer
