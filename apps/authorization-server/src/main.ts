#!/usr/bin/env node
/**
 * The entry point of keyway-authorization-server: the Node.js version is checked before anything that needs a recent
 * one is loaded (an older Node gets one line saying what to run instead, and exit code 1), then the command line runs
 * (`cli.ts`).
 *
 * @module
 */
import { requireSupportedNode } from "@keyway/node-version"

requireSupportedNode("keyway-authorization-server", "apps/authorization-server/dist/main.js")
await import("./cli.js")
