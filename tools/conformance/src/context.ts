/**
 * The scenario context the conformance suite passes in `MCP_CONFORMANCE_CONTEXT`: a JSON object naming the
 * scenario and, for some scenarios, client credentials or a signing key.
 *
 * @see {@link https://github.com/modelcontextprotocol/conformance | MCP conformance suite}
 * @module
 */

/**
 * The fields of `MCP_CONFORMANCE_CONTEXT` the client uses; other fields are ignored.
 *
 * @see {@link https://github.com/modelcontextprotocol/conformance | MCP conformance suite}
 */
export interface ConformanceContext {
  readonly name?: string
  readonly client_id?: string
  readonly client_secret?: string
  /** A PKCS#8 PEM private key for `private_key_jwt`. */
  readonly private_key_pem?: string
  readonly signing_algorithm?: string
  /** A workload's JWT for the JWT bearer grant (workload identity federation scenarios). */
  readonly valid_jwt?: string
  /** Enterprise-managed authorization: the client's ID at the identity provider. */
  readonly idp_client_id?: string
  /** Enterprise-managed authorization: the user's ID token from the identity provider. */
  readonly idp_id_token?: string
  /** Enterprise-managed authorization: the identity provider's issuer. */
  readonly idp_issuer?: string
  /** Enterprise-managed authorization: the identity provider's token endpoint. */
  readonly idp_token_endpoint?: string
}

const stringField = (record: Record<string, unknown>, key: string): string | undefined => {
  const value = record[key]
  return typeof value === "string" && value !== "" ? value : undefined
}

/**
 * Parses `MCP_CONFORMANCE_CONTEXT`; absent means an empty context, anything but a JSON object is an error.
 *
 * @see {@link https://github.com/modelcontextprotocol/conformance | MCP conformance suite}
 */
export const parseContext = (raw: string | undefined): ConformanceContext => {
  if (raw === undefined || raw.trim() === "") return {}
  let parsed: unknown
  try {
    parsed = JSON.parse(raw)
  } catch {
    throw new Error("MCP_CONFORMANCE_CONTEXT is not valid JSON")
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw new Error("MCP_CONFORMANCE_CONTEXT is not a JSON object")
  }
  const record = parsed as Record<string, unknown>
  const context: Record<string, string> = {}
  for (const key of ["name", "client_id", "client_secret", "private_key_pem", "signing_algorithm", "valid_jwt"]) {
    const value = stringField(record, key)
    if (value !== undefined) context[key] = value
  }
  for (const key of ["idp_client_id", "idp_id_token", "idp_issuer", "idp_token_endpoint"]) {
    const value = stringField(record, key)
    if (value !== undefined) context[key] = value
  }
  return context
}
