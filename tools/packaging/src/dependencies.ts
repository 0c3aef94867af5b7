/**
 * The dependency check: every package a project's code imports is declared in its manifest, in the right section,
 * and every declared package is imported (or is a tool its code or scripts run). Published code (`src/`) may only
 * use `dependencies` and `peerDependencies`; tests, benchmarks and configuration may also use `devDependencies` and
 * the root's; a published package's dependency that only tests use belongs in `devDependencies`. Private projects
 * (apps, tools) are never installed from the registry, so for them only declared-or-not matters, not the section.
 *
 * @module
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { builtinModules } from "node:module"
import { join } from "node:path"
import { type Manifest, type Project, projects, ROOT, readManifest } from "./workspace.js"

/** One finding. */
export interface Problem {
  /** The project's folder ("." for the root). */
  readonly project: string
  readonly name: string
  readonly message: string
}

const SOURCE = /\.(?:[cm]?[jt]s|tsx)$/u
/** Folders never scanned: build output, reports, test fixtures, and README examples (consumer code, not ours). */
const SKIPPED = new Set(["node_modules", "dist", ".reports", ".nx", ".toolchain", "fixtures", "examples", ".git"])

/** Every source file under a folder, recursively (skipping build output, fixtures and examples). */
export const sourceFiles = (dir: string): ReadonlyArray<string> => {
  if (!existsSync(dir)) return []
  const files: Array<string> = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (SKIPPED.has(entry.name)) continue
    const path = join(dir, entry.name)
    if (entry.isDirectory()) files.push(...sourceFiles(path))
    else if (SOURCE.test(entry.name) && !entry.name.endsWith(".d.ts")) files.push(path)
  }
  return files
}

const STATIC = /\b(?:import|export)\s+(?:type\s+)?(?:[\w*{}\s,$]+?\s+from\s+)?["']([^"'\n]+)["']/gu
const DYNAMIC = /\b(?:import|require)\(\s*["']([^"'\n]+)["']\s*\)/gu
const BUILTINS = new Set(builtinModules)

/** The bare specifiers a source text imports (static, dynamic, type-only, re-exports, require). */
export const specifiersOf = (source: string): ReadonlyArray<string> => [
  ...[...source.matchAll(STATIC)].map((match) => match[1] ?? ""),
  ...[...source.matchAll(DYNAMIC)].map((match) => match[1] ?? ""),
]

/** The package a specifier names; undefined for relative paths, absolute paths and Node built-ins. */
export const packageOf = (specifier: string): string | undefined => {
  if (specifier.startsWith(".") || specifier.startsWith("/") || specifier.startsWith("#")) return undefined
  if (specifier.startsWith("node:") || BUILTINS.has(specifier.split("/")[0] ?? "")) return undefined
  const parts = specifier.split("/")
  return specifier.startsWith("@") ? parts.slice(0, 2).join("/") : parts[0]
}

interface Usage {
  readonly packages: Set<string>
  /** Whether any file imports a Node built-in (what `@types/node` is for). */
  node: boolean
}

const usageOf = (files: ReadonlyArray<string>, self: string): Usage => {
  const usage: Usage = { packages: new Set(), node: false }
  for (const file of files) {
    for (const specifier of specifiersOf(readFileSync(file, "utf8"))) {
      const name = packageOf(specifier)
      if (name === undefined) {
        if (specifier.startsWith("node:") || BUILTINS.has(specifier.split("/")[0] ?? "")) usage.node = true
      } else if (name !== self) usage.packages.add(name)
    }
  }
  return usage
}

/** The command names a package installs (its `bin`), read from the installed package. */
const binsOf = (name: string, dirs: ReadonlyArray<string>): ReadonlyArray<string> => {
  for (const dir of dirs) {
    const path = join(dir, "node_modules", name, "package.json")
    if (!existsSync(path)) continue
    const bin = readManifest(join(dir, "node_modules", name)).bin
    if (bin === undefined) return []
    return typeof bin === "string" ? [name.split("/").pop() ?? name] : Object.keys(bin)
  }
  return []
}

const runs = (scripts: string, bins: ReadonlyArray<string>): boolean =>
  bins.some((bin) =>
    new RegExp(`(^|[\\s"'/(])${bin.replace(/[.*+?^${}()|[\]\\]/gu, "\\$&")}($|[\\s"')])`, "mu").test(scripts),
  )

const typesFor = (name: string): string | undefined => {
  if (!name.startsWith("@types/")) return undefined
  const base = name.slice("@types/".length)
  // @types/scope__name is the types of @scope/name.
  return base.includes("__") ? `@${base.replace("__", "/")}` : base
}

const keys = (record: Readonly<Record<string, string>> | undefined): ReadonlyArray<string> => Object.keys(record ?? {})

/** Tools run by hand rather than by a script, each with where that is documented. */
export const RUN_BY_HAND: Readonly<Record<string, string>> = {
  "@changesets/cli": ".changeset/README.md: npm run pnpm -- changeset",
}

