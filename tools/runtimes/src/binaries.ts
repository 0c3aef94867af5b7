/**
 * The runtimes' executables, from the npm packages that ship them (workerd, deno, bun each depend on one package per
 * platform holding the binary). Resolved directly, because pnpm blocks the wrapper packages' postinstall scripts.
 */
import { existsSync } from "node:fs"
import { createRequire } from "node:module"
import { dirname, join } from "node:path"

const require = createRequire(import.meta.url)

/** The platform packages of linux-x64, the platform the project's machines and CI run on. */
const PLATFORM_PACKAGES = {
  workerd: { wrapper: "workerd", binary: "@cloudflare/workerd-linux-64", path: "bin/workerd" },
  deno: { wrapper: "deno", binary: "@deno/linux-x64-glibc", path: "deno" },
  bun: { wrapper: "bun", binary: "@oven/bun-linux-x64", path: "bin/bun" },
} as const

/** The path of a runtime's executable; throws (never skips) when this platform has none. */
export const runtimeBinary = (runtime: keyof typeof PLATFORM_PACKAGES): string => {
  const { wrapper, binary, path } = PLATFORM_PACKAGES[runtime]
  if (process.platform !== "linux" || process.arch !== "x64") {
    throw new Error(`the ${runtime} tests expect linux-x64 (this is ${process.platform}-${process.arch})`)
  }
  const fromWrapper = createRequire(require.resolve(`${wrapper}/package.json`))
  const file = join(dirname(fromWrapper.resolve(`${binary}/package.json`)), path)
  if (!existsSync(file)) throw new Error(`${binary} has no ${path}: reinstall the workspace`)
  return file
}
