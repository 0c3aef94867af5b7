/**
 * The audience rule every verifier and the protected resource apply (RFC 8707 §2, RFC 9068 §4, MCP "Token Audience
 * Binding"): `aud` names this resource, compared canonically.
 */
import { CanonicalUri } from "@keyway/core"

/** The `aud` claim as a list: a string is one audience, anything but an array none. */
export const audiencesOf = (aud: unknown): ReadonlyArray<unknown> =>
  typeof aud === "string" ? [aud] : Array.isArray(aud) ? aud : []

/** Whether one of `audiences` is `resource`. Exact match first: canonical comparison parses both URIs. */
export const namesResource = (audiences: ReadonlyArray<unknown>, resource: CanonicalUri.CanonicalUri): boolean =>
  audiences.some((a) => a === resource || (typeof a === "string" && CanonicalUri.equals(a, resource)))
