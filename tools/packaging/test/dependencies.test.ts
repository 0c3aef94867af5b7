import { readFileSync } from "node:fs"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { checkWorkspace, packageOf, specifiersOf } from "../src/dependencies.js"

describe("the dependency check", () => {
  it("finds nothing in this workspace: every import declared, every declaration imported", () => {
    expect(checkWorkspace()).toEqual([])
  })

  it("reports each kind of problem in a workspace that has them all", () => {
    expect(checkWorkspace(join(import.meta.dirname, "fixtures", "workspace"))).toEqual([
      {
        project: ".",
        name: "left-pad",
        message: "left-pad is in the root devDependencies but nothing imports it and no script runs it",
      },
      {
        project: "packages/a",
        name: "effect",
        message: "src/ imports effect, which package.json does not declare (dependencies or peerDependencies)",
      },
      {
        project: "packages/a",
        name: "fast-check",
        message: "tests or tooling import fast-check, which neither package.json nor the root's declares",
      },
      {
        project: "packages/a",
        name: "jose",
        message: "jose is in dependencies but only tests or tooling import it: move it to devDependencies",
      },
      { project: "packages/a", name: "pg", message: "pg is in dependencies but nothing imports it" },
      { project: "packages/a", name: "express", message: "express is in peerDependencies but src/ does not import it" },
      {
        project: "packages/a",
        name: "autocannon",
        message: "autocannon is in devDependencies but nothing imports it and no script runs it",
      },
    ])
  })

  it("reads every import form and names packages, not paths", () => {
    const source = readFileSync(join(import.meta.dirname, "fixtures", "imports.txt"), "utf8")
    expect(specifiersOf(source).map(packageOf)).toEqual([
      "alpha",
      "@scope/beta",
      "gamma",
      "delta",
      "side-effect",
      undefined,
      undefined,
      "epsilon",
      "zeta",
    ])
  })
})
