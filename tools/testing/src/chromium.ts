import { type Browser, chromium, type Page } from "playwright-core"
import { requireDebianPackage } from "./system.js"

/** Where Debian's `chromium` package puts the browser. */
export const CHROMIUM_PATH = "/usr/bin/chromium"

/** A headless Chromium; playwright gives every launch a fresh temporary profile and removes it on close. */
export interface HeadlessChromium {
  readonly browser: Browser
  readonly close: () => Promise<void>
}

/**
 * Launches Debian's Chromium headless; throws at once when the package is missing (`npm test` installs it before the
 * tests). The flags keep start-up fast on a closed network (no background networking, updates or sync) and allow
 * running as root (no sandbox).
 */
export const launchChromium = async (): Promise<HeadlessChromium> => {
  requireDebianPackage("chromium", CHROMIUM_PATH)
  const browser = await chromium.launch({
    executablePath: CHROMIUM_PATH,
    headless: true,
    args: [
      "--no-sandbox",
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

/**
 * Saves a screenshot of `page` for people to look at (test artifacts). A screenshot records, it checks nothing: when a
 * loaded machine's Chromium refuses to capture one (`Page.captureScreenshot`), it is tried once more and then skipped
 * with a line on stderr, instead of failing the test whose assertions are elsewhere.
 */
export const screenshot = async (page: Page, path: string): Promise<void> => {
  for (let attempt = 1; ; attempt++) {
    try {
      await page.screenshot({ path, fullPage: true })
      return
    } catch (error) {
      if (attempt >= 2) {
        process.stderr.write(
          `screenshot ${path} skipped: ${error instanceof Error ? error.message.split("\n")[0] : String(error)}\n`,
        )
        return
      }
    }
  }
}
