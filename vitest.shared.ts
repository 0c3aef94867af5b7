import { defineConfig, mergeConfig, type ViteUserConfig } from "vitest/config"

/** The test settings every package shares: tests in test/, and a JSON report that the root summary reads. */
export const keywayVitest = (overrides: ViteUserConfig = {}) =>
  mergeConfig(
    defineConfig({
      test: {
        include: ["test/**/*.test.ts"],
        reporters: ["default", ["json", { outputFile: ".reports/vitest.json" }]],
        // npm test runs several projects' test files at once on a two-core machine, with Chromium, PostgreSQL and
        // server processes beside them: a flow that takes 4 s alone has taken over 30 s there. The cap is for a test
        // that hangs, not for one that waits its turn for a core.
        testTimeout: 60_000,
        hookTimeout: 60_000,
      },
    }),
    overrides,
  )
