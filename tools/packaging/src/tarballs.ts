/**
 * The tarballs one role needs, for using Keyway's packages before they are published: the named packages and the
 * workspace packages they depend on, and the `npm install` line that takes them.
 *
 * @module
 */
import type { Project } from "./workspace.js"

/** The full package name for a short one: `client` and `ext-dpop` name `@keyway/client` and `@keyway/ext-dpop`. */
export const packageName = (name: string): string => (name.startsWith("@") ? name : `@keyway/${name}`)

/**
 * The published projects a user of `names` installs: each named package and, transitively, the workspace packages
 * in its `dependencies` and its peer dependencies that are not optional. Fails on a name that is not a published
 * package, listing those that are.
 */
export const closure = (names: ReadonlyArray<string>, published: ReadonlyArray<Project>): ReadonlyArray<Project> => {
  const byName = new Map(published.map((project) => [project.manifest.name, project]))
  const unknown = names.map(packageName).filter((name) => !byName.has(name))
  if (unknown.length > 0) {
    const known = [...byName.keys()].map((name) => name.replace(/^@keyway\//u, "")).join(", ")
    throw new Error(`not a published Keyway package: ${unknown.join(", ")} (choose from ${known})`)
  }
  const needed = new Set<string>()
  const visit = (name: string) => {
    const project = byName.get(name)
    if (project === undefined || needed.has(name)) return
    needed.add(name)
    const { dependencies = {}, peerDependencies = {}, peerDependenciesMeta = {} } = project.manifest
    for (const dependency of Object.keys(dependencies)) visit(dependency)
    for (const peer of Object.keys(peerDependencies)) if (peerDependenciesMeta[peer]?.optional !== true) visit(peer)
  }
  for (const name of names) visit(packageName(name))
  return published.filter((project) => needed.has(project.manifest.name))
}

/** The command that installs these tarballs into the current project. */
export const installLine = (tarballs: ReadonlyArray<string>): string =>
  `npm install ${tarballs.map((path) => (/^[\w./@+-]+$/u.test(path) ? path : `'${path.replaceAll("'", "'\\''")}'`)).join(" ")}`
