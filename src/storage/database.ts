/**
 * The metadata-store port: one Kysely database (PostgreSQL dialect) with versioned migrations, served
 * by embedded PGlite under DATA_DIR by default (`database.pglite.ts`, the engine in a worker thread
 * of its own) or by a PostgreSQL server when DATABASE_URL is set (`database.postgres.ts`). Only those
 * two adapters (and the embedded one's worker) import PGlite or pg; each is loaded on demand, so a
 * scale-out node never loads the embedded engine and vice versa.
 */
import { Migrator, sql, type Kysely, type MigrationProvider } from 'kysely';
import { migrations } from './migrations/index.js';
import type { Database } from './schema.js';

/** An open, migrated service database: the Kysely instance the stores share, and how to close it. */
export interface DatabaseHandle {
  readonly db: Kysely<Database>;
  readonly kind: 'pglite' | 'postgres';
  /**
   * Runs `work`, the body of a transaction that no request waits for (the embedded database's
   * warm-up), as background work: the answers to its statements are taken from this thread's event
   * loop, never waited for on the spot, so the transaction does not hold the loop (on the embedded
   * database it still holds the one session). Call it inside the transaction. PostgreSQL's
   * statements are never waited for on the spot.
   */
  inBackground<T>(work: () => Promise<T>): Promise<T>;
  /** Closes connections (and, embedded, the engine and the DATA_DIR lock). Safe to call twice. */
  close(): Promise<void>;
}

/** Where the database lives and how to open it; `databaseUrl` picks the PostgreSQL adapter. */
export interface OpenDatabaseOptions {
  dataDir: string;
  databaseUrl?: string | undefined;
  /** A PGlite data-dir dump (from `createPgliteTemplate`) to start a new embedded database from, skipping initdb. */
  pgliteTemplate?: Blob | File | undefined;
  /** Embedded: the database's page cache (shared_buffers) in MiB (default 16). */
  embeddedCacheMb?: number | undefined;
  /** Embedded: keep the database in memory, lost on close (see database.pglite.ts). */
  embeddedInMemory?: boolean | undefined;
  /** PostgreSQL: connections in the pool (default 10). */
  poolSize?: number | undefined;
  /** PostgreSQL: how long a starting node waits for another node's migration run (default 5 minutes). */
  migrationLockTimeoutMs?: number | undefined;
}

const provider: MigrationProvider = { getMigrations: async () => migrations };

/**
 * Applies every pending migration through Kysely's migrator; throws with the failing migration's
 * name. Several processes on one PostgreSQL server must go through `openDatabase`, which serialises
 * them (see database.postgres.ts).
 */
export async function migrateToLatest(db: Kysely<Database>): Promise<void> {
  if (await upToDate(db)) return;
  const { error, results } = await new Migrator({ db, provider }).migrateToLatest();
  if (error !== undefined) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(`database migration ${failed} failed`, { cause: error });
  }
}

/**
 * Whether every migration of this build is recorded and nothing else is: one read instead of the
 * migrator's dozen statements (table checks, its lock, the list) at every start of a database that
 * is already current. Anything else — no migration table yet, a migration missing, one this build
 * does not know — goes through the migrator, which applies or reports it.
 */
async function upToDate(db: Kysely<Database>): Promise<boolean> {
  try {
    const { rows } = await sql<{ name: string }>`select name from kysely_migration`.execute(db);
    const known = Object.keys(migrations);
    const recorded = new Set(rows.map((row) => row.name));
    return recorded.size === known.length && known.every((name) => recorded.has(name));
  } catch {
    return false;
  }
}

/** Opens (creating if needed) and migrates the database the options describe, with the adapter they select. */
export async function openDatabase(options: OpenDatabaseOptions): Promise<DatabaseHandle> {
  if (options.databaseUrl !== undefined) {
    const { openPostgresDatabase } = await import('./database.postgres.js');
    return openPostgresDatabase({
      url: options.databaseUrl,
      poolSize: options.poolSize,
      migrationLockTimeoutMs: options.migrationLockTimeoutMs,
    });
  }
  const { openPgliteDatabase } = await import('./database.pglite.js');
  return openPgliteDatabase({
    dataDir: options.dataDir,
    template: options.pgliteTemplate,
    cacheMb: options.embeddedCacheMb,
    inMemory: options.embeddedInMemory,
  });
}
