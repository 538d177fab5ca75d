/**
 * Worker thread that owns the embedded database (PGlite) of the service: it opens DATA_DIR/db and
 * answers the main thread's statements one at a time (src/storage/database.pglite.ts). PGlite runs
 * PostgreSQL in WebAssembly on the thread that calls it; here, a long statement no longer stops the
 * main thread from answering HTTP requests (issue 11, load and soak; issue 14, one-shot first byte).
 */
import { parentPort, workerData } from 'node:worker_threads';
import { PGlite } from '@electric-sql/pglite';
import {
  PGLITE_PARSERS,
  serializeDatabaseError,
  type PgliteRequest,
  type PgliteResponse,
  type PgliteWorkerData,
} from './pglite-protocol.js';

async function open(data: PgliteWorkerData): Promise<PGlite> {
  return PGlite.create(data.dir, {
    parsers: PGLITE_PARSERS,
    startParams: [...PGlite.defaultStartParams, '-c', `shared_buffers=${data.cacheMb}MB`],
    ...(data.template !== undefined ? { loadDataDir: new Blob([data.template]) } : {}),
  });
}

/** Runs one command and hands its answer to `answer` (never throws). */
function run(pglite: PGlite, request: PgliteRequest, answer: (response: PgliteResponse) => void): void {
  const failed = (err: unknown) => answer({ id: request.id, ok: false, error: serializeDatabaseError(err) });
  switch (request.op) {
    case 'query':
      pglite
        .query(request.sql, request.params)
        .then(
          (result) =>
            answer({ id: request.id, ok: true, rows: result.rows, affectedRows: result.affectedRows }),
          failed,
        );
      return;
    case 'close':
      pglite.close().then(() => answer({ id: request.id, ok: true, rows: [] }), failed);
      return;
  }
}

/**
 * Answers every command on the channel: the answer first, then the flag the caller may be waiting
 * on (it reads the answer at once, or later from its event loop). A closed database closes the
 * channel, which ends the thread.
 */
function serve(pglite: PGlite, data: PgliteWorkerData): void {
  data.port.on('message', (request: PgliteRequest) =>
    run(pglite, request, (response) => {
      data.port.postMessage(response);
      Atomics.store(data.answered, 0, 1);
      Atomics.notify(data.answered, 0);
      if (request.op === 'close' && response.ok) data.port.close();
    }),
  );
}

const data = workerData as PgliteWorkerData;
// No top-level await: under tsx, worker modules are loaded as CommonJS (src/common/worker-url.ts).
// Opening is announced on the thread's own port, the only message sent there.
open(data).then(
  (pglite) => {
    serve(pglite, data);
    parentPort?.postMessage({ id: 0, ok: true, rows: [] } satisfies PgliteResponse);
  },
  (err: unknown) => {
    parentPort?.postMessage({
      id: 0,
      ok: false,
      error: serializeDatabaseError(err),
    } satisfies PgliteResponse);
  },
);
