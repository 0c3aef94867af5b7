/**
 * The issuer a database serves (table `issuer`, one row), written once over the driver port: recorded on the first
 * start, checked on every later one, moved only when the configuration names the issuer it served before.
 */
import type { Effect } from "effect"
import type { StorageError } from "../Errors.js"
import { count, type Driver, row } from "./sql.js"

/** The record over `driver`'s database; see `Storage.IssuerRecord`. */
export const makeIssuerRecord = (
  driver: Driver,
): {
  readonly claim: (
    issuer: string,
    now: number,
    previous: string | undefined,
  ) => Effect.Effect<string | undefined, StorageError>
} => {
  const t = driver.tables.issuer
  const SELECT = `SELECT issuer FROM ${t} WHERE id = 1 ${driver.lock("update")}`
  return {
    claim: (issuer, now, previous) =>
      driver.run("IssuerRecord.claim", "transaction", function* () {
        let served = yield* row(SELECT)
        if (served === undefined) {
          // Two instances starting together on a new database: one inserts, the other waits for it and reads its row.
          const inserted = yield* count(
            `INSERT INTO ${t} (id, issuer, recorded_at) VALUES (1, $1, $2) ON CONFLICT (id) DO NOTHING`,
            [issuer, now],
          )
          if (inserted === 1) return undefined
          served = yield* row(SELECT)
          if (served === undefined) throw new Error("the issuer row vanished")
        }
        const recorded = served.issuer
        if (typeof recorded !== "string") throw new Error("column issuer: expected text")
        if (recorded !== issuer && previous !== undefined && recorded === previous) {
          yield* count(`UPDATE ${t} SET issuer = $1, recorded_at = $2 WHERE id = 1`, [issuer, now])
        }
        return recorded
      }),
  }
}
