import { keywayVitest } from "../../vitest.shared.ts"

// Packing and npm installs take minutes on a cold cache; the files run one after another to share two cores.
export default keywayVitest({ test: { testTimeout: 300_000, hookTimeout: 400_000, fileParallelism: false } })
