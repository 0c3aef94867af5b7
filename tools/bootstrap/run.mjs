#!/usr/bin/env node
// Entry point of every root script. Runs on any Node >= 18: when the running Node is older than the
// project needs, it installs the pinned Node from the npm registry into .toolchain/ and re-runs itself
// with it; then it provides the pinned pnpm, installs the workspace and runs the requested task.
import { spawn, spawnSync } from "node:child_process"
import { createHash } from "node:crypto"
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { constants as osConstants } from "node:os"
import { delimiter, dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"
import { isSupported, MINIMUM_NODE } from "../node-version/src/index.mjs"
import { summarizeTree, summaryText } from "./summary.mjs"
import { APT_LOCK_WAIT_SECONDS, hasAptGet, missingSystemPackages, planSystemPackages } from "./system.mjs"

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..")
const toolchain = join(root, ".toolchain")
const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8"))

const log = (message) => process.stderr.write(`[keyway] ${message}\n`)

const fail = (message) => {
  log(message)
  process.exit(1)
}

// `demo --serve` promises one JSON line on stdout, so for the demo every preparation step writes to stderr.
const setupStdio = process.argv[2] === "demo" ? ["inherit", 2, 2] : "inherit"

const run = (command, args, options = {}) => {
  const result = spawnSync(command, args, { stdio: setupStdio, cwd: root, ...options })
  if (result.error) fail(`could not start ${command}: ${result.error.message}`)
  return result.status ?? 1
}

/**
 * Runs a long-lived child and relays SIGINT, SIGTERM and SIGHUP to it (each at most once, since a terminal's Ctrl-C
 * may reach it directly as well), then exits with the child's status. A `kill` of the npm process thus reaches the
 * program at the end of the chain instead of orphaning it.
 */
const runRelayingSignals = (command, args, options = {}) => {
  const child = spawn(command, args, { stdio: "inherit", cwd: root, ...options })
  const relayed = new Set()
  const relay = (signal) => {
    if (relayed.has(signal)) return
    relayed.add(signal)
    child.kill(signal)
  }
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) process.on(signal, () => relay(signal))
  // npm's `sh -c` dies with npm without passing a signal on; a new parent means whoever started us is gone.
  const parent = process.ppid
  setInterval(() => process.ppid !== parent && relay("SIGTERM"), 250).unref()
  child.on("error", (error) => fail(`could not start ${command}: ${error.message}`))
  child.on("exit", (code, signal) => process.exit(code ?? (signal === null ? 1 : 128 + osConstants.signals[signal])))
}

/** Installs one npm package into its own folder under .toolchain/ unless it is already there. */
const ensureToolPackage = (folder, spec, probe) => {
  const prefix = join(toolchain, folder)
  const target = join(prefix, "node_modules", probe)
  if (existsSync(target)) return target
  log(`installing ${spec} into .toolchain/${folder} (once)`)
  mkdirSync(prefix, { recursive: true })
  writeFileSync(join(prefix, "package.json"), '{"private":true}\n')
  const npm = process.platform === "win32" ? "npm.cmd" : "npm"
  const status = run(npm, ["install", "--no-save", "--no-audit", "--no-fund", "--prefix", prefix, spec], {
    cwd: prefix,
  })
  if (status !== 0 || !existsSync(target)) fail(`installing ${spec} failed`)
  return target
}

/** True when this Node can run the task; otherwise the task is re-run under the pinned Node and this returns false. */
const ensureNode = () => {
  if (isSupported(process.version)) return true
  if (process.env.KEYWAY_BOOTSTRAPPED) fail(`re-run still on Node ${process.version}`)
  const version = manifest.keyway.node
  const pkg = `node-${process.platform}-${process.arch}`
  const installed = ensureToolPackage(`node-${version}`, `${pkg}@${version}`, join(pkg, "bin", "node"))
  log(`Node ${process.version} is older than ${MINIMUM_NODE}; using Node ${version} from .toolchain/`)
  const env = { ...process.env, KEYWAY_BOOTSTRAPPED: "1", PATH: `${dirname(installed)}${delimiter}${process.env.PATH}` }
  runRelayingSignals(installed, process.argv.slice(1), { env })
  return false
}

/** Puts the pinned pnpm, and a `pnpm` command for child processes, into .toolchain/bin. */
const ensurePnpm = () => {
  const spec = manifest.packageManager
  const version = spec.split("@")[1]
  const cli = ensureToolPackage(`pnpm-${version}`, spec, join("pnpm", "bin", "pnpm.cjs"))
  const bin = join(toolchain, "bin")
  mkdirSync(bin, { recursive: true })
  const shim = join(bin, "pnpm")
  const body = `#!/bin/sh\nexec "${process.execPath}" "${cli}" "$@"\n`
  if (!existsSync(shim) || readFileSync(shim, "utf8") !== body) {
    writeFileSync(shim, body)
    chmodSync(shim, 0o755)
  }
  process.env.PATH = [bin, dirname(process.execPath), join(root, "node_modules", ".bin"), process.env.PATH].join(
    delimiter,
  )
  return cli
}

/**
 * Runs one apt-get command with its output on stderr (stdout carries the test summary). DPkg::Lock::Timeout makes
 * `install` wait for the dpkg locks, but apt 2.6 fails at once on the lock of `update` (/var/lib/apt/lists/lock) and
 * of the download cache, so a failure that names a lock is retried until the same deadline.
 */
