/** A protected MCP-ish server and its authorization server on loopback, torn down after each test. */

import {
  type AuthorizationServerOptions,
  type AuthorizationServerPeer,
  type ResourceServerOptions,
  type ResourceServerPeer,
  startAuthorizationServer,
  startResourceServer,
} from "@keyway/testing/peers"
import { afterEach } from "vitest"
import { type CreateOptions, createAuthClient, type PlainAuthClient } from "../../src/AuthClient.js"
import { headless } from "../../src/UserAgent.js"

const cleanups: Array<() => Promise<void>> = []

afterEach(async () => {
  while (cleanups.length > 0) await cleanups.pop()?.()
})

export const track = (cleanup: () => Promise<void>): void => {
  cleanups.push(cleanup)
}

export interface World {
  readonly as: AuthorizationServerPeer
  readonly rs: ResourceServerPeer
  readonly client: PlainAuthClient
}

export const world = async (
  setup: {
    readonly as?: AuthorizationServerOptions
    readonly rs?: Omit<ResourceServerOptions, "lookup"> & { readonly lookup?: ResourceServerOptions["lookup"] }
    readonly client?: CreateOptions | ((as: AuthorizationServerPeer) => CreateOptions)
  } = {},
): Promise<World> => {
  const as = await startAuthorizationServer(setup.as)
  track(as.close)
  const rs = await startResourceServer({
    authorizationServers: () => [as.issuer],
    lookup: as.lookup,
    ...setup.rs,
  })
  track(rs.close)
  const clientOptions = typeof setup.client === "function" ? setup.client(as) : setup.client
  const client = createAuthClient({ userAgent: headless(), ...clientOptions })
  track(client.dispose)
  return { as, rs, client }
}

/** Awaits a promise expected to reject and returns the rejection. */
export const rejection = async (promise: Promise<unknown>): Promise<unknown> => {
  try {
    await promise
  } catch (error) {
    return error
  }
  throw new Error("expected a rejection")
}
