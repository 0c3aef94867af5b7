/**
 * The workspace as the checks see it: every project's folder and manifest, and which of them are published.
 *
 * @module
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join, resolve } from "node:path"
import { fileURLToPath } from "node:url"

/** The repository root. */
export const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../../..")

/** The fields of a package.json the checks read. */
export interface Manifest {
  readonly name: string
  readonly version: string
  readonly private?: boolean
  readonly scripts?: Readonly<Record<string, string>>
  readonly dependencies?: Readonly<Record<string, string>>
  readonly devDependencies?: Readonly<Record<string, string>>
  readonly peerDependencies?: Readonly<Record<string, string>>
  readonly peerDependenciesMeta?: Readonly<Record<string, { readonly optional?: boolean }>>
  readonly bin?: string | Readonly<Record<string, string>>
}

/** One workspace project. */
export interface Project {
  /** Folder relative to the root, for example "packages/client". */
  readonly dir: string
  readonly manifest: Manifest
}

export const readManifest = (dir: string): Manifest =>
  JSON.parse(readFileSync(join(dir, "package.json"), "utf8")) as Manifest

/** The folders pnpm-workspace.yaml lists (its `packages/*` style globs, one level deep). */
export const projects = (root: string = ROOT): ReadonlyArray<Project> => {
  const yaml = readFileSync(join(root, "pnpm-workspace.yaml"), "utf8")
  const globs = [...yaml.matchAll(/^\s+-\s+"?([^"\n]+?)\/\*"?\s*$/gmu)].map((match) => match[1] ?? "")
  const found: Array<Project> = []
  for (const glob of globs) {
    const parent = join(root, glob)
    if (!existsSync(parent)) continue
    for (const entry of readdirSync(parent, { withFileTypes: true })) {
      const dir = join(glob, entry.name)
      if (entry.isDirectory() && existsSync(join(root, dir, "package.json"))) {
        found.push({ dir, manifest: readManifest(join(root, dir)) })
      }
    }
  }
  return found.sort((a, b) => a.dir.localeCompare(b.dir))
}

/** The projects that are published to the npm registry (not `private`). */
export const publishable = (root: string = ROOT): ReadonlyArray<Project> =>
  projects(root).filter((project) => project.manifest.private !== true)
