/**
 * The Keyway demo as a library: the stack (authorization server + notes MCP server on loopback), the narrated run of
 * the whole MCP authorization flow, and `--serve`.
 *
 * @module
 */
export { narrated, readConsent, scriptedUser } from "./agent.js"
export { type Command, parseCommandLine, USAGE, UsageError } from "./cli.js"
export { CONNECTED_SECTIONS, runConnectedDemo } from "./connected.js"
export { DEVICE_SECTIONS, runDeviceDemo } from "./device.js"
export { DOWNSTREAM_SECTIONS, runDownstreamDemo } from "./downstream.js"
export { type DemoOptions, type DemoResult, runDemo } from "./flow.js"
export { CONNECTED_STEPS, type ConsentView, DEVICE_STEPS, DOWNSTREAM_STEPS, Narrator, STEPS } from "./narrator.js"
export { type Exchange, recordingFetch } from "./recorder.js"
export { describe as describeSecret, fingerprint, Redactor } from "./redact.js"
export { announcement, runServe, type ServeAnnouncement, type ServeOptions } from "./serve.js"
export {
  CONFIDENTIAL_CLIENT_ID,
  DEMO_USERNAME,
  DEVICE_CLIENT_ID,
  type DemoClient,
  type DemoUser,
  freePort,
  LOOPBACK_REDIRECT,
  NOTES_SERVER_CLIENT_ID,
  type Stack,
  type StackOptions,
  startStack,
} from "./stack.js"
export { formatJson, Progress, Transcript } from "./transcript.js"
