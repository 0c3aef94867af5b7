import { Result } from "effect"
import type { AuthorizationServerExtension } from "../Extension.js"
import { isClientMember } from "../storage/internal/common.js"

/**
 * What extensions add to clients and tokens, read generically: the client metadata fields they declare (kept by
 * registration and client ID metadata documents, validated by the declaring extension's schema) and the confirmation
 * members whose token types introspection reports.
 */

type Extensions = ReadonlyArray<AuthorizationServerExtension>

// Members of registration requests and responses that are not stored client metadata (RFC 7591 §2.3, §3.2.1; RFC 7592
// §3): no extension may declare them either.
const RESPONSE_MEMBERS: ReadonlySet<string> = new Set([
  "client_secret",
  "registration_access_token",
  "registration_client_uri",
  "software_statement",
])

/**
 * Why the extensions cannot be served together (a client metadata field or confirmation member declared twice, or a
 * field the server defines itself), or undefined.
 */
export const declarationProblem = (extensions: Extensions): string | undefined => {
  const fields = new Map<string, string>()
  const members = new Map<string, string>()
  for (const extension of extensions) {
    for (const name of Object.keys(extension.clientMetadata ?? {})) {
      if (isClientMember(name) || RESPONSE_MEMBERS.has(name)) {
        return `${extension.id} declares the client metadata field ${name}, which the server defines itself`
      }
      const other = fields.get(name)
      if (other !== undefined) return `${other} and ${extension.id} both declare the client metadata field ${name}`
      fields.set(name, extension.id)
    }
    for (const member of Object.keys(extension.confirmations ?? {})) {
      const other = members.get(member)
      if (other !== undefined) return `${other} and ${extension.id} both declare the confirmation member ${member}`
      members.set(member, extension.id)
    }
  }
  return undefined
}

/** A declared field whose value its schema refused: the path inside the document, and what is wrong. */
export interface FieldProblem {
  readonly path: string
  readonly problem: string
}

/**
 * The client metadata fields of `document` that some extension declares, each as its schema reads it; undefined when
 * the document has none, or the first field a schema refuses. Fields no extension declares are left out.
 */
export const declaredFields = (
  document: Readonly<Record<string, unknown>>,
  extensions: Extensions,
): Result.Result<Readonly<Record<string, unknown>> | undefined, FieldProblem> => {
  const fields: Record<string, unknown> = {}
  let found = false
  for (const extension of extensions) {
    for (const [name, schema] of Object.entries(extension.clientMetadata ?? {})) {
      if (!Object.hasOwn(document, name)) continue
      const parsed = schema.safeParse(document[name])
      if (!parsed.success) {
        const issue = parsed.error.issues[0]
        return Result.fail({
          path: [name, ...(issue?.path ?? []).map(String)].join("."),
          problem: issue?.message ?? "is invalid",
        })
      }
      fields[name] = parsed.data
      found = true
    }
  }
  return Result.succeed(found ? fields : undefined)
}

/**
 * The `token_type` of an access token with this `cnf` claim (RFC 7800 §3.1): the type the extension declaring one of
 * its members gives it, `Bearer` when no extension's member confirms it.
 */
export const tokenType = (extensions: Extensions, cnf: Readonly<Record<string, unknown>> | undefined): string => {
  if (cnf !== undefined) {
    for (const extension of extensions) {
      for (const [member, type] of Object.entries(extension.confirmations ?? {})) {
        if (cnf[member] !== undefined) return type
      }
    }
  }
  return "Bearer"
}
