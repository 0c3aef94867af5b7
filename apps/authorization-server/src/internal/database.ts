/**
 * The `database` setting names either a SQLite file or a PostgreSQL connection string; these helpers tell them apart
 * and describe the database for the logs without its password.
 *
 * @module
 */

const POSTGRES = /^postgres(?:ql)?:\/\//i
const ANY_SCHEME = /^[A-Za-z][A-Za-z0-9+.-]*:\/\//

/** Whether a `database` value is a PostgreSQL connection string (`postgres://…` or `postgresql://…`). */
export const isPostgres = (database: string | undefined): database is string =>
  database !== undefined && POSTGRES.test(database)

/**
 * Why a `database` value cannot be used, or undefined when it can: a URL of another scheme (a typo such as
 * `postgress://` would otherwise become a SQLite file of that name), or a PostgreSQL string that is not a URL.
 * The message never repeats the value, which may hold a password.
 */
export const databaseProblem = (database: string): string | undefined => {
  if (isPostgres(database)) {
    const url = URL.parse(database)
    return url === null
      ? "is not a valid PostgreSQL connection string (postgres://user:password@host:port/database)"
      : undefined
  }
  return ANY_SCHEME.test(database)
    ? "must be a SQLite file path or a PostgreSQL connection string (postgres:// or postgresql://)"
    : undefined
}

const HIDDEN = "***"

/**
 * A connection string fit for a log line: the password of the userinfo and any `password`-like query parameter
 * (libpq accepts `?password=`, `?sslpassword=`) are replaced with `***`.
 */
export const redactConnectionString = (connectionString: string): string => {
  const url = URL.parse(connectionString)
  // Unreachable for validated configuration; still, never print what could not be inspected.
  if (url === null) return "postgres://(unparsable connection string)"
  if (url.password !== "") url.password = HIDDEN
  const secretParams = [...url.searchParams.keys()].filter((name) => /password/i.test(name))
  for (const name of new Set(secretParams)) url.searchParams.set(name, HIDDEN)
  return url.href
}
