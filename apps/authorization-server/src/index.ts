/**
 * The runnable Keyway authorization server, as a library: `loadConfig` reads the JSON file and the flags,
 * `startAuthorizationServer` runs it (SQLite in a data directory or PostgreSQL, readable logs).
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
  type DevelopmentConfig,
  type EnterpriseManagedConfig,
  type ExtensionsConfig,
  type LifetimesConfig,
  loadConfig,
  type MaintenanceConfig,
  parseCommandLine,
  parseConfig,
  type ResourceConfig,
  readConfigFile,
  SESSION_SECRET_VARIABLE,
  type SigningKeysConfig,
  type UpstreamConfig,
  USAGE,
  UsageError,
  type UserConfig,
} from "./config.js"
export { defaultLog, type Log, withRequestLog } from "./logging.js"
export { type RunningAuthorizationServer, type StartOptions, startAuthorizationServer } from "./server.js"
