import { keywayVitest } from "../../../vitest.shared.ts"

export default keywayVitest()
