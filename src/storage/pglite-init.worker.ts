/**
 * Worker thread that creates a new embedded database (initdb) in the folder it is given, then
 * exits: initdb's WebAssembly instance and memory (~500 MB) go away with the thread, so the service
 * that then opens the database keeps only the server's own instance.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';

async function initialize(dir: string): Promise<void> {
  const pglite = await PGlite.create(dir);
  await pglite.close();
  parentPort?.postMessage('created');
}

// No top-level await: under tsx, worker modules are loaded as CommonJS (src/common/worker-url.ts).
void initialize((workerData as { dir: string }).dir);
