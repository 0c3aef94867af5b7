import { existsSync, readdirSync, readFileSync } from "node:fs"
import { dirname, join, relative } from "node:path"
import { describe, expect, it } from "vitest"
import { CONSUMER_TSCONFIG } from "../src/consumer.js"
import { ESM_NOTE, exampleMismatches, examplesOf, importedPackages, optionalPeersNote } from "../src/readme.js"
import { projects, publishable, ROOT } from "../src/workspace.js"

const readmes = [
  join(ROOT, "README.md"),
  ...projects()
    .map((project) => join(ROOT, project.dir, "README.md"))
    .filter((path) => existsSync(path)),
]
const read = (path: string) => readFileSync(path, "utf8")

describe("README examples are the example files", () => {
  it.each(readmes.map((path) => [relative(ROOT, path), path]))("%s shows its example files as they are", (_, path) => {
    expect(exampleMismatches(dirname(path), read(path))).toEqual([])
  })

  it("every example file of a published package is shown by a README", () => {
    const shown = new Set(
      readmes.flatMap((path) => examplesOf(read(path)).map((example) => join(dirname(path), example.file))),
    )
    const files = publishable().flatMap((project) => {
      const dir = join(ROOT, project.dir, "examples")
      return existsSync(dir) ? readdirSync(dir).map((file) => join(dir, file)) : []
    })
    expect(files.length).toBeGreaterThan(0)
    expect(files.filter((file) => !shown.has(file)).map((file) => relative(ROOT, file))).toEqual([])
  })

  it("reports where a README's block and its file part", () => {
    const dir = join(ROOT, "packages", "client")
    const readme = '<!-- example: examples/errors.ts -->\n```ts\nimport { somethingElse } from "@keyway/client"\n```\n'
    const first = read(join(dir, "examples", "errors.ts")).split("\n")[0]
    expect(exampleMismatches(dir, readme)).toEqual([
      `examples/errors.ts: the README's block differs from the file at line 1: file ${JSON.stringify(first)}, README "import { somethingElse } from \\"@keyway/client\\""`,
    ])
    expect(exampleMismatches(dir, "<!-- example: examples/missing.ts -->\n```ts\nx\n```\n")).toEqual([
      "examples/missing.ts: the README shows it but the file does not exist",
    ])
  })
})

describe("what the READMEs tell users", () => {
  it.each(publishable().map((project) => [project.manifest.name, project.dir]))(
    "%s says it is ESM-only and what that asks of a project",
    (_, dir) => {
      expect(read(join(ROOT, dir, "README.md"))).toContain(ESM_NOTE)
    },
  )

  it.each(
    publishable()
      .filter((project) => project.dir.startsWith("packages/extensions/"))
      .map((project) => [
        project.manifest.name,
        project.dir,
        optionalPeersNote(project.manifest) ?? "(no optional peers)",
      ]),
  )("%s says its role packages are optional peers, as its manifest declares them", (_, dir, note) => {
    expect(read(join(ROOT, dir, "README.md"))).toContain(note)
  })

  it.each([
    ["authorization-server", "packages/authorization-server"],
    ["resource-server", "packages/resource-server"],
    ["client", "packages/client"],
  ])("the %s README names every extension with a face for it", (role, dir) => {
    const extensions = publishable().filter((project) => {
      const manifest = JSON.parse(read(join(ROOT, project.dir, "package.json"))) as { exports?: object }
      return Object.hasOwn(manifest.exports ?? {}, `./${role}`)
    })
    expect(extensions.length).toBeGreaterThan(0)
    const readme = read(join(ROOT, dir, "README.md"))
    expect(extensions.map((project) => project.manifest.name).filter((name) => !readme.includes(name))).toEqual([])
  })

  it("the ESM note names every compiler option the consumer projects need", () => {
    const { lib, module, types } = CONSUMER_TSCONFIG.compilerOptions
    expect(ESM_NOTE).toContain(`"module": "${module}"`)
    expect(lib).toContain("DOM")
    expect(ESM_NOTE).toContain('include `"DOM"` in `lib`')
    expect(ESM_NOTE).toContain(`"types": ${JSON.stringify(types).replaceAll(",", ", ")}`)
  })

  it("no README imports a workspace package that is not published", () => {
    const published = new Set(publishable().map((project) => project.manifest.name))
    const workspace = new Set(projects().map((project) => project.manifest.name))
    const unpublished = readmes.flatMap((path) =>
      importedPackages(read(path))
        .filter((name) => workspace.has(name) && !published.has(name))
        .map((name) => `${relative(ROOT, path)} imports ${name}`),
    )
    expect(unpublished).toEqual([])
  })

  it("finds the packages a README's code imports", () => {
    const readme =
      '```ts\nimport { a } from "@keyway/app-x"\nimport b from "express/sub"\n```\n```sh\nfrom "nope"\n```\n'
    expect(importedPackages(readme)).toEqual(["@keyway/app-x", "express"])
  })
})
