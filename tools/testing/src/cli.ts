import { type ChildProcess, spawn } from "node:child_process"

/** A command-line program started by {@link spawnCli}, with everything it printed so far. */
export interface CliProcess {
  readonly process: ChildProcess
  /** Everything written to stdout so far. */
  readonly stdout: string
  /** Everything written to stderr so far. */
  readonly stderr: string
  /** The exit code once the process closed (`null` when a signal ended it). */
  readonly exit: Promise<number | null>
  /** Kills the process (SIGKILL) unless it already ended, and waits for it to close; safe to call more than once. */
  readonly kill: () => Promise<void>
}

/**
 * Runs `node <main> ...args` with the current Node executable (or `node`), stdin closed and stdout/stderr collected.
 * `env` is added to this process's environment.
 *
 * @see {@link https://nodejs.org/api/child_process.html#child_processspawncommand-args-options | Node.js `child_process.spawn`}
 */
export const spawnCli = (
  main: string,
  args: ReadonlyArray<string>,
  env: Readonly<Record<string, string>> = {},
  node: string = process.execPath,
): CliProcess => {
  const child = spawn(node, [main, ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, ...env },
  })
  const exit = new Promise<number | null>((resolve) => child.on("close", (code) => resolve(code)))
  const state: { -readonly [K in keyof CliProcess]: CliProcess[K] } = {
    process: child,
    stdout: "",
    stderr: "",
    exit,
    kill: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill("SIGKILL")
        await exit
      }
    },
  }
  child.stdout?.on("data", (chunk: Buffer) => {
    state.stdout += chunk.toString()
  })
  child.stderr?.on("data", (chunk: Buffer) => {
    state.stderr += chunk.toString()
  })
  return state
}

/**
 * Resolves with the first match of `pattern` in the process's stderr (where Keyway's servers log, e.g. their
 * "listening on" line); rejects if the process exits before.
 *
 * @see {@link https://nodejs.org/api/child_process.html#subprocessstderr | Node.js `subprocess.stderr`}
 */
export const waitForStderr = (child: CliProcess, pattern: RegExp): Promise<RegExpExecArray> =>
  new Promise((resolve, reject) => {
    const check = () => {
      const match = pattern.exec(child.stderr)
      if (match !== null) {
        child.process.stderr?.off("data", check)
        resolve(match)
      }
    }
    child.process.stderr?.on("data", check)
    child.exit.then((code) => reject(new Error(`exited with ${code} before ${pattern}: ${child.stderr}`)))
    check()
  })
