import type { Stage } from "../Walk.js"

/** The resource checks. */
export const stage: Stage = { name: "resource", catalog: {}, run: async () => [] }
