import { Clock, Effect } from "effect"

/**
 * The time of Effect's `Clock` in NumericDate seconds (as in JWT `iat`/`exp` and the stores): the endpoints, the
 * storage layers and the background jobs read this one clock, so a test drives all of them with `TestClock`.
 */
export const nowSeconds: Effect.Effect<number> = Effect.map(Clock.currentTimeMillis, (millis) =>
  Math.floor(millis / 1000),
)
