import { Storage } from "@keyway/authorization-server"
import { type PostgresServer, startPostgres } from "@keyway/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { authorizeDevice, type DeviceServer, decide, MCP, poll, startDeviceServer } from "./support/asServer.js"

// Two instances behind one issuer on one PostgreSQL database: the device authorization is asked at one, approved and
// redeemed at the other.
let postgres: PostgresServer
let first: DeviceServer
let second: DeviceServer

beforeAll(async () => {
  postgres = await startPostgres()
  const storage = () => Storage.layerPostgres({ connectionString: postgres.url, schema: "device_scale_out" })
  first = await startDeviceServer({ storage: storage() })
  second = await startDeviceServer({ storage: storage(), issuer: first.issuer })
}, 120_000)
afterAll(async () => {
  await second?.close()
  await first?.close()
  postgres?.stop()
})

describe("two instances on one PostgreSQL", () => {
  it("share the device authorization: asked at one, pending, slowed, approved and redeemed once at the other", async () => {
    const device = await authorizeDevice(first.url, { scope: "tools:read" })
    expect((await (await poll(second.url, device.device_code)).json()).error).toBe("authorization_pending")
    // The poll at the second instance counts at the first: polling again at once is too fast.
    expect((await (await poll(first.url, device.device_code)).json()).error).toBe("slow_down")
    const decided = await decide(second.url, device.user_code, "approve")
    expect(decided.html).toContain('<h1 data-finished="approved">Device connected</h1>')
    await first.adjust(10)
    await second.adjust(10)
    const issued = await poll(second.url, device.device_code)
    expect(issued.status).toBe(200)
    const tokens = await issued.json()
    const claims = JSON.parse(Buffer.from(tokens.access_token.split(".")[1], "base64url").toString())
    expect(claims).toMatchObject({ iss: first.issuer, sub: "alice", aud: MCP, scope: "tools:read" })
    expect(await (await poll(first.url, device.device_code)).json()).toEqual({
      error: "invalid_grant",
      error_description: "the device code is invalid",
    })
    // The refresh token works at the first instance.
    const refreshed = await fetch(`${first.url}/token`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ grant_type: "refresh_token", client_id: "-tv", refresh_token: tokens.refresh_token }),
    })
    expect(refreshed.status).toBe(200)
  })
})
