import { keywayVitest } from "../../vitest.shared.ts"

// Each test runs keyway-mcp as a child process, some several times: a cold start each.
export default keywayVitest({ test: { testTimeout: 60_000 } })
