import { memoryStore } from "../src/vault/memory.js"
import { makeVault } from "../src/vault/service.js"
import { vaultContract } from "./vaultContract.js"

vaultContract({
  name: "memory",
  fresh: async () => {
    const store = memoryStore()
    return {
      store,
      open: async (keyRing, options) => makeVault(store, keyRing, options),
      close: async () => {},
    }
  },
})
