import { fileURLToPath } from "node:url"
import { expectRequiresNode } from "@keyway/testing/requires-node"
import { it } from "vitest"

const main = fileURLToPath(new URL("../dist/main.js", import.meta.url))

it("on a Node.js older than 22.19 (the machine's own), says what it needs and what to run instead, with exit code 1", () =>
  expectRequiresNode(main, "keyway-mcp", "apps/mcp-client/dist/main.js"))
