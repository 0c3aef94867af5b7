export { runtimeBinary } from "./binaries.js"
export { type Bundle, bundleForBrowser } from "./bundle.js"
