/**
 * Child process that creates a new embedded database (initdb) in the folder given as its argument
 * and applies every migration, then exits 0 (1 with the error on stderr). The memory initdb and the
 * migrations leave behind (WebAssembly, allocator and heap) goes away with the process: done in a
 * worker thread of the service, ~100 MiB of it stayed resident for its whole life; the service then
 * opens a database like on any restart. Used only where there is no migrated template to unpack
 * (the service run from src/): a compiled build carries one (see database.pglite.ts).
 */
import { PGlite } from '@electric-sql/pglite';
import { Kysely } from 'kysely';
import { migrateToLatest } from './database.js';
import { PgliteDialect } from './pglite-dialect.js';
import { PGLITE_PARSERS } from './pglite-protocol.js';
import type { Database } from './schema.js';

async function initialize(dir: string): Promise<void> {
  const pglite = await PGlite.create(dir, { parsers: PGLITE_PARSERS });
  const db = new Kysely<Database>({ dialect: new PgliteDialect(pglite) });
  try {
    await migrateToLatest(db);
  } finally {
    // Closes the database too.
    await db.destroy();
  }
}

// Only this process writes here, and everything it writes is the service owner's only (initdb
// itself asks for 0644 files): a umask for the whole process, whatever the one it inherited.
process.umask(0o077);

// The service that started this process is gone (its IPC channel closed): stop, it will not use it.
process.on('disconnect', () => process.exit(1));

const dir = process.argv[2];
if (dir === undefined) {
  console.error('usage: pglite-init.process <database folder>');
  process.exitCode = 1;
} else {
  initialize(dir).then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(err);
      process.exit(1);
    },
  );
}
