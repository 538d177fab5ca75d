/**
 * FLAC: libFLAC compiled by emscripten, from `libflacjs` (its asm.js build: the wasm build of this
 * release fetches its binary by URL, which Node cannot). 24 kHz mono 16-bit, compression level 5.
 * The stream is written as it is encoded, so its STREAMINFO block cannot know the total length
 * (libFLAC leaves it 0, "unknown", as for any streamed FLAC); decoders read to the end.
 */
import { createRequire } from 'node:module';
import type { AudioFormat } from './format.js';
import { OPENAI_RATE } from './pcm.js';

interface LibFlac {
  isReady(): boolean;
  on(event: 'ready', handler: () => void): void;
  create_libflac_encoder(
    rate: number,
    channels: number,
    bitsPerSample: number,
    compression: number,
    totalSamples: number,
    verify: boolean,
    blockSize: number,
  ): number;
  init_encoder_stream(encoder: number, write: (data: Uint8Array) => void): number;
  FLAC__stream_encoder_process_interleaved(encoder: number, samples: Int32Array, count: number): boolean;
  FLAC__stream_encoder_finish(encoder: number): boolean;
  FLAC__stream_encoder_delete(encoder: number): void;
}

const require = createRequire(import.meta.url);
let library: Promise<LibFlac> | undefined;

/** libFLAC, loaded on first use (the build initialises asynchronously). */
function libFlac(): Promise<LibFlac> {
  library ??= new Promise((resolve) => {
    const flac = (require('libflacjs') as (variant?: string) => LibFlac)();
    if (flac.isReady()) resolve(flac);
    else flac.on('ready', () => resolve(flac));
  });
  return library;
}

const COMPRESSION = 5;

async function* encodeFlac(pcm: AsyncIterable<Int16Array>): AsyncIterable<Uint8Array> {
  const flac = await libFlac();
  const encoder = flac.create_libflac_encoder(OPENAI_RATE, 1, 16, COMPRESSION, 0, false, 0);
  if (encoder === 0) throw new Error('libFLAC could not create an encoder');
  let out: Uint8Array[] = [];
  const drain = (): Uint8Array[] => {
    const ready = out;
    out = [];
    return ready;
  };
  try {
    // libFLAC hands over a view of its own memory: copy it before the next call reuses it.
    const status = flac.init_encoder_stream(encoder, (data) => out.push(Uint8Array.from(data)));
    if (status !== 0) throw new Error(`libFLAC could not start a stream (status ${status})`);
    for await (const chunk of pcm) {
      if (chunk.length === 0) continue;
      if (!flac.FLAC__stream_encoder_process_interleaved(encoder, Int32Array.from(chunk), chunk.length))
        throw new Error('libFLAC failed to encode');
      yield* drain();
    }
    if (!flac.FLAC__stream_encoder_finish(encoder)) throw new Error('libFLAC failed to finish the stream');
    yield* drain();
  } finally {
    flac.FLAC__stream_encoder_delete(encoder);
  }
}

export const flac: AudioFormat = {
  id: 'flac',
  contentType: 'audio/flac',
  sampleRate: OPENAI_RATE,
  library: 'libflacjs (libFLAC compiled by emscripten)',
  source: { kind: 'pcm', encode: encodeFlac },
};
