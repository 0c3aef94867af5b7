/**
 * Assertions on OAuth error responses (RFC 6749 §5.2, and the endpoints that answer in its shape: RFC 7009, RFC 7591,
 * RFC 7662), for every package's tests: one helper instead of one per test file.
 *
 * @module
 */
import { expect } from "vitest"

/**
 * Asserts that `response` is the OAuth error expected: `status`, `Cache-Control: no-store`, a JSON body
 * (`application/json`) with that `error` code. A string `description` is the exact `error_description`, and then the
 * body must be exactly `error` and `error_description`; a pattern must match it; left out, any description (or none)
 * is accepted. Reads the body.
 */
export const expectOAuthError = async (
  response: Response,
  status: number,
  error: string,
  description?: string | RegExp,
): Promise<void> => {
  expect(response.status).toBe(status)
  expect(response.headers.get("cache-control")).toBe("no-store")
  expect(response.headers.get("content-type")).toBe("application/json")
  const body = (await response.json()) as Record<string, unknown>
  if (typeof description === "string") {
    expect(body).toEqual({ error, error_description: description })
    return
  }
  expect(body.error).toBe(error)
  if (description !== undefined) expect(body.error_description).toMatch(description)
}
