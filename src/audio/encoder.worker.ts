/**
 * Encoder worker: hosts many LAME instances (one per output stream, keyed by id) so MP3 encoding
 * never runs on the event loop. The build (native addon or wasm) is the pool's choice, passed in
 * workerData; both produce the same bytes (see lame-stream.ts).
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { EncoderReply, EncoderRequest } from './encoder-protocol.js';
import { openLameStream, type LameBuild, type LameStream } from './lame-stream.js';
import { lowerThreadPriority } from '../common/worker-priority.js';

/** What the pool passes to each worker. */
interface EncoderWorkerData {
  interactive?: boolean;
  lame?: LameBuild;
}

const port = parentPort;
if (port === null) throw new Error('encoder.worker must run in a worker thread');
const data = (workerData ?? {}) as EncoderWorkerData;
// Batch workers yield the CPU to the event loop; the pool's interactive worker keeps normal priority.
if (data.interactive !== true) lowerThreadPriority();
const build: LameBuild = data.lame ?? 'wasm';

const instances = new Map<number, Promise<LameStream>>();

function reply(msg: EncoderReply): void {
  if (msg.ok) {
    // Transfer the bytes; a view into a larger buffer is copied first (never hand over more).
    const { mp3 } = msg;
    const owned = mp3.byteOffset === 0 && mp3.byteLength === mp3.buffer.byteLength;
    const out = owned ? mp3 : mp3.slice();
    port?.postMessage({ ...msg, mp3: out }, [out.buffer as ArrayBuffer]);
  } else port?.postMessage(msg);
}

async function handle(req: EncoderRequest): Promise<void> {
  switch (req.op) {
    case 'open': {
      // An open that throws at once (the addon refusing) fails this stream, never the worker.
      const lame = Promise.resolve().then(() => openLameStream(build));
      // A failed open is reported by the next encode/finish that awaits it, not as an unhandled rejection.
      lame.catch(() => undefined);
      instances.set(req.id, lame);
      return;
    }
    case 'abort': {
      const lame = instances.get(req.id);
      instances.delete(req.id);
      lame?.then((l) => l.close()).catch(() => undefined);
      return;
    }
    case 'encode':
    case 'finish': {
      const lame = instances.get(req.id);
      if (lame === undefined) {
        reply({ id: req.id, ok: false, error: `no open encoder ${req.id}` });
        return;
      }
      try {
        const instance = await lame;
        const started = performance.now();
        let out: Uint8Array;
        let samples = 0;
        if (req.op === 'encode') {
          samples = req.pcm.length;
          out = instance.encode(req.pcm);
        } else {
          instances.delete(req.id);
          out = instance.finish();
        }
        reply({ id: req.id, ok: true, mp3: out, samples, ms: performance.now() - started });
      } catch (err) {
        instances.delete(req.id);
        lame.then((l) => l.close()).catch(() => undefined);
        reply({ id: req.id, ok: false, error: err instanceof Error ? err.message : String(err) });
      }
      return;
    }
  }
}

/**
 * Requests are handled one per turn of the event loop. Handled straight from the port, a steady
 * flow of encode requests (every stream sends its next chunk as soon as the last is answered) kept
 * the loop from resolving WebAssembly.instantiate: a stream opened meanwhile got no byte until the
 * flow stopped — 8–10 s behind 20 busy streams.
 */
const queue: EncoderRequest[] = [];
let draining = false;
function drain(): void {
  const req = queue.shift();
  if (req === undefined) {
    draining = false;
    return;
  }
  // A request that fails unexpectedly fails its own stream; the worker and its other streams go on.
  handle(req).catch((err: unknown) =>
    reply({ id: req.id, ok: false, error: err instanceof Error ? err.message : String(err) }),
  );
  setImmediate(drain);
}
port.on('message', (req: EncoderRequest) => {
  queue.push(req);
  if (!draining) {
    draining = true;
    setImmediate(drain);
  }
});
