/**
 * The runnable Keyway authorization server, as a library: `loadConfig` reads the JSON file and the flags,
 * `startAuthorizationServer` runs it (SQLite in a data directory, readable logs).
 *
 * @module
 */
export {
  type AppConfig,
  appConfigSchema,
  type ClientConfig,
  type CommandLine,
  ConfigFileError,
  DEFAULTS,
  type LifetimesConfig,
  loadConfig,
  parseCommandLine,
  parseConfig,
  type ResourceConfig,
  readConfigFile,
  USAGE,
  UsageError,
  type UserConfig,
} from "./config.js"
export { defaultLog, type Log, withRequestLog } from "./logging.js"
export { type RunningAuthorizationServer, type StartOptions, startAuthorizationServer } from "./server.js"
