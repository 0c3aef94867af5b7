import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterEach } from "vitest"

/**
 * Registers an `afterEach` that runs the current test's cleanups, last registered first. Returns `defer`, to add a
 * cleanup, and `dir`, a fresh temporary directory removed after the test.
 */
export const testCleanups = () => {
  const cleanups: Array<() => Promise<void>> = []
  afterEach(async () => {
    while (cleanups.length > 0) await cleanups.pop()?.()
  })
  const defer = (cleanup: () => Promise<void>): void => {
    cleanups.push(cleanup)
  }
  const dir = async (): Promise<string> => {
    const path = await mkdtemp(join(tmpdir(), "keyway-as-app-test-"))
    defer(() => rm(path, { recursive: true, force: true }))
    return path
  }
  return { defer, dir }
}
