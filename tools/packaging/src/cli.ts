/**
 * `npm run pack -- <package>...`: packs the named packages and the workspace packages they need into `packed/` (or
 * `--out <dir>`), as npm would publish them, and prints the `npm install` line that takes the tarballs.
 *
 * @module
 */
import { mkdirSync } from "node:fs"
import { join, resolve } from "node:path"
import { parseArgs } from "node:util"
import { pack } from "./pack.js"
import { closure, installLine } from "./tarballs.js"
import { publishable, ROOT } from "./workspace.js"

const USAGE =
  "usage: npm run pack -- [--out <dir>] <package>... (for example: npm run pack -- client, npm run pack -- resource-server express)"

const main = async (argv: ReadonlyArray<string>): Promise<number> => {
  let parsed: { values: { out?: string | undefined; help?: boolean | undefined }; positionals: Array<string> }
  try {
    parsed = parseArgs({
      args: [...argv],
      options: { out: { type: "string" }, help: { type: "boolean", short: "h" } },
      allowPositionals: true,
    })
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n${USAGE}\n`)
    return 2
  }
  if (parsed.values.help === true) {
    process.stdout.write(`${USAGE}\n`)
    return 0
  }
  if (parsed.positionals.length === 0) {
    process.stderr.write(`name at least one package\n${USAGE}\n`)
    return 2
  }
  let projects: ReturnType<typeof closure>
  try {
    projects = closure(parsed.positionals, publishable())
  } catch (error) {
    process.stderr.write(`${(error as Error).message}\n`)
    return 2
  }
  const out = resolve(parsed.values.out ?? join(ROOT, "packed"))
  mkdirSync(out, { recursive: true })
  const tarballs: Array<string> = []
  for (const project of projects) {
    const packed = await pack(project, out)
    process.stderr.write(`packed ${packed.name}@${packed.version}\n`)
    tarballs.push(packed.tarball)
  }
  process.stdout.write(`${installLine(tarballs)}\n`)
  return 0
}

process.exitCode = await main(process.argv.slice(2))
