/**
 * The consumer side of the consumer test: fresh npm projects, servers started from example files, free ports, and
 * the stand-in browser that the system-browser user agent opens.
 *
 * @module
 */
import { type ChildProcess, spawn } from "node:child_process"
import { mkdirSync, writeFileSync } from "node:fs"
import { createServer } from "node:net"
import { join } from "node:path"
import { ok, type Ran, run } from "./pack.js"
import { ROOT } from "./workspace.js"

/** npm's flags for every install: quiet, no audit, and a cache that later runs reuse offline. */
export const npmFlags = (cache: string): ReadonlyArray<string> => [
  "--prefer-offline",
  "--no-audit",
  "--no-fund",
  "--loglevel=error",
  `--cache=${cache}`,
]

/** A new project as a user makes one: `npm init -y`, then `npm pkg set type=module` as the READMEs ask. */
export const newProject = async (dir: string): Promise<void> => {
  mkdirSync(dir, { recursive: true })
  ok("npm init -y", await run("npm", ["init", "-y"], { cwd: dir }))
  ok("npm pkg set type=module", await run("npm", ["pkg", "set", "type=module"], { cwd: dir }))
}

/** `npm install` of tarballs and registry packages into a project. */
export const npmInstall = async (dir: string, specs: ReadonlyArray<string>, cache: string, dev = false): Promise<Ran> =>
  ok(
    `npm install ${specs.join(" ")}`,
    await run("npm", ["install", ...(dev ? ["--save-dev"] : []), ...npmFlags(cache), ...specs], {
      cwd: dir,
      timeoutMs: 300_000,
    }),
  )

/** The tsconfig of the consumer projects, as the READMEs describe it: nodenext, DOM types, strict, declarations checked. */
export const CONSUMER_TSCONFIG = {
  compilerOptions: {
    target: "ES2023",
    lib: ["ES2023", "DOM", "DOM.Iterable"],
    module: "nodenext",
    moduleResolution: "nodenext",
    types: ["node"],
    strict: true,
    noEmit: true,
    skipLibCheck: false,
    verbatimModuleSyntax: true,
    erasableSyntaxOnly: true,
  },
  include: ["*.ts"],
}

/** Compiles a project's .ts files with the workspace's TypeScript (the consumer's own node_modules for types). */
export const typecheck = async (dir: string): Promise<Ran> => {
  writeFileSync(join(dir, "tsconfig.json"), `${JSON.stringify(CONSUMER_TSCONFIG, null, 2)}\n`)
  return run(process.execPath, [join(ROOT, "node_modules", "typescript", "bin", "tsc"), "-p", dir], { cwd: dir })
}

/**
 * The environment the examples run in: the test's, without what asks Node for colours (Nx sets FORCE_COLOR, and
 * `console.log` would then colour the numbers the test reads), plus `extra`.
 */
export const exampleEnv = (extra: Readonly<Record<string, string>> = {}): NodeJS.ProcessEnv => {
  const { FORCE_COLOR: _, ...env } = process.env
  return { ...env, NO_COLOR: "1", ...extra }
}

/** A free loopback port (listened on and released; the servers then bind it). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      const port = typeof address === "object" && address !== null ? address.port : 0
      server.close(() => resolve(port))
    })
  })

/** A server started from an example file, once it printed its first line. */
export interface Started {
  readonly line: string
  readonly output: () => string
  readonly stop: () => Promise<void>
}

/** Starts `node <file>` in a project and waits for its first line on stdout. */
export const start = (dir: string, file: string, env: Readonly<Record<string, string>>): Promise<Started> =>
  new Promise((resolve, reject) => {
    const child: ChildProcess = spawn(process.execPath, [file], {
      cwd: dir,
      env: exampleEnv(env),
      stdio: ["ignore", "pipe", "pipe"],
    })
    let stdout = ""
    let stderr = ""
    const output = () => `${stdout}${stderr}`
    const stop = () =>
      new Promise<void>((done) => {
        if (child.exitCode !== null || child.signalCode !== null) return done()
        child.once("exit", () => done())
        child.kill("SIGTERM")
      })
    const timer = setTimeout(() => {
      void stop()
      reject(new Error(`${file} printed nothing within 30 s:\n${output()}`))
    }, 30_000)
    child.stdout?.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8")
      const newline = stdout.indexOf("\n")
      if (newline >= 0) {
        clearTimeout(timer)
        resolve({ line: stdout.slice(0, newline), output, stop })
      }
    })
    child.stderr?.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
    })
    child.on("exit", (code) => {
      clearTimeout(timer)
      reject(new Error(`${file} exited with ${code} before printing a line:\n${output()}`))
    })
  })
