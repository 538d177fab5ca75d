/** LameStream over the wasm LAME of wasm-media-encoders: the build that works everywhere. */
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { createEncoder } from 'wasm-media-encoders';
import type { LameStream } from './lame-stream.js';
import { CANONICAL_RATE, pcmToFloat } from './pcm.js';

// The project's lib (ES2023, no DOM) has no WebAssembly typings; Node has the global.
const { WebAssembly: wasm } = globalThis as unknown as {
  WebAssembly: { compile(bytes: Uint8Array): Promise<object> };
};

// Compiled once per thread on first use; every instance then only instantiates it (≈1 MB each).
let wasmModule: Promise<object> | undefined;

/** Opens a wasm encoder (instantiates the module, compiled once per thread). */
export async function openWasmLameStream(): Promise<LameStream> {
  wasmModule ??= readFile(createRequire(import.meta.url).resolve('wasm-media-encoders/wasm/mp3')).then(
    (bytes) => wasm.compile(bytes),
  );
  const lame = await createEncoder('audio/mpeg', await wasmModule);
  lame.configure({ channels: 2, sampleRate: CANONICAL_RATE, bitrate: 320, outputSampleRate: CANONICAL_RATE });
  return {
    encode(pcm) {
      const mono = pcmToFloat(pcm);
      // The returned view is owned by the wasm instance: copy before handing it over.
      return lame.encode([mono, mono]).slice();
    },
    finish: () => lame.finalize().slice(),
    // Dropping the instance frees its wasm memory with it.
    close: () => undefined,
  };
}
