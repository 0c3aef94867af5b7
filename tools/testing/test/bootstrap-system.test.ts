import { describe, expect, it } from "vitest"
import { planSystemPackages, SYSTEM_PACKAGES, type SystemPackage } from "../../bootstrap/system.mjs"

const packages = (...names: ReadonlyArray<string>): SystemPackage[] =>
  names.map((name) => {
    const pkg = SYSTEM_PACKAGES.find((candidate) => candidate.name === name)
    if (pkg === undefined) throw new Error(`no system package ${name}`)
    return pkg
  })

describe("planSystemPackages (tools/bootstrap)", () => {
  it("does nothing when every package is present", () => {
    expect(planSystemPackages({ missing: [], root: true, apt: true })).toEqual({ action: "none" })
    expect(planSystemPackages({ missing: [], root: false, apt: false })).toEqual({ action: "none" })
  })

  it("installs a missing chromium as root in one serialized apt-get step", () => {
    expect(planSystemPackages({ missing: packages("chromium"), root: true, apt: true })).toEqual({
      action: "install",
      notice: "installing Debian packages for the tests: chromium (browser tests) — once",
      env: { DEBIAN_FRONTEND: "noninteractive" },
      commands: [
        ["apt-get", "-o", "DPkg::Lock::Timeout=600", "-qq", "update"],
        ["apt-get", "-o", "DPkg::Lock::Timeout=600", "-q", "install", "-y", "--no-install-recommends", "chromium"],
      ],
    })
  })

  it("installs both in one apt-get install", () => {
    const plan = planSystemPackages({ missing: packages("chromium", "postgresql"), root: true, apt: true })
    expect(plan).toMatchObject({
      notice:
        "installing Debian packages for the tests: chromium (browser tests), postgresql (PostgreSQL storage tests) — once",
    })
    expect(plan.action === "install" && plan.commands.at(-1)?.slice(-2)).toEqual(["chromium", "postgresql"])
  })

  it("stops a non-root run before any test with the command to run", () => {
    expect(planSystemPackages({ missing: packages("chromium", "postgresql"), root: false, apt: true })).toEqual({
      action: "stop",
      message:
        "the tests need Debian packages that are missing: chromium (browser tests), postgresql (PostgreSQL storage tests). Only a run as root installs them; install them once with\n  sudo apt-get install -y chromium postgresql\nthen run the tests again.",
    })
  })

  it("stops when the machine has no apt-get, root or not", () => {
    const stop = {
      action: "stop",
      message:
        "the tests need Debian packages that are missing: postgresql (PostgreSQL storage tests), and this machine has no apt-get to install them. Run the tests on Debian or Ubuntu, or install the packages so that /usr/lib/postgresql/<version>/bin/initdb exists.",
    }
    expect(planSystemPackages({ missing: packages("postgresql"), root: true, apt: false })).toEqual(stop)
    expect(planSystemPackages({ missing: packages("postgresql"), root: false, apt: false })).toEqual(stop)
  })
})
