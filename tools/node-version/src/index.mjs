// The first module every app's entry point loads, on whatever Node.js runs it: it imports nothing and uses nothing
// newer than Node.js 18, so that an older Node gets a sentence instead of a stack trace from a dependency.

/** The oldest Node.js Keyway runs on; `engines.node` of the root package.json says the same. */
export const MINIMUM_NODE = "22.19.0"

const parts = (version) =>
  version
    .replace(/^v/, "")
    .split(".")
    .map((part) => Number.parseInt(part, 10) || 0)

/** Whether `version` (`22.19.0` or `v22.19.0`) is {@link MINIMUM_NODE} or later. */
export const isSupported = (version) => {
  const have = parts(version)
  const need = parts(MINIMUM_NODE)
  for (let i = 0; i < need.length; i++) {
    const a = have[i] ?? 0
    const b = need[i] ?? 0
    if (a !== b) return a > b
  }
  return true
}

/** The one line an entry point prints on an older Node: the Node it needs, and the command to run instead. */
export const unsupportedMessage = (program, entry, version) =>
  `${program}: needs Node.js ${MINIMUM_NODE} or later, this is Node.js ${version}; ` +
  `from the repository root, run it with the project's own Node: npm run exec -- node ${entry} [arguments]`

/**
 * Returns when this Node.js is recent enough; otherwise prints {@link unsupportedMessage} to stderr and exits with
 * code 1, before the caller imports anything that needs a newer Node.
 */
export const requireSupportedNode = (program, entry) => {
  const version = process.versions.node
  if (isSupported(version)) return
  process.stderr.write(`${unsupportedMessage(program, entry, version)}\n`)
  process.exit(1)
}
