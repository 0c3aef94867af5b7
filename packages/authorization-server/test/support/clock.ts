import { Clock, Effect, Layer } from "effect"

/** A controllable Effect clock: real time plus an offset the test moves forward; sleeping stays real. */
export interface OffsetClock {
  readonly layer: Layer.Layer<never>
  /** Moves the clock forward by `seconds`. */
  readonly advance: (seconds: number) => void
  /** The clock's time in NumericDate seconds. */
  readonly now: () => number
}

export const offsetClock = (): OffsetClock => {
  const real = Clock.Clock.defaultValue()
  let offsetMillis = 0
  const millis = () => real.currentTimeMillisUnsafe() + offsetMillis
  const nanos = () => real.currentTimeNanosUnsafe() + BigInt(offsetMillis) * 1_000_000n
  const clock: Clock.Clock = {
    currentTimeMillisUnsafe: millis,
    currentTimeMillis: Effect.sync(millis),
    currentTimeNanosUnsafe: nanos,
    currentTimeNanos: Effect.sync(nanos),
    monotonicTimeNanosUnsafe: () => real.monotonicTimeNanosUnsafe(),
    monotonicTimeNanos: real.monotonicTimeNanos,
    sleep: (duration) => real.sleep(duration),
  }
  return {
    layer: Layer.succeed(Clock.Clock)(clock) as Layer.Layer<never>,
    advance: (seconds) => {
      offsetMillis += seconds * 1000
    },
    now: () => Math.floor(millis() / 1000),
  }
}

/** Polls `check` every 20 ms until it holds; throws after a generous bound so a broken job cannot hang the run. */
export const eventually = async (check: () => Promise<boolean> | boolean, what: string): Promise<void> => {
  const deadline = Date.now() + 10_000
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`${what}: not reached within 10 s`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
