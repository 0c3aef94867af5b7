import { describe, expect, it } from "vitest"
import * as Passthrough from "../src/Passthrough.js"

const TOKEN = "-inbound.token"

describe("Passthrough.find (MCP: token passthrough)", () => {
  it.each<[string, Passthrough.Outgoing, Passthrough.Where | undefined]>([
    ["a clean request", { url: "https://api.example.com/x", headers: new Headers({ a: "b" }), body: "q=1" }, undefined],
    ["the token in the query", { url: `https://api.example.com/x?t=${TOKEN}`, headers: new Headers() }, "url"],
    ["the token in a URL object", { url: new URL(`https://api.example.com/${TOKEN}`), headers: new Headers() }, "url"],
    [
      "the token in a header",
      { url: "https://api.example.com/", headers: new Headers({ "x-t": `x ${TOKEN}` }) },
      "header",
    ],
    [
      "the token in a text body",
      { url: "https://api.example.com/", headers: new Headers(), body: `{"t":"${TOKEN}"}` },
      "body",
    ],
    [
      "the token in a form body",
      { url: "https://api.example.com/", headers: new Headers(), body: new URLSearchParams({ t: TOKEN }) },
      "body",
    ],
    [
      "a binary body (not searchable)",
      { url: "https://api.example.com/", headers: new Headers(), body: new TextEncoder().encode(TOKEN) },
      undefined,
    ],
  ])("%s", (_, request, where) => {
    expect(Passthrough.find(TOKEN, request)).toBe(where)
  })

  it("finds nothing for an empty token", () => {
    expect(Passthrough.find("", { url: "https://api.example.com/", headers: new Headers() })).toBeUndefined()
  })
})
