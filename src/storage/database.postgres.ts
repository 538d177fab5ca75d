/**
 * Metadata-store adapter for a PostgreSQL server (scale-out): a pg pool behind Kysely. Many nodes may
 * start at once against one fresh database, so migrations run on one dedicated connection holding a
 * session-level advisory lock: one node applies them, the others wait and then find them applied.
 */
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { migrateToLatest, type DatabaseHandle } from './database.js';
import type { Database } from './schema.js';

/** Advisory-lock key of voicegen's migration runs (the bytes of "voicegen"); Kysely's own key differs. */
export const MIGRATION_ADVISORY_LOCK_KEY = 8534155694514333038n;

const DEFAULT_MIGRATION_LOCK_TIMEOUT_MS = 5 * 60_000;

/** Connection settings of the PostgreSQL adapter. */
export interface PostgresDatabaseOptions {
  url: string;
  poolSize?: number | undefined;
  migrationLockTimeoutMs?: number | undefined;
}

/** Connects a pool to the server and migrates it to the latest schema (safe when nodes start together). */
export async function openPostgresDatabase(options: PostgresDatabaseOptions): Promise<DatabaseHandle> {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolSize ?? 10,
    application_name: 'voicegen',
  });
  // An idle connection the server dropped (restart, failover) is removed by the pool and replaced on the
  // next query; without a listener its 'error' event would crash the process.
  pool.on('error', () => undefined);
  // A checked-out connection (between the statements of a transaction) that the server terminates
  // emits 'error' on the client itself, which the pool does not listen to while it is lent out; the
  // statement in flight or the next one fails and reports it, so the event itself is not needed.
  pool.on('connect', (client) => client.on('error', () => undefined));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  try {
    await migrateUnderAdvisoryLock(db, options.migrationLockTimeoutMs ?? DEFAULT_MIGRATION_LOCK_TIMEOUT_MS);
  } catch (err) {
    await db.destroy();
    throw err;
  }
  let closing: Promise<void> | undefined;
  return {
    db,
    kind: 'postgres',
    inBackground: (work) => work(),
    close: () => (closing ??= db.destroy()),
  };
}

/**
 * Runs Kysely's migrator with every statement on one connection that holds voicegen's session-level
 * advisory lock. Kysely's own run takes an advisory lock too, but only around applying migrations: it
 * first creates its bookkeeping tables and lock row with `create table if not exists` / insert on any
 * pool connection, which races between nodes (PostgreSQL reports duplicate keys in pg_type and in
 * kysely_migration_lock; Kysely catches and re-checks). Under our lock none of that runs concurrently.
 * The lock is a session lock, so a node that dies mid-run releases it with its connection.
 */
async function migrateUnderAdvisoryLock(db: Kysely<Database>, timeoutMs: number): Promise<void> {
  await db.connection().execute(async (connection) => {
    // lock_timeout set for this statement only (is_local in its implicit transaction), before it waits.
    const timeout = String(Math.max(1, Math.round(timeoutMs)));
    try {
      await sql`with set_timeout as (select set_config('lock_timeout', ${timeout}, true) as value)
        select pg_advisory_lock(${sql.lit(MIGRATION_ADVISORY_LOCK_KEY)}) from set_timeout`.execute(
        connection,
      );
    } catch (err) {
      if ((err as { code?: unknown }).code === '55P03') {
        throw new Error(
          `gave up after ${timeoutMs / 1000} s waiting for another node's database migration ` +
            `(advisory lock ${MIGRATION_ADVISORY_LOCK_KEY}); if no node is migrating, end the session holding ` +
            `it (see pg_locks where locktype = 'advisory')`,
          { cause: err },
        );
      }
      throw err;
    }
    try {
      await migrateToLatest(connection);
    } finally {
      await sql`select pg_advisory_unlock(${sql.lit(MIGRATION_ADVISORY_LOCK_KEY)})`.execute(connection);
    }
  });
}
