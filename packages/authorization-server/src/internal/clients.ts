import { Effect } from "effect"
import type { StorageError } from "../storage/Errors.js"
import { type Client, ClientStore } from "../storage/Storage.js"

/**
 * The one place the authorization and token endpoints look a client up; `undefined` when it is unknown.
 * URL-formatted client IDs (client ID metadata documents) plug in here.
 */
export const findClient = (clientId: string): Effect.Effect<Client | undefined, StorageError, ClientStore> =>
  Effect.gen(function* () {
    const clients = yield* ClientStore
    return yield* clients
      .get(clientId, Math.floor(Date.now() / 1000))
      .pipe(Effect.catchTag("ClientNotFound", () => Effect.succeed(undefined)))
  })
