/**
 * A promise with its `resolve`, for a test to wait on an event instead of a time: a handler, a stream's producer or
 * a node event listener resolves it, the test awaits `promise`.
 *
 * @module
 */

/** A promise and the function that resolves it (the shape of ES2024's `Promise.withResolvers`, without rejection). */
export interface Deferred<T> {
  readonly promise: Promise<T>
  readonly resolve: (value: T) => void
}

/** A new {@link Deferred}; resolving it more than once keeps the first value. */
export const deferred = <T = void>(): Deferred<T> => {
  let resolve: (value: T) => void = () => undefined
  const promise = new Promise<T>((done) => {
    resolve = done
  })
  return { promise, resolve }
}
