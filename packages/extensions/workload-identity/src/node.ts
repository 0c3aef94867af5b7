/**
 * Workload assertions from the file system, for Node.js: the token a platform writes to a file and replaces before
 * it expires, such as a Kubernetes projected service account token or a SPIFFE JWT-SVID written by a helper. The main
 * entry stays Web-standard; this one uses `node:fs`.
 *
 * @see {@link https://kubernetes.io/docs/concepts/storage/projected-volumes/#serviceaccounttoken | Kubernetes projected service account tokens}
 * @see {@link https://github.com/spiffe/spiffe/blob/main/standards/JWT-SVID.md | SPIFFE JWT-SVID}
 * @packageDocumentation
 */
import { readFile } from "node:fs/promises"
import type { AssertionSource } from "./internal/client.js"

/**
 * An assertion source that reads the JWT from a file at every token request, so a rotated token is picked up as soon
 * as the platform replaces the file (surrounding whitespace is ignored). A missing or empty file fails that token
 * request with an `AuthError` (reason `invalid-input`) that names the file.
 *
 * @see {@link https://github.com/modelcontextprotocol/ext-auth/blob/main/specification/draft/workload-identity-federation.mdx#jwt-provisioning | MCP WIF: JWT provisioning}
 */
export const assertionFile =
  (path: string): Exclude<AssertionSource, string> =>
  async () => {
    let text: string
    try {
      text = await readFile(path, "utf8")
    } catch (cause) {
      throw new Error(`cannot read the token file ${path}: ${(cause as Error).message}`)
    }
    const jwt = text.trim()
    if (jwt === "") throw new Error(`the token file ${path} is empty`)
    return jwt
  }
