import { Context } from "effect"

/**
 * Called after every storage operation with its name (`ClientStore.get`, `GrantStore.refresh`, ...), how long it took
 * in seconds (Effect's `Clock`) and whether it succeeded at the storage level (a spec outcome such as an unknown
 * client counts as success; only a failing database does not).
 *
 * @see {@link https://prometheus.io/docs/practices/histograms/ | Prometheus: histograms}
 */
export type StorageObserverFn = (operation: string, seconds: number, ok: boolean) => void

/**
 * The storage-timing hook the stores call, if any; none by default. Provide it (`Layer.succeed(StorageObserver)(fn)`)
 * next to the storage layer to time the database.
 *
 * @see {@link https://prometheus.io/docs/practices/histograms/ | Prometheus: histograms}
 */
export const StorageObserver: Context.Reference<StorageObserverFn | undefined> = Context.Reference<
  StorageObserverFn | undefined
>("@keyway/authorization-server/StorageObserver", { defaultValue: () => undefined })
