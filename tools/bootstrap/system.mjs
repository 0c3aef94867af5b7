// The Debian packages the tests need, and the decision of what to do when some are missing. Plain JS on Node >= 18
// with no dependencies, like run.mjs; the decision is a pure function so that tools/testing can test it.
import { existsSync, readdirSync } from "node:fs"
import { delimiter, join } from "node:path"

/** How long apt-get waits for another apt or dpkg to release its locks before giving up. */
export const APT_LOCK_WAIT_SECONDS = 600

// The tests start throw-away clusters from Debian's binaries (tools/testing/src/postgres.ts), any version.
const postgresInstalled = () => {
  const root = "/usr/lib/postgresql"
  return existsSync(root) && readdirSync(root).some((version) => existsSync(join(root, version, "bin", "initdb")))
}

/** The packages, each with what needs it and a probe; the test helpers in tools/testing/src check the same paths. */
export const SYSTEM_PACKAGES = [
  {
    name: "chromium",
    why: "browser tests",
    probe: "/usr/bin/chromium",
    present: () => existsSync("/usr/bin/chromium"),
  },
  {
    name: "postgresql",
    why: "PostgreSQL storage tests",
    probe: "/usr/lib/postgresql/<version>/bin/initdb",
    present: postgresInstalled,
  },
]

/** The packages whose probe fails on this machine. */
export const missingSystemPackages = () => SYSTEM_PACKAGES.filter((pkg) => !pkg.present())

// A non-login PATH may lack /usr/sbin, but apt-get lives in /usr/bin on every Debian-like system.
export const hasAptGet = () =>
  (process.env.PATH ?? "").split(delimiter).some((dir) => dir !== "" && existsSync(join(dir, "apt-get")))

const listed = (missing) => missing.map((pkg) => `${pkg.name} (${pkg.why})`).join(", ")

/**
 * What to do about the missing packages: nothing; install them all in one apt-get run (root with apt-get); or stop
 * before any test with a message saying how to get them. Recommends stay out: with them `chromium` alone pulls ~130
 * packages (systemd, avahi, samba, printer tools) where the headless browser needs 25.
 */
export const planSystemPackages = ({ missing, root, apt }) => {
  if (missing.length === 0) return { action: "none" }
  const names = missing.map((pkg) => pkg.name)
  if (!apt) {
    const probes = missing.map((pkg) => pkg.probe).join(", ")
    return {
      action: "stop",
      message: `the tests need Debian packages that are missing: ${listed(missing)}, and this machine has no apt-get to install them. Run the tests on Debian or Ubuntu, or install the packages so that ${probes} exist${missing.length === 1 ? "s" : ""}.`,
    }
  }
  if (!root) {
    return {
      action: "stop",
      message: `the tests need Debian packages that are missing: ${listed(missing)}. Only a run as root installs them; install them once with\n  sudo apt-get install -y ${names.join(" ")}\nthen run the tests again.`,
    }
  }
  const lockWait = ["-o", `DPkg::Lock::Timeout=${APT_LOCK_WAIT_SECONDS}`]
  return {
    action: "install",
    notice: `installing Debian packages for the tests: ${listed(missing)} — once`,
    env: { DEBIAN_FRONTEND: "noninteractive" },
    commands: [
      ["apt-get", ...lockWait, "-qq", "update"],
      ["apt-get", ...lockWait, "-q", "install", "-y", "--no-install-recommends", ...names],
    ],
  }
}
