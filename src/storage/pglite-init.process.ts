/**
 * Child process that creates a new embedded database (initdb) in the folder given as its argument
 * and applies every migration, then exits 0 (1 with the error on stderr). The memory initdb and the
 * migrations leave behind (WebAssembly, allocator and heap) goes away with the process: done in a
 * worker thread of the service, ~100 MiB of it stayed resident for its whole life; the service then opens a database like on any restart. A compiled build carries a
 * migrated template made by `npm run build` (dist/pglite-template.tar.gz): the new database is
 * unpacked from it instead, which skips initdb (seconds of WebAssembly) on a first start and on
 * every in-process `voicegen synth`.
 */
import { readFile } from 'node:fs/promises';
import { PGlite } from '@electric-sql/pglite';
import { Kysely } from 'kysely';
import { migrateToLatest } from './database.js';
import { PgliteDialect } from './pglite-dialect.js';
import { PGLITE_PARSERS } from './pglite-protocol.js';
import type { Database } from './schema.js';

/** Where `npm run build` writes the template, beside the compiled modules (absent when run from src/). */
const BUILT_TEMPLATE = new URL('../pglite-template.tar.gz', import.meta.url);

async function initialize(dir: string): Promise<void> {
  const template = await readFile(BUILT_TEMPLATE).catch(() => undefined);
  const pglite = await PGlite.create(dir, {
    parsers: PGLITE_PARSERS,
    ...(template !== undefined && { loadDataDir: new Blob([template]) }),
  });
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
