import { existsSync } from "node:fs"

/**
 * Throws at once when a Debian package the tests need is missing (`probe` is a path it provides, or a check).
 * Tests never run apt-get: `npm test` installs the packages in one step before any test starts (tools/bootstrap).
 */
export const requireDebianPackage = (name: string, probe: string | (() => boolean)): void => {
  const present = typeof probe === "string" ? () => existsSync(probe) : probe
  if (present()) return
  const sudo = process.getuid?.() === 0 ? "" : "sudo "
  throw new Error(
    `Debian package "${name}" is missing; install it with \`${sudo}apt-get install -y ${name}\` (as root, \`npm test\` installs it before any test runs)`,
  )
}
