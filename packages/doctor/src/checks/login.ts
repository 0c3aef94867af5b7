import type { Stage } from "../Walk.js"

/** The login checks. */
export const stage: Stage = { name: "login", catalog: {}, run: async () => [] }
