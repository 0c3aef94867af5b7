export { CHROMIUM_PATH, type HeadlessChromium, launchChromium } from "./chromium.js"
export { type PostgresServer, startPostgres } from "./postgres.js"
export { ensureDebianPackage } from "./system.js"
