import { defineConfig, mergeConfig, type ViteUserConfig } from "vitest/config"

/** The test settings every package shares: tests in test/, and a JSON report that the root summary reads. */
export const keywayVitest = (overrides: ViteUserConfig = {}) =>
  mergeConfig(
    defineConfig({
      test: {
        include: ["test/**/*.test.ts"],
        reporters: ["default", ["json", { outputFile: ".reports/vitest.json" }]],
        testTimeout: 30_000,
        hookTimeout: 60_000,
      },
    }),
    overrides,
  )
