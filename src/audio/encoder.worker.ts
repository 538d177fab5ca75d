/**
 * Encoder worker: hosts many LAME instances (one per output stream, keyed by id) so MP3 encoding
 * never runs on the event loop. The build (native addon or wasm) is the pool's choice, passed in
 * workerData; both produce the same bytes (see lame-stream.ts).
 */
import { closeSync, openSync, readSync, writeSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { OWNER_FILE_MODE } from '../common/owner-only.js';
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
/** The MP3 file of each stream opened with `out`, and the bytes written to it. */
const outputs = new Map<number, { fd: number; written: number }>();

/** Whole samples of canonical PCM from `path` (a file this worker only reads). */
function readPcm(path: string, offset: number, length: number): Int16Array {
  if (offset % 2 !== 0 || length % 2 !== 0) throw new Error('PCM ranges are whole samples');
  const pcm = new Int16Array(length / 2);
  const bytes = new Uint8Array(pcm.buffer);
  const fd = openSync(path, 'r');
  try {
    for (let at = 0; at < length;) {
      const read = readSync(fd, bytes, at, length - at, offset + at);
      if (read === 0) throw new Error(`${path} ends before byte ${offset + length}`);
      at += read;
    }
  } finally {
    closeSync(fd);
  }
  return pcm;
}

/** Appends `mp3` to the stream's file, if it has one; answers what the reply carries. */
function output(id: number, mp3: Uint8Array): { mp3: Uint8Array; written?: number } {
  const file = outputs.get(id);
  if (file === undefined) return { mp3 };
  for (let at = 0; at < mp3.length;) at += writeSync(file.fd, mp3, at, mp3.length - at);
  file.written += mp3.length;
  return { mp3: new Uint8Array(0), written: file.written };
}

/** Closes the stream's file, if it has one (its bytes stay where they are: the pool decides). */
function closeOutput(id: number): void {
  const file = outputs.get(id);
  outputs.delete(id);
  if (file !== undefined) closeSync(file.fd);
}

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
      if (req.out !== undefined) {
        try {
          outputs.set(req.id, { fd: openSync(req.out, 'w', OWNER_FILE_MODE), written: 0 });
        } catch (err) {
          // Reported by the stream's next call, like a failed open.
          const failed = Promise.reject(err instanceof Error ? err : new Error(String(err)));
          failed.catch(() => undefined);
          instances.set(req.id, failed);
          lame.then((l) => l.close()).catch(() => undefined);
        }
      }
      return;
    }
    case 'abort': {
      const lame = instances.get(req.id);
      instances.delete(req.id);
      closeOutput(req.id);
      lame?.then((l) => l.close()).catch(() => undefined);
      return;
    }
    case 'encode':
    case 'encode-file':
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
        if (req.op === 'finish') {
          instances.delete(req.id);
          out = instance.finish();
        } else {
          const pcm = req.op === 'encode' ? req.pcm : readPcm(req.path, req.offset, req.length);
          samples = pcm.length;
          out = instance.encode(pcm);
        }
        const written = output(req.id, out);
        if (req.op === 'finish') closeOutput(req.id);
        reply({ id: req.id, ok: true, ...written, samples, ms: performance.now() - started });
      } catch (err) {
        instances.delete(req.id);
        closeOutput(req.id);
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
