import { execFileSync, spawnSync } from "node:child_process"
import { existsSync } from "node:fs"

let aptUpdated = false

/**
 * Makes sure a Debian package is installed, installing it with apt-get when `probe` (a path it provides) is absent.
 * Test setups call this so that a fresh machine with only Node and npm can run the suite.
 */
export const ensureDebianPackage = (name: string, probe: string | (() => boolean)): void => {
  const present = typeof probe === "string" ? () => existsSync(probe) : probe
  if (present()) return
  if (process.getuid?.() !== 0) {
    throw new Error(`Debian package "${name}" is missing; install it with: sudo apt-get install -y ${name}`)
  }
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" }
  if (!aptUpdated) {
    execFileSync("apt-get", ["update", "-qq"], { stdio: "inherit", env })
    aptUpdated = true
  }
  const result = spawnSync("apt-get", ["install", "-y", "-qq", name], { stdio: "inherit", env })
  if (result.status !== 0 || !present()) throw new Error(`apt-get install ${name} failed (exit ${result.status})`)
}
