/**
 * What the demo client holds and shows: a memory token store the demo can reach into (to make tokens look expired or
 * close to expiry) and the text of tool results.
 *
 * @module
 */
import type { TokenStore } from "@keyway/client"

type ToolResult = { readonly content?: unknown; readonly isError?: unknown }

/** The text of a tool result, other content shown by its type. */
export const resultText = (result: ToolResult): string => {
  const content = Array.isArray(result.content)
    ? (result.content as ReadonlyArray<{ type?: string; text?: unknown }>)
    : []
  return content.map((item) => (item.type === "text" ? String(item.text) : `[${item.type}]`)).join("\n")
}

/** A memory token store the demo can reach into, to make the access token look expired. */
export const demoStore = () => {
  const values = new Map<string, unknown>()
  const backend: TokenStore.Backend = {
    get: async (key) => (values.has(key) ? structuredClone(values.get(key)) : undefined),
    set: async (key, value) => {
      values.set(key, structuredClone(value))
    },
    delete: async (key) => {
      values.delete(key)
    },
  }
  const tokens = () =>
    [...values]
      .filter(([key]) => key.startsWith("tokens:"))
      .map(([key, value]) => [key, value as TokenStore.Tokens] as const)
  return {
    backend,
    tokens: () => tokens().map(([, value]) => value),
    expireAccessTokens: () => {
      for (const [key, value] of tokens()) values.set(key, { ...value, expires_at: Date.now() })
    },
    /** Leaves the access tokens 30 seconds to live: within the minute a client renews ahead. */
    nearExpiry: () => {
      for (const [key, value] of tokens()) values.set(key, { ...value, expires_at: Date.now() + 30_000 })
    },
  }
}