/** Checks one project against what its files import. `rootDevDependencies` are available to tests. */
export const checkProject = (
  root: string,
  project: Project,
  context: {
    readonly rootDevDependencies: ReadonlySet<string>
    readonly manifests: ReadonlyMap<string, Manifest>
  },
): ReadonlyArray<Problem> => {
  const dir = join(root, project.dir)
  const { manifest } = project
  const problems: Array<Problem> = []
  const report = (name: string, message: string) => problems.push({ project: project.dir, name, message })
  const srcFiles = sourceFiles(join(dir, "src"))
  const otherFiles = readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    if (entry.name === "src" || SKIPPED.has(entry.name)) return []
    const path = join(dir, entry.name)
    if (entry.isDirectory()) return sourceFiles(path)
    return SOURCE.test(entry.name) ? [path] : []
  })
  const prod = usageOf(srcFiles, manifest.name)
  const dev = usageOf(otherFiles, manifest.name)
  const dependencies = new Set(keys(manifest.dependencies))
  const peers = new Set(keys(manifest.peerDependencies))
  const devDependencies = new Set(keys(manifest.devDependencies))
  // Where a tool can be run from: the scripts, and the project's own code (a bin spawned by name or path).
  const scripts = [
    ...Object.values(manifest.scripts ?? {}),
    ...[...srcFiles, ...otherFiles].map((file) => readFileSync(file, "utf8")),
  ].join("\n")

  // A private project is never installed from the registry: only what it declares matters, not in which section.
  const isPrivate = manifest.private === true
  for (const name of [...prod.packages].sort()) {
    if (dependencies.has(name) || peers.has(name) || (isPrivate && devDependencies.has(name))) continue
    report(
      name,
      devDependencies.has(name)
        ? `src/ imports ${name}, which is only in devDependencies: installed users would not get it`
        : `src/ imports ${name}, which package.json does not declare (dependencies or peerDependencies)`,
    )
  }
  for (const name of [...dev.packages].sort()) {
    if (dependencies.has(name) || peers.has(name) || devDependencies.has(name)) continue
    if (context.rootDevDependencies.has(name)) continue
    report(name, `tests or tooling import ${name}, which neither package.json nor the root's declares`)
  }
  // A dependency that satisfies a workspace dependency's optional peer is how an app opts into that feature.
  const providesOptionalPeer = (name: string) =>
    [...dependencies].some((dependency) => context.manifests.get(dependency)?.peerDependenciesMeta?.[name]?.optional)
  for (const name of [...dependencies].sort()) {
    if (prod.packages.has(name) || providesOptionalPeer(name) || (isPrivate && dev.packages.has(name))) continue
    report(
      name,
      dev.packages.has(name)
        ? `${name} is in dependencies but only tests or tooling import it: move it to devDependencies`
        : `${name} is in dependencies but nothing imports it`,
    )
  }
  for (const name of [...peers].sort()) {
    const typed = typesFor(name)
    if (prod.packages.has(name) || (typed !== undefined && prod.packages.has(typed))) continue
    report(name, `${name} is in peerDependencies but src/ does not import it`)
  }
  for (const name of [...devDependencies].sort()) {
    if (prod.packages.has(name) || dev.packages.has(name)) continue
    const typed = typesFor(name)
    if (typed === "node" && (prod.node || dev.node)) continue
    if (typed !== undefined && (prod.packages.has(typed) || dev.packages.has(typed))) continue
    if (runs(scripts, binsOf(name, [dir, root]))) continue
    report(name, `${name} is in devDependencies but nothing imports it and no script runs it`)
  }
  return problems
}

/** Checks the root manifest: each root dev dependency is imported somewhere, run by a script, or run by hand. */
export const checkRoot = (root: string, all: ReadonlyArray<Project>): ReadonlyArray<Problem> => {
  const manifest = readManifest(root)
  const rootFiles = readdirSync(root, { withFileTypes: true })
    .filter((entry) => entry.isFile() && SOURCE.test(entry.name))
    .map((entry) => join(root, entry.name))
  const files = [...rootFiles, ...all.flatMap((project) => sourceFiles(join(root, project.dir)))]
  const usage = usageOf(files, manifest.name)
  const scripts = [
    ...Object.values(manifest.scripts ?? {}),
    ...all.flatMap((project) => Object.values(project.manifest.scripts ?? {})),
    existsSync(join(root, "tools/bootstrap/run.mjs"))
      ? readFileSync(join(root, "tools/bootstrap/run.mjs"), "utf8")
      : "",
  ].join("\n")
  const problems: Array<Problem> = []
  for (const name of keys(manifest.devDependencies)) {
    if (usage.packages.has(name) || RUN_BY_HAND[name] !== undefined) continue
    const typed = typesFor(name)
    if (typed === "node" && usage.node) continue
    if (typed !== undefined && usage.packages.has(typed)) continue
    if (runs(scripts, binsOf(name, [root]))) continue
    problems.push({
      project: ".",
      name,
      message: `${name} is in the root devDependencies but nothing imports it and no script runs it`,
    })
  }
  for (const name of keys(manifest.dependencies)) {
    problems.push({ project: ".", name, message: `the root is private tooling: ${name} belongs in devDependencies` })
  }
  return problems
}

/** Every problem in the workspace. */
export const checkWorkspace = (root: string = ROOT): ReadonlyArray<Problem> => {
  const all = projects(root)
  const rootDevDependencies = new Set(keys(readManifest(root).devDependencies))
  const manifests = new Map(all.map((project) => [project.manifest.name, project.manifest]))
  return [
    ...checkRoot(root, all),
    ...all.flatMap((project) => checkProject(root, project, { rootDevDependencies, manifests })),
  ]
}
