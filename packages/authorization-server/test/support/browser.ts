import { execFileSync } from "node:child_process"
import { existsSync } from "node:fs"
import { type Browser, chromium } from "playwright-core"

export const CHROMIUM = "/usr/bin/chromium"

/** Installs Debian's chromium with apt-get when it is missing (the test machine may not have it yet). */
export const ensureChromium = (): void => {
  if (existsSync(CHROMIUM)) return
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" }
  try {
    execFileSync("apt-get", ["install", "-y", "--no-install-recommends", "chromium"], { stdio: "inherit", env })
  } catch {
    execFileSync("apt-get", ["update"], { stdio: "inherit", env })
    execFileSync("apt-get", ["install", "-y", "--no-install-recommends", "chromium"], { stdio: "inherit", env })
  }
  if (!existsSync(CHROMIUM)) throw new Error(`apt-get did not install ${CHROMIUM}`)
}

/**
 * Headless Chromium set up for a closed network (see DESIGN.md §8). Playwright's `launch` always starts it with a
 * fresh temporary `--user-data-dir` of its own (it refuses one passed in `args`).
 */
export const launchChromium = async (): Promise<{ readonly browser: Browser; readonly close: () => Promise<void> }> => {
  ensureChromium()
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--no-sandbox",
      "--headless",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  })
  return {
    browser,
    close: () => browser.close(),
  }
}
