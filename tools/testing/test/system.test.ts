import { describe, expect, it } from "vitest"
import { requireDebianPackage } from "../src/system.js"

describe("requireDebianPackage", () => {
  const sudo = process.getuid?.() === 0 ? "" : "sudo "

  it("passes when the probe finds the package", () => {
    expect(() => requireDebianPackage("node", process.execPath)).not.toThrow()
    expect(() => requireDebianPackage("anything", () => true)).not.toThrow()
  })

  it("throws at once, naming the package and the command that installs it, when the probe fails", () => {
    const message = `Debian package "chromium" is missing; install it with \`${sudo}apt-get install -y chromium\` (as root, \`npm test\` installs it before any test runs)`
    expect(() => requireDebianPackage("chromium", "/nonexistent/keyway/chromium")).toThrowError(new Error(message))
    expect(() => requireDebianPackage("chromium", () => false)).toThrowError(new Error(message))
  })
})
