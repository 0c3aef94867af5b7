/**
 * Packing and installing as users do: `pnpm pack` of each published package (which turns `workspace:*` into
 * versions), then `npm install` of the tarballs into fresh projects.
 *
 * @module
 */
import { spawn } from "node:child_process"
import { existsSync, readdirSync, statSync } from "node:fs"
import { join } from "node:path"
import { type Project, publishable, ROOT } from "./workspace.js"

/** A command's outcome. */
export interface Ran {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

/** Runs a command to its end, collecting its output (never through a shell). */
export const run = (
  command: string,
  args: ReadonlyArray<string>,
  options: { readonly cwd: string; readonly env?: NodeJS.ProcessEnv; readonly timeoutMs?: number },
): Promise<Ran> =>
  new Promise((resolve, reject) => {
    const child = spawn(command, [...args], {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ["ignore", "pipe", "pipe"],
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => {
      stdout += chunk.toString("utf8")
    })
    child.stderr.on("data", (chunk: Buffer) => {
      stderr += chunk.toString("utf8")
    })
    const timer = setTimeout(() => child.kill("SIGTERM"), options.timeoutMs ?? 180_000)
    child.on("error", (error) => {
      clearTimeout(timer)
      reject(error)
    })
    child.on("close", (code, signal) => {
      clearTimeout(timer)
      resolve({ code: code ?? (signal === null ? 1 : 128), stdout, stderr })
    })
  })

/** Fails with the command's output when it did not exit 0. */
export const ok = (what: string, ran: Ran): Ran => {
  if (ran.code !== 0) throw new Error(`${what} exited ${ran.code}\n${ran.stdout}\n${ran.stderr}`)
  return ran
}

/** The pinned pnpm the bootstrap put into .toolchain/bin, else the one on PATH. */
const pnpm = (): string => {
  const shim = join(ROOT, ".toolchain", "bin", "pnpm")
  return existsSync(shim) ? shim : "pnpm"
}

/** One packed package. */
export interface Packed {
  readonly name: string
  readonly version: string
  readonly dir: string
  readonly tarball: string
  /** The tarball's size in bytes. */
  readonly bytes: number
  /** The paths inside the tarball, without the leading `package/`. */
  readonly files: ReadonlyArray<string>
}

/** The file name `pnpm pack` gives a package's tarball. */
export const tarballName = (name: string, version: string): string =>
  `${name.replace(/^@/u, "").replace("/", "-")}-${version}.tgz`

/** Packs one package into `destination`. */
export const pack = async (project: Project, destination: string): Promise<Packed> => {
  const dir = join(ROOT, project.dir)
  ok(`pnpm pack in ${project.dir}`, await run(pnpm(), ["pack", "--pack-destination", destination], { cwd: dir }))
  const tarball = join(destination, tarballName(project.manifest.name, project.manifest.version))
  const listing = ok(`tar -tzf ${tarball}`, await run("tar", ["-tzf", tarball], { cwd: destination }))
  const files = listing.stdout
    .split("\n")
    .filter((line) => line !== "")
    .map((line) => line.replace(/^package\//u, ""))
  return {
    name: project.manifest.name,
    version: project.manifest.version,
    dir: project.dir,
    tarball,
    bytes: statSync(tarball).size,
    files,
  }
}

/** Packs every published package, one after another (pnpm pack is quick; two cores are shared). */
export const packAll = async (destination: string): Promise<ReadonlyArray<Packed>> => {
  const packed: Array<Packed> = []
  for (const project of publishable()) packed.push(await pack(project, destination))
  return packed
}

/** Bytes on disk under a folder (file sizes, as `du --apparent-size` counts them). */
export const sizeOf = (path: string): number => {
  const stat = statSync(path, { throwIfNoEntry: false })
  if (stat === undefined) return 0
  if (!stat.isDirectory()) return stat.size
  return readdirSync(path).reduce((total, entry) => total + sizeOf(join(path, entry)), 0)
}

/** The packages installed in a node_modules folder, nested ones included, as sorted `name` strings. */
export const installedPackages = (nodeModules: string): ReadonlyArray<string> => {
  const names = new Set<string>()
  const walk = (dir: string) => {
    if (!existsSync(dir)) return
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isDirectory() || entry.name.startsWith(".")) continue
      if (entry.name.startsWith("@")) {
        for (const scoped of readdirSync(join(dir, entry.name), { withFileTypes: true })) {
          if (!scoped.isDirectory()) continue
          names.add(`${entry.name}/${scoped.name}`)
          walk(join(dir, entry.name, scoped.name, "node_modules"))
        }
      } else {
        names.add(entry.name)
        walk(join(dir, entry.name, "node_modules"))
      }
    }
  }
  walk(nodeModules)
  return [...names].sort()
}
