import { writeFile } from "node:fs/promises"
import { join } from "node:path"
import { type PostgresServer, startPostgres } from "@keyway/testing"
import { afterAll, beforeAll, describe, expect, it } from "vitest"
import { type AppConfig, loadConfig, type RunningAuthorizationServer, startAuthorizationServer } from "../src/index.js"
import { testCleanups } from "./support/cleanup.js"
import { codeFlow, PASSWORD, RESOURCE, registerClient, SCOPES } from "./support/flow.js"

let postgres: PostgresServer
beforeAll(async () => {
  postgres = await startPostgres()
}, 300_000)
afterAll(() => postgres?.stop())

const { defer, dir } = testCleanups()

/** The test server trusts every local connection: the password is accepted and ignored, as a real one would check it. */
const PG_PASSWORD = "pg-s3cret-never-logged"

let databases = 0
/** A fresh database, as a connection string with a password in its userinfo. */
const freshDatabase = () => {
  const url = new URL(postgres.createDatabase(`app_${++databases}`))
  url.password = PG_PASSWORD
  return url.href
}

const base = (database: string): AppConfig => ({
  port: 0,
  database,
  users: [{ username: "alice", password: PASSWORD }],
  resources: [{ uri: RESOURCE, scopes: SCOPES }],
})

const start = async (config: AppConfig, log: Array<string> = []): Promise<RunningAuthorizationServer> => {
  const running = await startAuthorizationServer(config, { log: (line) => log.push(line) })
  defer(running.close)
  return running
}

describe("PostgreSQL storage", () => {
  it("keeps a dynamically registered client across a restart; the log names the database without the password", async () => {
    const database = freshDatabase()
    const log: Array<string> = []
    const first = await startAuthorizationServer(base(database), { log: (line) => log.push(line) })
    const clientId = await registerClient(first.issuer)
    const port = first.port
    await first.close()
    const second = await start({ ...base(database), port }, log)
    expect(second.issuer).toBe(first.issuer)
    const tokens = await codeFlow(second.issuer, { clientId })
    expect(tokens.scope).toBe("notes:read")
    // Refused for an unknown client, so the success above is the stored registration at work.
    await expect(codeFlow(second.issuer, { clientId: "never-registered" })).rejects.toThrow("authorize answered 400")

    const redacted = database.replace(`:${PG_PASSWORD}@`, ":***@")
    expect(redacted).not.toBe(database)
    expect(log.filter((line) => line.startsWith("database "))).toEqual([`database ${redacted}`, `database ${redacted}`])
    for (const line of log) expect(line).not.toContain(PG_PASSWORD)
  })

  it("keeps each databaseSchema apart, and names the schema in the log", async () => {
    const database = freshDatabase()
    const log: Array<string> = []
    const first = await startAuthorizationServer(
      { ...base(database), databaseSchema: "tenant_a" },
      { log: (line) => log.push(line) },
    )
    const clientId = await registerClient(first.issuer)
    const port = first.port
    await first.close()
    expect(log).toContain(`database ${database.replace(`:${PG_PASSWORD}@`, ":***@")} (schema tenant_a)`)

    const otherSchema = await start({ ...base(database), databaseSchema: "tenant_b", port })
    await expect(codeFlow(otherSchema.issuer, { clientId })).rejects.toThrow("authorize answered 400")
    await otherSchema.close()
    const sameSchema = await start({ ...base(database), databaseSchema: "tenant_a", port })
    expect((await codeFlow(sameSchema.issuer, { clientId })).scope).toBe("notes:read")
  })

  it("--database takes a connection string over the file's SQLite path", async () => {
    const file = join(await dir(), "keyway.json")
    await writeFile(file, JSON.stringify({ ...base("keyway.db"), port: 9 }))
    const database = freshDatabase()
    const config = await loadConfig(["--config", file, "--port", "0", "--database", database], {})
    expect(config.database).toBe(database)
    const log: Array<string> = []
    const as = await start(config, log)
    expect(log).toContain(`database ${database.replace(`:${PG_PASSWORD}@`, ":***@")}`)
    expect(await registerClient(as.issuer)).toMatch(/./)
  })
})
