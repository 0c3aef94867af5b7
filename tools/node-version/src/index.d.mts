/**
 * The Node.js version Keyway needs, and the check each app's entry point makes before it imports anything else.
 *
 * @module
 */

/** The oldest Node.js Keyway runs on (`engines.node` of the root package.json). */
export declare const MINIMUM_NODE: string

/** Whether `version` (`22.19.0` or `v22.19.0`) is {@link MINIMUM_NODE} or later. */
export declare const isSupported: (version: string) => boolean

/**
 * The one line an entry point prints on an older Node: which Node it needs and the command to run instead
 * (`npm run exec -- node <entry> [arguments]` from the repository root, which runs the project's own Node).
 */
export declare const unsupportedMessage: (program: string, entry: string, version: string) => string

/**
 * Returns when the running Node.js is {@link MINIMUM_NODE} or later; otherwise prints {@link unsupportedMessage} to
 * stderr and exits with code 1. `program` names the command, `entry` is its script relative to the repository root
 * (`apps/mcp-client/dist/main.js`).
 */
export declare const requireSupportedNode: (program: string, entry: string) => void
