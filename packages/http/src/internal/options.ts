// The bridge's options, resolved once per server: the public origin, the limits, `allow` and `onError`.
import { DEFAULT_MAX_BODY_BYTES } from "../Body.js"
import type { BridgeOptions } from "../node.js"

export const DEFAULT_ALLOW = "GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS"

export interface Resolved {
  readonly publicOrigin: (() => string) | undefined
  readonly maxBodyBytes: number
  readonly maxHeaders: number
  readonly allow: (pathname: string) => string | undefined
  readonly onError: (error: unknown) => void
}

const defaultOnError = (error: unknown): void => {
  const detail = error instanceof Error ? (error.stack ?? `${error.name}: ${error.message}`) : String(error)
  process.stderr.write(`keyway: a request handler failed: ${detail}\n`)
}

const originOf = (value: string | URL): string => {
  const url = new URL(value)
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TypeError(`publicUrl must be an http or https URL, got ${JSON.stringify(String(value))}`)
  }
  return url.origin
}

export const resolveOptions = (options: BridgeOptions): Resolved => {
  const publicUrl = options.publicUrl
  let publicOrigin: (() => string) | undefined
  if (typeof publicUrl === "function") {
    let cached: { readonly from: string | URL; readonly origin: string } | undefined
    publicOrigin = () => {
      const value = publicUrl()
      if (cached?.from !== value) cached = { from: value, origin: originOf(value) }
      return cached.origin
    }
  } else if (publicUrl !== undefined) {
    const origin = originOf(publicUrl)
    publicOrigin = () => origin
  }
  const positive = (name: string, value: number | undefined, fallback: number): number => {
    if (value === undefined) return fallback
    if (!Number.isSafeInteger(value) || value < 0) throw new RangeError(`${name} must be a non-negative integer`)
    return value
  }
  return {
    publicOrigin,
    maxBodyBytes: positive("maxBodyBytes", options.maxBodyBytes, DEFAULT_MAX_BODY_BYTES),
    maxHeaders: positive("maxHeaders", options.maxHeaders, 200),
    allow: options.allow ?? (() => DEFAULT_ALLOW),
    onError: options.onError ?? defaultOnError,
  }
}
