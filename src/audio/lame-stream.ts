/**
 * One LAME encoder for one continuous MP3 stream, as the encoder workers use it: 320 kbps CBR,
 * 44.1 kHz stereo from canonical mono PCM (both channels equal), no ID3/Xing tag. Two builds of
 * the same LAME 3.100 produce the same bytes (test): Debian's libmp3lame through a small Node-API
 * addon (`native/lame-mp3`, built at install when libmp3lame-dev is present) and the wasm build
 * of wasm-media-encoders, the fallback wherever the addon could not be built.
 */
import { nativeLameLoadError, openNativeLameStream } from './lame-stream.native.js';
import { openWasmLameStream } from './lame-stream.wasm.js';

/** A LAME instance: encode canonical PCM, then `finish` once (flush) or `close` (drop). */
export interface LameStream {
  /** MP3 bytes ready after this PCM (often not frame-aligned, possibly empty); the array is the caller's. */
  encode(pcm: Int16Array): Uint8Array;
  /** Flushes the last frame and frees the encoder. */
  finish(): Uint8Array;
  /** Frees the encoder without flushing. Idempotent. */
  close(): void;
}

/** Which LAME build encodes: the native addon or the wasm build. */
export type LameBuild = 'native' | 'wasm';
/** Operator's choice (`MP3_ENCODER`): `auto` takes the native addon when it loads, else wasm. */
export type LameChoice = LameBuild | 'auto';

/** The build `choice` resolves to on this machine; throws when `native` is asked for but cannot load. */
export function resolveLameBuild(choice: LameChoice): LameBuild {
  if (choice === 'wasm') return 'wasm';
  const error = nativeLameLoadError();
  if (error === undefined) return 'native';
  if (choice === 'native')
    throw new Error(
      `MP3_ENCODER=native, but the native LAME addon did not load (${error}); install libmp3lame-dev and run npm ci, or use MP3_ENCODER=auto`,
    );
  return 'wasm';
}

/** Opens an encoder of the given build. */
export function openLameStream(build: LameBuild): Promise<LameStream> {
  switch (build) {
    case 'native':
      return Promise.resolve(openNativeLameStream());
    case 'wasm':
      return openWasmLameStream();
  }
}
