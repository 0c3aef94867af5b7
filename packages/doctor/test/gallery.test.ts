import { describe, expect, it } from "vitest"
import { catalog, type Diagnosis, diagnose } from "../src/index.js"
import { startGalleryServer } from "./gallery/server.js"
import { gallery } from "./gallery/table.js"

/** The findings that are not `pass`, as "<check> <status>", sorted. */
const notPassing = (diagnosis: Diagnosis): ReadonlyArray<string> =>
  diagnosis.findings
    .filter((finding) => finding.status !== "pass")
    .map((finding) => `${finding.check} ${finding.status}`)
    .sort()

describe("the gallery of broken servers", () => {
  it("holds at least 20 misconfigurations, each with its source and known check IDs", () => {
    expect(gallery.length).toBeGreaterThanOrEqual(20)
    for (const entry of gallery) {
      expect(entry.source).toMatch(/^https:\/\/github\.com\/[\w.-]+\/[\w.-]+\/(issues|pull)\/\d+$/)
      expect(entry.expected.length).toBeGreaterThan(0)
      for (const finding of entry.expected) {
        const [check, status] = finding.split(" ")
        expect(Object.keys(catalog), `${entry.name}: ${finding}`).toContain(check)
        expect(["warn", "fail"]).toContain(status)
      }
    }
    expect(new Set(gallery.map((entry) => entry.name)).size).toBe(gallery.length)
  })

  it("finds nothing wrong with the gallery's server without a fault", async () => {
    const server = await startGalleryServer()
    try {
      const diagnosis = await diagnose(server.url, { fetch: server.fetch })
      expect(diagnosis.stopped).toBeUndefined()
      expect(notPassing(diagnosis)).toEqual([])
      expect(diagnosis.findings.length).toBeGreaterThan(0)
    } finally {
      await server.close()
    }
  })

  for (const entry of gallery) {
    it(`names the fault, with its fix, and nothing else: ${entry.name}`, async () => {
      const server = await startGalleryServer(entry.faults)
      try {
        const diagnosis = await diagnose(server.url, { ...entry.options, fetch: server.fetch })
        expect(notPassing(diagnosis)).toEqual([...entry.expected].sort())
        for (const finding of diagnosis.findings.filter((f) => f.status !== "pass")) {
          expect(finding.server).not.toBe("")
          expect(finding.detail).not.toBe("")
          expect(finding.revisions.length).toBeGreaterThan(0)
          expect(catalog[finding.check]?.fix ?? "").not.toBe("")
        }
      } finally {
        await server.close()
      }
    })
  }
})
