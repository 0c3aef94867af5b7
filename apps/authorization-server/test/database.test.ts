import { describe, expect, it } from "vitest"
import { databaseProblem, isPostgres, redactConnectionString } from "../src/internal/database.js"

describe("isPostgres", () => {
  it.each([
    ["postgres://db/keyway", true],
    ["postgresql://keyway@db:5432/keyway", true],
    ["POSTGRES://db/keyway", true],
    ["/var/lib/keyway/keyway.db", false],
    ["postgres.db", false],
    ["./postgres://weird", false],
  ])("%s: %s", (value, expected) => {
    expect(isPostgres(value)).toBe(expected)
  })
})

describe("databaseProblem", () => {
  it("accepts SQLite paths and PostgreSQL URLs", () => {
    for (const value of ["keyway.db", "/abs/keyway.db", "C:keyway.db", "postgres://u:p@h:1/d", "postgresql:///d"]) {
      expect(databaseProblem(value)).toBeUndefined()
    }
  })

  it("refuses URLs of other schemes and PostgreSQL strings that are not URLs", () => {
    expect(databaseProblem("postgress://db/keyway")).toBe(
      "must be a SQLite file path or a PostgreSQL connection string (postgres:// or postgresql://)",
    )
    expect(databaseProblem("postgres://u:p@[::1/d")).toBe(
      "is not a valid PostgreSQL connection string (postgres://user:password@host:port/database)",
    )
  })
})

describe("redactConnectionString", () => {
  it.each([
    ["postgres://keyway:s3cret@db.internal:5432/keyway", "postgres://keyway:***@db.internal:5432/keyway"],
    ["postgresql://keyway:p%40ss@db/keyway?sslmode=require", "postgresql://keyway:***@db/keyway?sslmode=require"],
    [
      "postgres://keyway@db/keyway?password=s3cret&sslpassword=k3y",
      "postgres://keyway@db/keyway?password=***&sslpassword=***",
    ],
    ["postgres://keyway@db/keyway", "postgres://keyway@db/keyway"],
    ["postgres://db/keyway", "postgres://db/keyway"],
  ])("%s -> %s", (input, expected) => {
    expect(redactConnectionString(input)).toBe(expected)
  })

  it("never prints what it cannot parse", () => {
    expect(redactConnectionString("postgres://u:s3cret@[::1/d")).toBe("postgres://(unparsable connection string)")
  })
})