const runApt = ([command, ...args], env) => {
  const deadline = Date.now() + APT_LOCK_WAIT_SECONDS * 1000
  for (;;) {
    const result = spawnSync(command, args, {
      cwd: root,
      env: { ...process.env, ...env },
      stdio: ["ignore", 2, "pipe"],
      encoding: "utf8",
    })
    if (result.error) fail(`could not start ${command}: ${result.error.message}`)
    process.stderr.write(result.stderr)
    const locked = result.status !== 0 && /Could not get lock|\/lock\b/.test(result.stderr)
    if (!locked || Date.now() > deadline) return result.status ?? 1
    log(`another apt-get or dpkg holds a lock; waiting to run ${command} ${args.join(" ")}`)
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 3000)
  }
}

/**
 * Installs the Debian packages the tests need, all in one serialized apt-get step before Nx starts, so that no test
 * runs apt-get (parallel test files used to race for the dpkg lock); stops before any test when that is impossible.
 */
const ensureSystemPackages = () => {
  const plan = planSystemPackages({
    missing: missingSystemPackages(),
    root: process.getuid?.() === 0,
    apt: hasAptGet(),
  })
  if (plan.action === "none") return
  if (plan.action === "stop") fail(plan.message)
  log(plan.notice)
  for (const command of plan.commands) {
    const status = runApt(command, plan.env)
    if (status !== 0) fail(`${command.join(" ")} failed (exit ${status})`)
  }
  const still = missingSystemPackages()
  if (still.length > 0)
    fail(`apt-get finished but these are still missing: ${still.map((pkg) => pkg.probe).join(", ")}`)
}

const workspaceFingerprint = () => {
  const hash = createHash("sha256")
  hash.update(process.version)
  for (const file of ["pnpm-lock.yaml", "package.json", "pnpm-workspace.yaml"]) {
    if (existsSync(join(root, file))) hash.update(readFileSync(join(root, file)))
  }
  return hash.digest("hex")
}

const ensureInstall = (pnpm) => {
  const stamp = join(toolchain, "install.stamp")
  const fingerprint = workspaceFingerprint()
  if (existsSync(join(root, "node_modules")) && existsSync(stamp) && readFileSync(stamp, "utf8") === fingerprint) return
  log("installing the workspace (pnpm install --frozen-lockfile)")
  if (pnpm(["install", "--frozen-lockfile"]) !== 0) fail("pnpm install failed")
  writeFileSync(stamp, fingerprint)
}

const main = () => {
  if (!ensureNode()) return
  const cli = ensurePnpm()
  const pnpm = (args) => run(process.execPath, [cli, ...args])
  const [task = "test", ...rest] = process.argv.slice(2)
  process.env.NX_DAEMON ??= "false"
  process.env.NX_NO_CLOUD = "true"
  process.env.NX_TUI = "false"
  // CI and KEYWAY_NO_CACHE=1 run every target for real; locally, Nx replays unchanged targets from .nx/cache.
  if (process.env.CI || process.env.KEYWAY_NO_CACHE) process.env.NX_SKIP_NX_CACHE = "true"

  if (task === "pnpm") process.exit(pnpm(rest))
  // Only the tests (and conformance, which drives Chromium) need the system packages; demo, build and docs must not.
  if (task === "test" || task === "conformance") ensureSystemPackages()
  ensureInstall(pnpm)
  const exec = (args) => pnpm(["exec", ...args])

  switch (task) {
    case "exec":
      process.exit(exec(rest))
      break
    case "build":
      process.exit(exec(["nx", "run-many", "-t", "build", "--outputStyle=static", ...rest]))
      break
    case "conformance":
      process.exit(
        exec(["nx", "run-many", "-t", "build", "--outputStyle=static"]) ||
          run(process.execPath, ["tools/conformance/dist/run.js", ...rest]),
      )
      break
    case "demo":
      if (exec(["nx", "run", "@keyway/app-demo:build", "--outputStyle=static"]) !== 0) fail("building the demo failed")
      // Its own process group: a terminal Ctrl-C reaches the demo once, through the relay, not twice.
      runRelayingSignals(process.execPath, ["apps/demo/dist/main.js", ...rest], { detached: true })
      break
    case "pack":
      // Everything is built first (Nx replays what did not change), so that each tarball holds the current build.
      process.exit(
        exec(["nx", "run-many", "-t", "build", "--outputStyle=static"]) ||
          run(process.execPath, ["tools/packaging/dist/cli.js", ...rest]),
      )
      break
    case "check":
      process.exit(exec(["biome", "check", ...rest]))
      break
    case "docs":
      process.exit(exec(["nx", "run-many", "-t", "build", "--outputStyle=static"]) || exec(["typedoc"]))
      break
    case "test": {
      const failures = []
      const step = (name, args) => {
        log(`step: ${name}`)
        if (exec(args) !== 0) failures.push(name)
      }
      step("format and lint (biome ci)", ["biome", "ci", "."])
      step("lint, typecheck, build, test (nx)", [
        "nx",
        "run-many",
        "-t",
        "lint",
        "typecheck",
        "build",
        "test",
        "--outputStyle=static",
        "--nxBail=false",
        ...rest,
      ])
      step("API docs (typedoc)", ["typedoc"])
      const summary = summarizeTree(root, failures)
      process.stdout.write(summaryText(summary))
      process.exit(summary.failed === 0 && failures.length === 0 ? 0 : 1)
      break
    }
    default:
      fail(`unknown task "${task}" (test, build, check, docs, conformance, demo, pack, exec, pnpm)`)
  }
}

main()
