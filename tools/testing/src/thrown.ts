/**
 * What a synchronous call throws, to assert on it whole (its class and every field), or `undefined` when it returns.
 *
 * @module
 */
export const thrownBy = (call: () => unknown): unknown => {
  try {
    call()
  } catch (error) {
    return error
  }
  return undefined
}
