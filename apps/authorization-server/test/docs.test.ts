import { readFileSync } from "node:fs"
import { Config } from "@keyway/authorization-server"
import { describe, expect, it } from "vitest"
import { DEFAULTS } from "../src/config.js"

const read = (path: string) => readFileSync(new URL(path, import.meta.url), "utf8")
const onOff = (on: boolean) => (on ? "on" : "off")

describe("what the READMEs say of the defaults", () => {
  it("states dynamic registration's default as the library and the app have it", () => {
    const library = onOff(Config.defaults.registration)
    const app = onOff(DEFAULTS.registration)
    expect(read("../../../packages/authorization-server/README.md").replaceAll(/\s+/gu, " ")).toContain(
      `${library} by default in the library (\`registration: true\` turns it on), ${app} by default in the runnable server`,
    )
    expect(read("../README.md")).toContain(`${app} by default in this app (${library} by default in the library)`)
  })
})
