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
    ...(data.template !== undefined ? { loadDataDir: new Blob([data.template]) } : {}),
  });
}

function serve(pglite: PGlite): void {
  const port = parentPort;
  if (port === null) return;
  const answer = (response: PgliteResponse) => port.postMessage(response);
  port.on('message', (request: PgliteRequest) => {
    switch (request.op) {
      case 'query':
        pglite.query(request.sql, request.params).then(
          (result) =>
            answer({ id: request.id, ok: true, rows: result.rows, affectedRows: result.affectedRows }),
          (err: unknown) => answer({ id: request.id, ok: false, error: serializeDatabaseError(err) }),
        );
        return;
      case 'close':
        pglite.close().then(
          () => {
            answer({ id: request.id, ok: true, rows: [] });
            port.close();
          },
          (err: unknown) => answer({ id: request.id, ok: false, error: serializeDatabaseError(err) }),
        );
        return;
    }
  });
}

// No top-level await: under tsx, worker modules are loaded as CommonJS (src/common/worker-url.ts).
open(workerData as PgliteWorkerData).then(
  (pglite) => {
    serve(pglite);
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
