/**
 * README checks: the examples a README shows are the example files the consumer test compiles and runs, every
 * published package's README says that it is ESM-only and what that asks of a project, and no README shows an
 * import of a package nobody can install.
 *
 * @module
 */
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import type { Manifest } from "./workspace.js"

/** The paragraph every published package's README carries, word for word. */
export const ESM_NOTE =
  '**ESM only.** Keyway\'s packages are ES modules for Node.js 22.19 or later, with no CommonJS build: import them from files that Node treats as modules, that is with `"type": "module"` in your package.json (`npm pkg set type=module`; a fresh `npm init -y` project is CommonJS) or from `.mjs`/`.mts` files. With TypeScript, use `"module": "nodenext"` (or `"moduleResolution": "bundler"`; the old `"moduleResolution": "node"` does not read `exports` and finds no types) and include `"DOM"` in `lib`: the declarations use Web types such as `Request`, `HeadersInit` and `CryptoKey`. The `/node` entries (`@keyway/client/node`, `@keyway/resource-server/node`, ...) also use Node\'s own types: `npm install --save-dev @types/node` and add `"types": ["node"]` to `compilerOptions`.'

/**
 * The sentence an extension's README carries word for word, made from its manifest: its role packages (the optional
 * peer dependencies that are Keyway's) are optional peer dependencies.
 */
export const optionalPeersNote = (manifest: Manifest): string | undefined => {
  const peers = Object.keys(manifest.peerDependencies ?? {}).filter(
    (peer) => peer.startsWith("@keyway/") && manifest.peerDependenciesMeta?.[peer]?.optional === true,
  )
  if (peers.length === 0) return undefined
  const names = peers.map((peer) => `\`${peer}\``)
  const list = names.length === 1 ? names[0] : `${names.slice(0, -1).join(", ")} and ${names.at(-1)}`
  const verb = names.length === 1 ? "is an optional peer dependency" : "are optional peer dependencies"
  return `${list} ${verb}: install the role package of each side you run beside the extension, as above. The extension brings none of them itself.`
}

/** The marker that names the file a README's next code block must equal. */
const MARKER = /<!--\s*example:\s*(\S+)\s*-->\s*\n```[a-z]*\n([\s\S]*?)\n```/gu

/** One example a README shows from a file. */
export interface Example {
  /** The file, relative to the README's folder. */
  readonly file: string
  /** The code block's text. */
  readonly shown: string
}

/** The examples a README marks with `<!-- example: path -->` before their code block. */
export const examplesOf = (readme: string): ReadonlyArray<Example> =>
  [...readme.matchAll(MARKER)].map((match) => ({ file: match[1] ?? "", shown: match[2] ?? "" }))

/** Differences between a README's marked examples and their files; empty when they agree. */
export const exampleMismatches = (dir: string, readme: string): ReadonlyArray<string> =>
  examplesOf(readme).flatMap(({ file, shown }) => {
    const path = join(dir, file)
    if (!existsSync(path)) return [`${file}: the README shows it but the file does not exist`]
    const actual = readFileSync(path, "utf8").replace(/\n$/u, "")
    if (actual === shown) return []
    const a = actual.split("\n")
    const b = shown.split("\n")
    const line = a.findIndex((text, index) => text !== b[index])
    const at = line < 0 ? Math.min(a.length, b.length) : line
    return [
      `${file}: the README's block differs from the file at line ${at + 1}: file ${JSON.stringify(a[at] ?? "<end>")}, README ${JSON.stringify(b[at] ?? "<end>")}`,
    ]
  })

/** The packages imported by a README's TypeScript and JavaScript code blocks. */
export const importedPackages = (readme: string): ReadonlyArray<string> => {
  const blocks = [...readme.matchAll(/```(?:ts|typescript|js|javascript|mjs|mts)\n([\s\S]*?)```/gu)]
  return blocks.flatMap((block) =>
    [...(block[1] ?? "").matchAll(/\bfrom\s+["'](@[^/"']+\/[^/"']+|[^@./"'][^/"']*)/gu)].map((match) => match[1] ?? ""),
  )
}
