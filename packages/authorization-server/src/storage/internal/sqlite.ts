/**
 * The SQLite driver (`node:sqlite`, synchronous): migrations, opening a file or `:memory:`, and running a unit of
 * work. A unit of work runs to its end without yielding, inside `BEGIN IMMEDIATE` when it is a transaction, so it is
 * atomic within this process and, through SQLite's write lock, against every other connection to the file.
 *
 * On a file, units of work that write are committed in groups ({@link GroupCommit}): those queued in one turn of the
 * event loop run together at its end, each in its own savepoint of one transaction, and each outcome is handed out only
 * after that transaction's one `COMMIT` and one flush of the WAL to disk, done off the event loop; single-statement
 * reads run at once (no transaction is open between groups, so they see committed data only) and are answered once
 * that data is on disk too.
 */
import { closeSync, fdatasync, openSync } from "node:fs"
import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite"
import { Effect } from "effect"
import { StorageError } from "../Errors.js"
import type { SqliteOptions } from "../Storage.js"
import {
  bareTables,
  type Driver,
  driveSync,
  type Migration,
  type Mode,
  message,
  type Statement,
  type Work,
} from "./sql.js"
import { oneLiveGrantPerAuthorization } from "./store.js"

/** Schema changes, applied in order, each once, each in its own transaction. Never edit a released entry. */
export const MIGRATIONS: ReadonlyArray<Migration> = [
  {
    version: 1,
    name: "initial",
    sql: `
      CREATE TABLE clients (
        client_id TEXT PRIMARY KEY,
        origin TEXT NOT NULL,
        expires_at INTEGER,
        client_secret_expires_at INTEGER NOT NULL,
        client_secret_hash TEXT,
        registration_access_token_hash TEXT,
        metadata TEXT NOT NULL
      ) STRICT;
      CREATE INDEX clients_expires_at ON clients (expires_at) WHERE expires_at IS NOT NULL;

      CREATE TABLE grants (
        grant_id TEXT PRIMARY KEY,
        client_id TEXT NOT NULL,
        subject TEXT NOT NULL,
        resource TEXT NOT NULL,
        scope TEXT NOT NULL,
        auth_time INTEGER NOT NULL,
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
      ) STRICT;

      CREATE TABLE authorization_codes (
        code_hash TEXT PRIMARY KEY,
        grant_id TEXT NOT NULL REFERENCES grants (grant_id),
        client_id TEXT NOT NULL,
        redirect_uri TEXT NOT NULL,
        code_challenge TEXT NOT NULL,
        code_challenge_method TEXT NOT NULL,
        resource TEXT NOT NULL,
        scope TEXT NOT NULL,
        subject TEXT NOT NULL,
        auth_time INTEGER NOT NULL,
        issued_at INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        nonce TEXT,
        consumed_at INTEGER
      ) STRICT;
      CREATE INDEX authorization_codes_grant ON authorization_codes (grant_id);
      CREATE INDEX authorization_codes_expires_at ON authorization_codes (expires_at);

      CREATE TABLE access_tokens (
        jti TEXT PRIMARY KEY,
        grant_id TEXT NOT NULL REFERENCES grants (grant_id),
        expires_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX access_tokens_grant ON access_tokens (grant_id);
      CREATE INDEX access_tokens_expires_at ON access_tokens (expires_at);

      CREATE TABLE revoked_access_tokens (
        jti TEXT PRIMARY KEY,
        expires_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX revoked_access_tokens_expires_at ON revoked_access_tokens (expires_at);

      CREATE TABLE refresh_families (
        family_id TEXT PRIMARY KEY,
        grant_id TEXT NOT NULL REFERENCES grants (grant_id),
        created_at INTEGER NOT NULL,
        revoked_at INTEGER
      ) STRICT;
      CREATE INDEX refresh_families_grant ON refresh_families (grant_id);

      CREATE TABLE refresh_tokens (
        token_hash TEXT PRIMARY KEY,
        family_id TEXT NOT NULL REFERENCES refresh_families (family_id),
        scope TEXT NOT NULL,
        issued_at INTEGER NOT NULL,
        expires_at INTEGER,
        rotated_at INTEGER
      ) STRICT;
      CREATE INDEX refresh_tokens_family ON refresh_tokens (family_id);

      CREATE TABLE consents (
        subject TEXT NOT NULL,
        client_id TEXT NOT NULL,
        resource TEXT NOT NULL,
        scopes TEXT NOT NULL,
        granted_at INTEGER NOT NULL,
        PRIMARY KEY (subject, client_id, resource)
      ) STRICT;

      CREATE TABLE assertion_jtis (
        client_id TEXT NOT NULL,
        jti TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (client_id, jti)
      ) STRICT;
      CREATE INDEX assertion_jtis_expires_at ON assertion_jtis (expires_at);

      CREATE TABLE signing_keys (
        kid TEXT PRIMARY KEY,
        alg TEXT NOT NULL,
        private_jwk TEXT NOT NULL,
        public_jwk TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        activates_at INTEGER NOT NULL,
        retires_at INTEGER,
        status TEXT NOT NULL
      ) STRICT;
    `,
  },
  {
    version: 2,
    name: "token-lifecycle",
    // redirect_uri_sent: whether the authorization request carried redirect_uri, so the token request must (OAuth 2.1
    // §4.1.3). successor_salt: set when a refresh token is rotated; with the presented token it derives the successor
    // again, so a retry within the reuse interval gets the same one (codes and tokens from before stay as they were).
    sql: `
      ALTER TABLE authorization_codes ADD COLUMN redirect_uri_sent INTEGER NOT NULL DEFAULT 0;
      ALTER TABLE refresh_tokens ADD COLUMN successor_salt TEXT;
    `,
  },
  {
    version: 3,
    name: "rate-limits",
    // One row per abuse-limit bucket (a hashed account name, address, client ID or host): its count, the end of its
    // lock (0 for none), and when it is forgotten (the purge deletes it then).
    sql: `
      CREATE TABLE rate_limits (
        bucket TEXT PRIMARY KEY,
        hits INTEGER NOT NULL,
        blocked_until INTEGER NOT NULL,
        expires_at INTEGER NOT NULL
      ) STRICT;
      CREATE INDEX rate_limits_expires_at ON rate_limits (expires_at);
    `,
  },
  {
    version: 4,
    name: "token-confirmation",
    // confirmation: what a token request must prove to redeem the code (DPoP's dpop_jkt, RFC 9449 §10) or to use the
    // family's refresh tokens (the key a public client's refresh tokens are bound to, RFC 9449 §5); NULL for none.
    sql: `
      ALTER TABLE authorization_codes ADD COLUMN confirmation TEXT;
      ALTER TABLE refresh_families ADD COLUMN confirmation TEXT;
    `,
  },
  {
    version: 5,
    name: "one-grant-per-authorization",
    // One live grant per subject, client and resource, whose scope grows with each authorization. authorized_at: when
    // the latest authorization merged into a grant was given (its last use when no refresh token came after).
    // refresh_families.auth_time: the authentication a family comes from, kept when later authorizations move the
    // grant's. The live grants sharing those three are then merged into one and the unique index created
    // (oneLiveGrantPerAuthorization, written once for both databases).
    sql: `
      ALTER TABLE grants ADD COLUMN authorized_at INTEGER;
      UPDATE grants SET authorized_at = created_at;
      ALTER TABLE refresh_families ADD COLUMN auth_time INTEGER;
      UPDATE refresh_families SET auth_time = (SELECT g.auth_time FROM grants g WHERE g.grant_id = refresh_families.grant_id);
    `,
    work: oneLiveGrantPerAuthorization,
  },
  {
    version: 6,
    name: "issuer",
    // The issuer this database serves, recorded on the first start: its clients, keys and tokens are that issuer's,
    // so a start for another issuer is refused (Config.previousIssuer moves it).
    sql: `
      CREATE TABLE issuer (
        id INTEGER PRIMARY KEY CHECK (id = 1),
        issuer TEXT NOT NULL,
        recorded_at INTEGER NOT NULL
      ) STRICT;
    `,
  },
  {
    version: 7,
    name: "extension-records",
    // The extensions' short-lived state (a device authorization waiting for its user, RFC 8628 §3.2): one row per
    // namespace and hashed key, its JSON value, a version for compare-and-set, and when it stops existing.
    sql: `
      CREATE TABLE extension_records (
        namespace TEXT NOT NULL,
        key_hash TEXT NOT NULL,
        value TEXT NOT NULL,
        version INTEGER NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (namespace, key_hash)
      ) STRICT;
      CREATE INDEX extension_records_expires_at ON extension_records (expires_at);
    `,
  },
]

