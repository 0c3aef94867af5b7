import { execFileSync, spawnSync } from "node:child_process"
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { freePort } from "./net.js"
import { requireDebianPackage } from "./system.js"

/** A PostgreSQL server started for a test run, listening on 127.0.0.1 only. */
export interface PostgresServer {
  readonly host: string
  readonly port: number
  readonly user: string
  readonly database: string
  /** `postgres://user@127.0.0.1:port/database` */
  readonly url: string
  /** Creates another database on the same server and returns its URL. */
  readonly createDatabase: (name: string) => string
  readonly stop: () => void
}

const binDir = (): string | undefined => {
  const root = "/usr/lib/postgresql"
  if (!existsSync(root)) return undefined
  const versions = readdirSync(root)
    .filter((v) => existsSync(join(root, v, "bin", "initdb")))
    .sort((a, b) => Number(b) - Number(a))
  return versions[0] === undefined ? undefined : join(root, versions[0], "bin")
}

/**
 * Starts a throw-away PostgreSQL cluster from the machine's binaries in a temp directory; throws at once when the
 * `postgresql` package is missing (`npm test` installs it before the tests).
 * PostgreSQL refuses to run as root, so as root the cluster belongs to the `postgres` system user.
 */
export const startPostgres = async (): Promise<PostgresServer> => {
  requireDebianPackage("postgresql", () => binDir() !== undefined)
  const bin = binDir()!
  const asRoot = process.getuid?.() === 0
  const dir = mkdtempSync(join(tmpdir(), "keyway-pg-"))
  chmodSync(dir, 0o777)
  const data = join(dir, "data")
  // runuser lives in /usr/sbin, which a non-login PATH may lack.
  const runuser =
    ["/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"].find((path) => existsSync(path)) ?? "runuser"
  const run = (tool: string, args: ReadonlyArray<string>) => {
    const command = asRoot ? runuser : join(bin, tool)
    const argv = asRoot ? ["-u", "postgres", "--", join(bin, tool), ...args] : [...args]
    const result = spawnSync(command, argv, { encoding: "utf8", cwd: dir })
    if (result.error !== undefined) throw new Error(`${tool} could not start (${command}): ${result.error.message}`)
    if (result.status !== 0)
      throw new Error(`${tool} failed (exit ${result.status}): ${result.stderr || result.stdout}`)
    return result.stdout
  }
  const user = asRoot ? "postgres" : (process.env.USER ?? "postgres")
  run("initdb", ["-D", data, "-U", user, "-A", "trust", "--no-sync", "-E", "UTF8"])
  const port = await freePort()
  run("pg_ctl", [
    "-D",
    data,
    "-l",
    join(dir, "server.log"),
    "-w",
    "-o",
    `-p ${port} -k ${dir} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200`,
    "start",
  ])
  const url = (database: string) => `postgres://${user}@127.0.0.1:${port}/${database}`
  let stopped = false
  const stop = () => {
    if (stopped) return
    stopped = true
    try {
      run("pg_ctl", ["-D", data, "-m", "immediate", "-w", "stop"])
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }
  const psql = join(bin, "psql")
  return {
    host: "127.0.0.1",
    port,
    user,
    database: "postgres",
    url: url("postgres"),
    createDatabase: (name) => {
      if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`database name must match [a-z_][a-z0-9_]*: ${name}`)
      execFileSync(
        psql,
        ["-h", "127.0.0.1", "-p", String(port), "-U", user, "-d", "postgres", "-c", `CREATE DATABASE ${name}`],
        {
          stdio: "pipe",
        },
      )
      return url(name)
    },
    stop,
  }
}
