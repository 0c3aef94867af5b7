/**
 * Bundles an entry module with esbuild as a user's bundler would for the browser or a worker, and reports every
 * `node:*` (or bare Node built-in) import the bundle would need: the Web faces must have none.
 */
import { build } from "esbuild"

export interface Bundle {
  /** The bundled ES module. */
  readonly code: string
  /** The input files that went into it, relative to the working directory. */
  readonly inputs: ReadonlyArray<string>
}

/** Bundles `entry` for `--platform=browser` (the `browser` and `worker` export conditions of a Web bundler). */
export const bundleForBrowser = async (entry: string): Promise<Bundle> => {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    write: false,
    format: "esm",
    platform: "browser",
    conditions: ["worker", "browser"],
    target: "es2022",
    metafile: true,
    logLevel: "silent",
  })
  const output = result.outputFiles[0]
  if (output === undefined) throw new Error(`esbuild produced no output for ${entry}`)
  return { code: output.text, inputs: Object.keys(result.metafile.inputs) }
}
