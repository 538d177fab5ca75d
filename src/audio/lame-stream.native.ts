/**
 * LameStream over Debian's libmp3lame through the project's Node-API addon
 * (native/lame-mp3/lame_mp3.c, built by scripts/build-native.mjs at install). Encoding runs
 * synchronously in the calling encoder worker, as the wasm build does.
 */
import { createRequire } from 'node:module';
import type { LameStream } from './lame-stream.js';

/** The addon's exports (see native/lame-mp3/lame_mp3.c). */
interface LameAddon {
  open(): object;
  encode(handle: object, pcm: Int16Array): Uint8Array;
  finish(handle: object): Uint8Array;
  close(handle: object): void;
  version(): string;
}

/** Where the build puts the addon, from src/audio (tsx) and from dist/audio alike. */
const ADDON_URL = new URL('../../native/lame-mp3/build/Release/lame_mp3.node', import.meta.url);

let loaded: { addon: LameAddon } | { error: string } | undefined;

function load(): { addon: LameAddon } | { error: string } {
  if (loaded === undefined) {
    try {
      loaded = { addon: createRequire(import.meta.url)(ADDON_URL.pathname) as LameAddon };
    } catch (err) {
      loaded = { error: err instanceof Error ? (err.message.split('\n')[0] ?? err.message) : String(err) };
    }
  }
  return loaded;
}

/** Why the addon does not load here, or undefined when it does. */
export function nativeLameLoadError(): string | undefined {
  const l = load();
  return 'error' in l ? l.error : undefined;
}

/** LAME's version as the loaded library reports it (benchmarks print it). */
export function nativeLameVersion(): string | undefined {
  const l = load();
  return 'addon' in l ? l.addon.version() : undefined;
}

/** Opens a native encoder; throws when the addon does not load. */
export function openNativeLameStream(): LameStream {
  const l = load();
  if ('error' in l) throw new Error(`native LAME addon unavailable: ${l.error}`);
  const { addon } = l;
  const handle = addon.open();
  return {
    encode: (pcm) => addon.encode(handle, pcm),
    finish: () => addon.finish(handle),
    close: () => addon.close(handle),
  };
}
