import { thrownBy } from "@keyway/testing"
import { Cause, Effect, Exit, Layer } from "effect"
import { expect } from "vitest"
import { AuthorizationServer, createAuthorizationServer } from "../../src/AuthorizationServer.js"
import { ConfigError } from "../../src/Config.js"
import { layerMemory } from "../../src/storage/Storage.js"
import { UserAuthenticator } from "../../src/UserAuthenticator.js"

/**
 * The message both faces refuse `options` with: the plain face's thrown `ConfigError` and the layer's typed failure
 * (never a defect), which must say the same.
 */
export const refusedByBothFaces = async (options: Record<string, unknown>): Promise<string> => {
  const plain = thrownBy(() => createAuthorizationServer(options as never))
  expect(plain).toBeInstanceOf(ConfigError)
  const exit = await Effect.runPromiseExit(
    Layer.build(
      AuthorizationServer.layer(options as never).pipe(
        Layer.provide(Layer.merge(layerMemory, UserAuthenticator.layerUsers([]))),
      ),
    ).pipe(Effect.scoped),
  )
  if (Exit.isSuccess(exit)) throw new Error("the layer was built")
  expect(Cause.hasDies(exit.cause)).toBe(false)
  const failure = Cause.squash(exit.cause)
  expect(failure).toBeInstanceOf(ConfigError)
  expect((failure as ConfigError).message).toBe((plain as ConfigError).message)
  return (plain as ConfigError).message
}
