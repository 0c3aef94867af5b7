// A worker thread with its own SQLite connection: it opens the store, reports ready, blocks until the parent
// releases every worker at once, then makes one redemption or rotation and reports the outcome's tag.
import { registerHooks } from "node:module"
import { parentPort, workerData } from "node:worker_threads"

// The sources import each other with ".js" suffixes (TypeScript's convention); map them to the ".ts" files so Node's
// type stripping can load the sources directly.
registerHooks({
  resolve(specifier, context, next) {
    try {
      return next(specifier, context)
    } catch (error) {
      if (specifier.startsWith(".") && specifier.endsWith(".js")) return next(`${specifier.slice(0, -3)}.ts`, context)
      throw error
    }
  },
})

const { Context, Effect, Layer } = await import("effect")
const { GrantStore, layerSqlite } = await import("../../src/storage/index.ts")

const { path, op, gate, index } = workerData
const go = new Int32Array(gate)

const outcome = await Effect.runPromise(
  Effect.scoped(
    Effect.gen(function* () {
      const context = yield* Layer.build(layerSqlite({ path, busyTimeoutMs: 30_000 }))
      const grants = Context.get(context, GrantStore)
      parentPort.postMessage({ ready: true })
      Atomics.wait(go, 0, 0)
      const attempt =
        op.kind === "consume"
          ? grants.consumeCode(op.code, op.now)
          : grants.rotate({
              token: op.token,
              new_token: `${op.token}.next.${index}`,
              client_id: op.clientId,
              scope: op.scope,
              now: op.now,
            })
      return yield* Effect.match(attempt, {
        onSuccess: () => ({ tag: "Success", newToken: op.kind === "rotate" ? `${op.token}.next.${index}` : undefined }),
        onFailure: (error) => ({ tag: error._tag }),
      })
    }),
  ),
)
parentPort.postMessage(outcome)
