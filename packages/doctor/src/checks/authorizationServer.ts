import type { Stage } from "../Walk.js"

/** The authorizationServer checks. */
export const stage: Stage = { name: "authorizationServer", catalog: {}, run: async () => [] }
