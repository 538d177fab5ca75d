/**
 * Encoder worker: hosts many wasm LAME instances (one per output stream, keyed by id) so MP3
 * encoding never runs on the event loop. Always 320 kbps CBR, 44.1 kHz, stereo from mono input
 * (both channels equal), no ID3/Xing tag (the stream is one continuous, untagged MP3).
 */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { parentPort, workerData } from 'node:worker_threads';
import { createEncoder, type WasmMediaEncoder } from 'wasm-media-encoders';
import type { EncoderReply, EncoderRequest } from './encoder-protocol.js';
import { CANONICAL_RATE, pcmToFloat } from './pcm.js';
import { lowerThreadPriority } from './worker-priority.js';

type Lame = WasmMediaEncoder<'audio/mpeg'>;

const port = parentPort;
if (port === null) throw new Error('encoder.worker must run in a worker thread');
// Batch workers yield the CPU to the event loop; the pool's interactive worker keeps normal priority.
if ((workerData as { interactive?: boolean } | null)?.interactive !== true) lowerThreadPriority();

// The project's lib (ES2023, no DOM) has no WebAssembly typings; Node has the global.
const { WebAssembly: wasm } = globalThis as unknown as {
  WebAssembly: { compile(bytes: Uint8Array): Promise<object> };
};

// Compile the wasm once per worker; every instance then only instantiates it (≈1 MB each).
const wasmModule = readFile(createRequire(import.meta.url).resolve('wasm-media-encoders/wasm/mp3')).then(
  (bytes) => wasm.compile(bytes),
);

const instances = new Map<number, Promise<Lame>>();

async function openLame(): Promise<Lame> {
  const lame = await createEncoder('audio/mpeg', await wasmModule);
  lame.configure({ channels: 2, sampleRate: CANONICAL_RATE, bitrate: 320, outputSampleRate: CANONICAL_RATE });
  return lame;
}

function reply(msg: EncoderReply): void {
  if (msg.ok) port?.postMessage(msg, [msg.mp3.buffer as ArrayBuffer]);
  else port?.postMessage(msg);
}

async function handle(req: EncoderRequest): Promise<void> {
  switch (req.op) {
    case 'open': {
      const lame = openLame();
      // A failed open is reported by the next encode/finish that awaits it, not as an unhandled rejection.
      lame.catch(() => undefined);
      instances.set(req.id, lame);
      return;
    }
    case 'abort':
      // Dropping the instance frees its wasm memory with it.
      instances.delete(req.id);
      return;
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
          const mono = pcmToFloat(req.pcm);
          samples = mono.length;
          out = instance.encode([mono, mono]);
        } else {
          instances.delete(req.id);
          out = instance.finalize();
        }
        // The returned view is owned by the wasm instance: copy before handing it over.
        reply({ id: req.id, ok: true, mp3: out.slice(), samples, ms: performance.now() - started });
      } catch (err) {
        instances.delete(req.id);
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
 * flow stopped — 8–10 s behind 20 busy streams (issue 14, many live tasks).
 */
const queue: EncoderRequest[] = [];
let draining = false;
function drain(): void {
  const req = queue.shift();
  if (req === undefined) {
    draining = false;
    return;
  }
  void handle(req);
  setImmediate(drain);
}
port.on('message', (req: EncoderRequest) => {
  queue.push(req);
  if (!draining) {
    draining = true;
    setImmediate(drain);
  }
});
