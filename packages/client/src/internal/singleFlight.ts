/**
 * One run at a time per MCP server, on Effect's `Cache`: callers arriving while a run is under way share its
 * outcome, success or failure; nothing is kept once it ends (a time to live of zero), so the next caller runs anew.
 * @module
 */
import * as Cache from "effect/Cache"
import * as Duration from "effect/Duration"
import type * as Effect from "effect/Effect"
import * as Equal from "effect/Equal"
import * as Hash from "effect/Hash"

/**
 * The cache key of a run: the server's canonical URI, with what the run needs (the stale tokens, the authorization's
 * options). Keys are equal by server alone, so a caller that arrives during a run shares it and its own details are
 * not used.
 */
export class ForServer<A> implements Equal.Equal {
  constructor(
    readonly key: string,
    readonly value: A,
  ) {}

  [Equal.symbol](that: Equal.Equal): boolean {
    return that instanceof ForServer && that.key === this.key
  }

  [Hash.symbol](): number {
    return Hash.string(this.key)
  }
}

/** A cache that shares each server's run among the callers arriving while it runs, and keeps nothing after. */
export const singleFlight = <A, B, E>(
  run: (key: string, value: A) => Effect.Effect<B, E>,
): Effect.Effect<Cache.Cache<ForServer<A>, B, E>> =>
  Cache.makeWith((request: ForServer<A>) => run(request.key, request.value), {
    // Only runs under way are held: one per server at most.
    capacity: Number.POSITIVE_INFINITY,
    timeToLive: () => Duration.zero,
  })
