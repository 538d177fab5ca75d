/**
 * Opens the service database: embedded PGlite under DATA_DIR by default, or a PostgreSQL server when
 * DATABASE_URL is set — one SQL dialect for both, through Kysely, with versioned migrations.
 */
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { Kysely, Migrator, PostgresDialect, type Dialect, type MigrationProvider } from 'kysely';
import { PGliteDialect } from 'kysely-pglite-dialect';
import pg from 'pg';
import { migrations } from './migrations/index.js';
import type { Database } from './schema.js';

export interface DatabaseHandle {
  readonly db: Kysely<Database>;
  readonly kind: 'pglite' | 'postgres';
  close(): Promise<void>;
}

export interface OpenDatabaseOptions {
  dataDir: string;
  databaseUrl?: string | undefined;
  /** A PGlite data-dir dump (from `dumpDataDir`) to start a new embedded database from, skipping initdb. */
  pgliteTemplate?: Blob | File | undefined;
}

const provider: MigrationProvider = { getMigrations: async () => migrations };

/** Applies every pending migration; throws with the failing migration's name. */
export async function migrateToLatest(db: Kysely<Database>): Promise<void> {
  const { error, results } = await new Migrator({ db, provider }).migrateToLatest();
  if (error !== undefined) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName ?? 'unknown';
    throw new Error(`database migration ${failed} failed`, { cause: error });
  }
}

/** Opens (creating if needed) and migrates the database described by the options. */
export async function openDatabase(options: OpenDatabaseOptions): Promise<DatabaseHandle> {
  let dialect: Dialect;
  let kind: DatabaseHandle['kind'];
  let pglite: PGlite | undefined;
  if (options.databaseUrl !== undefined) {
    dialect = new PostgresDialect({ pool: new pg.Pool({ connectionString: options.databaseUrl, max: 10 }) });
    kind = 'postgres';
  } else {
    const dir = join(options.dataDir, 'db');
    await mkdir(dir, { recursive: true });
    // A template only seeds a new database; an existing one is opened as it is.
    const isNew = !existsSync(join(dir, 'PG_VERSION'));
    pglite = await PGlite.create(
      dir,
      isNew && options.pgliteTemplate ? { loadDataDir: options.pgliteTemplate } : {},
    );
    dialect = new PGliteDialect(pglite);
    kind = 'pglite';
  }
  const db = new Kysely<Database>({ dialect });
  try {
    await migrateToLatest(db);
  } catch (err) {
    await db.destroy();
    throw err;
  }
  return {
    db,
    kind,
    close: async () => {
      await db.destroy();
      if (pglite !== undefined && !pglite.closed) await pglite.close();
    },
  };
}
