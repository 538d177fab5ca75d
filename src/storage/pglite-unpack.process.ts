/**
 * Child process that unpacks a migrated embedded-database archive, read from its standard input,
 * into the folder given as its argument, then exits 0 (1 with the error on stderr). A process of
 * its own so that the memory of unpacking 40 MB (buffers, allocator arenas) leaves with it instead
 * of staying resident in the service; it loads neither PGlite nor its WebAssembly, so it starts in
 * a fraction of a second (src/storage/pglite-init.process.ts runs initdb where there is no archive).
 */
import { mkdir } from 'node:fs/promises';
import { OWNER_DIR_MODE } from '../common/owner-only.js';
import { unpackPgliteArchive } from './pglite-archive.js';

// The service that started this process is gone (its IPC channel closed): stop, it will not use it.
process.on('disconnect', () => process.exit(1));

const dir = process.argv[2];
if (dir === undefined) {
  console.error('usage: pglite-unpack.process <database folder> < archive');
  process.exitCode = 1;
} else {
  mkdir(dir, { mode: OWNER_DIR_MODE })
    .then(() => unpackPgliteArchive(process.stdin, dir))
    .then(
      () => process.exit(0),
      (err: unknown) => {
        console.error(err);
        process.exit(1);
      },
    );
}
