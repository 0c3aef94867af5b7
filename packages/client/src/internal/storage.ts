// The keys under which the client keeps its state in the token store; files written by earlier versions use them too.

/** The tokens held for a server (its canonical URI). */
export const tokensKey = (server: string): string => `tokens:${server}`

/** A pending two-phase authorization, by its `state`. */
export const pendingKey = (state: string): string => `pending:${state}`

/** Whether a key is that of a pending authorization. */
export const isPendingKey = (key: string): boolean => key.startsWith("pending:")

/** The registration held for an authorization server, by its issuer. */
export const clientKey = (issuer: string): string => `client:${issuer}`

/** How long a two-phase authorization may stay pending: long enough for a login, short enough to limit replay. */
export const PENDING_LIFETIME_MS = 10 * 60_000
