import { readFileSync } from "node:fs"
import { builtinModules } from "node:module"
import { dirname, join, relative } from "node:path"
import { fileURLToPath } from "node:url"
import { describe, expect, it } from "vitest"

/**
 * The Web faces load no Node.js module (DESIGN §1): what the main, client and resource-server entries import, through
 * the package's own files, names no `node:*` module, Node built-in or `pg`; only `/node` may. Read from the build.
 */
const DIST = join(dirname(fileURLToPath(import.meta.url)), "..", "dist")
const IMPORT =
  /\b(?:import|export)\s*(?:[\w*{}\s,$]+?\s*from\s*)?["']([^"'\n]+)["']|\bimport\(\s*["']([^"'\n]+)["']\s*\)/gu
const BUILTINS = new Set(builtinModules)

/** Every bare specifier reached from `entry` through relative imports, by the file that names it. */
const reached = (entry: string): ReadonlyArray<string> => {
  const seen = new Set<string>()
  const found: Array<string> = []
  const visit = (file: string) => {
    if (seen.has(file)) return
    seen.add(file)
    for (const match of readFileSync(file, "utf8").matchAll(IMPORT)) {
      const specifier = match[1] ?? match[2] ?? ""
      if (specifier.startsWith(".")) visit(join(dirname(file), specifier))
      else found.push(`${relative(DIST, file)}: ${specifier}`)
    }
  }
  visit(join(DIST, entry))
  return found
}

const nodeOnly = (line: string) => {
  const specifier = line.slice(line.indexOf(": ") + 2)
  return specifier.startsWith("node:") || BUILTINS.has(specifier.split("/")[0] ?? "") || specifier === "pg"
}

describe("the Web faces of @keyway/ext-dpop", () => {
  it.each(["index.js", "client.js", "resource-server.js"])("%s reaches no Node.js module", (entry) => {
    expect(reached(entry).filter(nodeOnly)).toEqual([])
  })

  it("the node entry is where pg is loaded", () => {
    expect(reached("node.js").filter(nodeOnly)).toEqual(["internal/postgres.js: pg"])
  })
})
