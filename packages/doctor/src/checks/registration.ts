import type { Stage } from "../Walk.js"

/** The registration checks. */
export const stage: Stage = { name: "registration", catalog: {}, run: async () => [] }