/** Runs `f` in one `BEGIN IMMEDIATE` transaction: the write lock is taken up front, so no upgrade deadlock. */
const transaction = <A>(db: DatabaseSync, f: () => A): A => {
  db.exec("BEGIN IMMEDIATE")
  try {
    const result = f()
    db.exec("COMMIT")
    return result
  } catch (error) {
    if (db.isTransaction) db.exec("ROLLBACK")
    throw error
  }
}

/**
 * Opens (creating if needed) and migrates a database; `now` (NumericDate seconds, from the caller's clock) stamps the
 * migrations applied. Throws on failure.
 */
export const open = (options: SqliteOptions, now: number): DatabaseSync => {
  const timeout = options.busyTimeoutMs ?? 5000
  const db = new DatabaseSync(options.path, { timeout, enableForeignKeyConstraints: true })
  try {
    db.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.trunc(timeout))}`)
    db.exec("PRAGMA journal_mode = WAL")
    // FULL, not NORMAL: a consumed code or rotated token must stay consumed after a power loss.
    db.exec("PRAGMA synchronous = FULL")
    db.exec("PRAGMA foreign_keys = ON")
    migrate(db, now)
    return db
  } catch (error) {
    db.close()
    throw error
  }
}

/**
 * A second connection to an opened (so migrated) file for the rate limiter, with `synchronous = NORMAL`: in WAL mode
 * its commits are not flushed to disk one by one, which takes most of the cost of counting every token request. A
 * power loss may forget the last counts, never corrupt the file; codes and tokens keep their own `FULL` connection.
 * A `:memory:` database cannot be shared between connections: the store's own connection is used.
 */
export const openLimiterConnection = (options: SqliteOptions, store: DatabaseSync): DatabaseSync => {
  if (options.path === ":memory:" || options.path === "") return store
  const timeout = options.busyTimeoutMs ?? 5000
  const db = new DatabaseSync(options.path, { timeout })
  try {
    db.exec(`PRAGMA busy_timeout = ${Math.max(0, Math.trunc(timeout))}`)
    db.exec("PRAGMA synchronous = NORMAL")
    return db
  } catch (error) {
    db.close()
    throw error
  }
}

const migrate = (db: DatabaseSync, now: number) => {
  db.exec(
    "CREATE TABLE IF NOT EXISTS keyway_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)",
  )
  const known = MIGRATIONS.at(-1)?.version ?? 0
  for (const m of MIGRATIONS) {
    // Checked inside the transaction, so two processes opening a new file at once apply each migration once.
    transaction(db, () => {
      const row = db.prepare("SELECT MAX(version) AS v FROM keyway_migrations").get()
      const current = Number(row?.v ?? 0)
      if (current > known) {
        throw new Error(`database schema version ${current} is newer than this Keyway (knows up to ${known})`)
      }
      if (current >= m.version) return
      db.exec(m.sql)
      if (m.work !== undefined) driveSync(m.work(bareTables), executor(db))
      db.prepare("INSERT INTO keyway_migrations (version, name, applied_at) VALUES (?, ?, ?)").run(
        m.version,
        m.name,
        now,
      )
    })
  }
}

/** Statements prepared once per connection (SQL in the shared dialect, `$1` rewritten to `?1`) and run. */
const executor = (db: DatabaseSync) => {
  const prepared = new Map<string, StatementSync>()
  return (statement: Statement): unknown => {
    let s = prepared.get(statement.sql)
    if (s === undefined) {
      // Shared SQL numbers its placeholders as PostgreSQL does ($1); SQLite spells them ?1.
      s = db.prepare(statement.sql.replace(/\$(\d+)/g, "?$1"))
      prepared.set(statement.sql, s)
    }
    const params = statement.params as Array<SQLInputValue>
    return statement.kind === "rows" ? s.all(...params) : Number(s.run(...params).changes)
  }
}

/** A driver over an open database, each unit of work committed on its own; statements are prepared once and reused. */
export const driver = (db: DatabaseSync): Driver => {
  const execute = executor(db)
  const begin = db.prepare("BEGIN IMMEDIATE")
  const commit = db.prepare("COMMIT")
  const rollback = db.prepare("ROLLBACK")
  const transaction = <A>(f: () => A): A => {
    begin.run()
    try {
      const result = f()
      commit.run()
      return result
    } catch (error) {
      if (db.isTransaction) rollback.run()
      throw error
    }
  }
  return {
    tables: bareTables,
    // BEGIN IMMEDIATE already holds the database's write lock for the whole transaction.
    lock: () => "",
    textArray: (values) => JSON.stringify(values),
    run: (operation, mode, work) =>
      Effect.suspend(() => {
        try {
          return Effect.succeed(
            mode === "transaction" ? transaction(() => driveSync(work(), execute)) : driveSync(work(), execute),
          )
        } catch (error) {
          return Effect.fail(new StorageError({ operation, message: message(error) }))
        }
      }),
  }
}

/** What became of one unit of work in a group. */
type Outcome = { readonly ok: true; readonly value: unknown } | { readonly ok: false; readonly error: unknown }

/**
 * Group commit on one connection: units of work that write are queued, and at the end of the current turn of the
 * event loop (`setImmediate`) all those queued run in one `BEGIN IMMEDIATE` transaction, each whole and in its own
 * savepoint, so one that fails rolls back only itself; then one `COMMIT` serves them all. The write lock is held only
 * while a group runs, synchronously, as it was for a single transaction, so other connections and processes never
 * wait on a turn of this event loop.
 *
 * The flush to disk is the group's own: the connection runs with `synchronous = NORMAL` (SQLite does not flush the WAL
 * at commit), and after a `COMMIT` the group flushes the WAL file (`fdatasync`, what `synchronous = FULL` does inside
 * each commit) on libuv's thread pool, so the event loop goes on serving requests meanwhile, and groups that commit
 * while a flush is under way share the next one; only when its flush is done does each unit get its outcome (a failed
 * commit or flush fails them all, and a failed flush every later unit too). Reads wait for the flushes under way
 * ({@link GroupCommit.whenDurable}), so nothing read is answered before it is on disk either.
 */
export class GroupCommit {
  private queue: Array<{ readonly unit: () => unknown; readonly done: (outcome: Outcome) => void }> = []
  /** Whether a flush of the WAL is under way; `current` waits for it, `waiting` for the next. */
  private flushing = false
  private current: Array<(failure: unknown) => void> = []
  private waiting: Array<(failure: unknown) => void> = []
  /** Whether a group has committed since the last flush started. */
  private committedSinceFlush = false
  /** The error of a failed flush: every unit after it fails with it. */
  private broken: unknown
  private readonly flushWal: () => Promise<void>
  private readonly db: DatabaseSync
  private readonly begin: StatementSync
  private readonly end: StatementSync
  private readonly abort: StatementSync
  private readonly savepoint: StatementSync
  private readonly release: StatementSync
  private readonly undo: StatementSync
  readonly execute: (statement: Statement) => unknown

  /** `flushWal` flushes the database's WAL file to disk ({@link flushWal}); the group calls it after each commit. */
  constructor(db: DatabaseSync, flushWal: () => Promise<void>) {
    this.db = db
    this.flushWal = flushWal
    this.execute = executor(db)
    this.begin = db.prepare("BEGIN IMMEDIATE")
    this.end = db.prepare("COMMIT")
    this.abort = db.prepare("ROLLBACK")
    this.savepoint = db.prepare("SAVEPOINT keyway_unit")
    this.release = db.prepare("RELEASE keyway_unit")
    this.undo = db.prepare("ROLLBACK TO keyway_unit")
  }

  /** Queues `unit` for the next group; `done` gets its outcome once the group has committed (or failed). */
  submit(unit: () => unknown, done: (outcome: Outcome) => void): void {
    this.queue.push({ unit, done })
    if (this.queue.length === 1) setImmediate(() => this.flush())
  }

  /** Runs and commits the queued units now, and answers them once the WAL is flushed. */
  flush(): void {
    const group = this.queue
    if (group.length === 0) return
    this.queue = []
    const broken = this.broken
    const outcomes =
      broken === undefined
        ? this.runGroup(group.map((p) => p.unit))
        : group.map((): Outcome => ({ ok: false, error: broken }))
    const answer = (failure: unknown) => {
      for (let i = 0; i < group.length; i++) {
        const outcome = outcomes[i]!
        group[i]!.done(failure === undefined || !outcome.ok ? outcome : { ok: false, error: failure })
      }
    }
    if (outcomes.every((o) => !o.ok)) {
      answer(undefined)
      return
    }
    this.whenDurable(answer)
  }

  /**
   * Calls `f` once everything committed so far is on disk (with the error, if the flush failed). While a flush is under
   * way, the commits made since it started wait for the next one, which starts when it ends and covers them all: under
   * load, one flush serves several groups.
   */
  whenDurable(f: (failure: unknown) => void): void {
    if (this.flushing) {
      if (this.committedSinceFlush) this.waiting.push(f)
      else this.current.push(f)
    } else if (this.broken !== undefined || !this.committedSinceFlush) {
      f(this.broken)
    } else {
      this.flushing = true
      this.committedSinceFlush = false
      this.current = [f]
      this.startFlush()
    }
  }

  private startFlush() {
    this.flushWal().then(
      () => this.flushEnded(undefined),
      (error: unknown) => this.flushEnded(error),
    )
  }

  private flushEnded(failure: unknown) {
    // After a failed flush the kernel may have dropped the pages it could not write, so a later flush that succeeds
    // proves nothing about them: the store stops answering, as PostgreSQL does, until it is opened again.
    if (failure !== undefined) this.broken ??= failure
    const done = this.current
    if (this.broken !== undefined) {
      done.push(...this.waiting)
      this.waiting = []
      this.current = []
      this.flushing = false
    } else if (this.waiting.length > 0) {
      this.current = this.waiting
      this.waiting = []
      this.committedSinceFlush = false
      this.startFlush()
    } else {
      this.current = []
      this.flushing = false
    }
    for (const f of done) f(this.broken)
  }

  /** Commits and flushes what is queued, and waits for the flushes under way (before the connections close). */
  close(): Promise<void> {
    this.flush()
    return new Promise((resolve) => this.whenDurable(() => resolve()))
  }

  private runGroup(units: ReadonlyArray<() => unknown>): ReadonlyArray<Outcome> {
    const failAll = (error: unknown) => units.map((): Outcome => ({ ok: false, error }))
    try {
      this.begin.run()
    } catch (error) {
      return failAll(error)
    }
    const outcomes: Array<Outcome> = []
    for (const unit of units) {
      this.savepoint.run()
      try {
        outcomes.push({ ok: true, value: unit() })
        this.release.run()
      } catch (error) {
        outcomes.push({ ok: false, error })
        try {
          this.undo.run()
          this.release.run()
        } catch (lost) {
          // SQLite rolled the whole transaction back itself (I/O error, full disk): the group is lost.
          if (this.db.isTransaction) this.abort.run()
          return failAll(lost)
        }
      }
    }
    try {
      this.end.run()
    } catch (error) {
      if (this.db.isTransaction) this.abort.run()
      return failAll(error)
    }
    if (outcomes.some((o) => o.ok)) this.committedSinceFlush = true
    return outcomes
  }
}

/**
 * Prepares an opened (so migrated) file's store connection for a {@link GroupCommit}: `synchronous = NORMAL`, since
 * the group flushes the WAL itself, and a file descriptor of the WAL file for that (the file exists once the database
 * has been read in WAL mode, and stays while a connection is open). Throws on failure.
 */
export const openWal = (options: SqliteOptions, db: DatabaseSync): number => {
  db.prepare("SELECT COUNT(*) FROM keyway_migrations").get()
  const fd = openSync(`${options.path}-wal`, "r")
  db.exec("PRAGMA synchronous = NORMAL")
  return fd
}

/** Flushes the WAL file behind `fd` (from {@link openWal}) to disk, on libuv's thread pool. */
export const flushWal = (fd: number): Promise<void> =>
  new Promise((resolve, reject) => fdatasync(fd, (error) => (error === null ? resolve() : reject(error))))

/** Closes the descriptor from {@link openWal}. */
export const closeWal = (fd: number): void => closeSync(fd)

const isRead = (sql: string) => /^\s*SELECT\b/i.test(sql)

/**
 * A driver that commits in groups on `group`'s connection. A unit of work whose first statement is a `SELECT` and
 * that runs in autocommit mode reads at once, on the same connection: between groups it holds no transaction, so it
 * reads committed data only, and it is answered once what it read is on disk. Every other unit joins the next group,
 * and its outcome is handed out after that group has committed and been flushed, so no answer ever reports a change
 * that a crash could still take back.
 */
export const groupDriver = (group: GroupCommit): Driver => {
  const read = group.execute
  return {
    tables: bareTables,
    // The group's BEGIN IMMEDIATE holds the database's write lock while its units run.
    lock: () => "",
    textArray: (values) => JSON.stringify(values),
    run: <A>(operation: string, mode: Mode, work: () => Work<A>) =>
      Effect.suspend((): Effect.Effect<A, StorageError> => {
        const failed = (error: unknown) => new StorageError({ operation, message: message(error) })
        let unit: Work<A>
        let first: IteratorResult<Statement, A>
        try {
          unit = work()
          first = unit.next()
          if (first.done === true) return Effect.succeed(first.value)
          if (mode === "autocommit" && isRead(first.value.sql)) {
            const rows = driveSync(unit, read, first)
            // What was read may have been committed by a group whose flush is still under way.
            return Effect.callback<A, StorageError>((resume) =>
              group.whenDurable((failure) =>
                resume(failure === undefined ? Effect.succeed(rows) : Effect.fail(failed(failure))),
              ),
            )
          }
        } catch (error) {
          return Effect.fail(failed(error))
        }
        return Effect.callback<A, StorageError>((resume) => {
          group.submit(
            () => driveSync(unit, group.execute, first),
            (outcome) => resume(outcome.ok ? Effect.succeed(outcome.value as A) : Effect.fail(failed(outcome.error))),
          )
        })
      }),
  }
}
