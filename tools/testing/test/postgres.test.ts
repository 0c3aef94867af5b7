import pg from "pg"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type PostgresServer, startPostgres } from "../src/postgres.js"

describe("startPostgres", () => {
  let server: PostgresServer
  beforeAll(async () => {
    server = await startPostgres()
  })
  afterAll(() => server?.stop())

  it("serves SQL on 127.0.0.1 and creates separate databases", async () => {
    expect(server.host).toBe("127.0.0.1")
    const url = server.createDatabase("keyway_probe")
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      const result = await client.query<{ db: string; addr: string }>(
        "select current_database() as db, inet_server_addr()::text as addr",
      )
      expect(result.rows[0]).toEqual({ db: "keyway_probe", addr: "127.0.0.1/32" })
    } finally {
      await client.end()
    }
  })

  it("refuses a database name that is not a plain identifier", () => {
    expect(() => server.createDatabase("x; drop")).toThrow("database name must match [a-z_][a-z0-9_]*: x; drop")
  })
})
