// Typings for the two Emscripten packages that ship none; only the members this module uses.

declare module '@echogarden/espeak-ng-emscripten' {
  export interface ESpeakEvent {
    type: string;
    text_position: number;
    word_length: number;
    audio_position: number;
    id?: number | string;
  }
  export interface ESpeakVoiceInfo {
    name: string;
    identifier: string;
    languages: { priority: number; name: string }[];
  }
  export interface ESpeakNGWorker {
    set_voice(name: string): number;
    set_rate(wpm: number): number;
    set_pitch(pitch: number): number;
    get_samplerate(): number;
    list_voices(): ESpeakVoiceInfo[];
    /** Calls back with 22050 Hz mono s16 chunks; returning true aborts the synthesis. */
    synthesize(text: string, callback: (pcm: Int16Array, events: ESpeakEvent[]) => boolean): void;
  }
  export interface ESpeakModule {
    eSpeakNGWorker: new () => ESpeakNGWorker;
    FS: { readdir(path: string): string[]; readFile(path: string, options: { encoding: 'utf8' }): string };
  }
  const factory: (moduleArg?: object) => Promise<ESpeakModule>;
  export default factory;
}

declare module '@echogarden/speex-resampler-wasm' {
  export interface SpeexModule {
    HEAP16: Int16Array;
    HEAPU32: Uint32Array;
    _malloc(bytes: number): number;
    _free(ptr: number): void;
    _speex_resampler_init(
      channels: number,
      inRate: number,
      outRate: number,
      quality: number,
      errPtr: number,
    ): number;
    _speex_resampler_destroy(state: number): void;
    _speex_resampler_skip_zeros(state: number): number;
    _speex_resampler_get_input_latency(state: number): number;
    _speex_resampler_process_int(
      state: number,
      channel: number,
      inPtr: number,
      inLenPtr: number,
      outPtr: number,
      outLenPtr: number,
    ): number;
  }
  const factory: (moduleArg?: object) => Promise<SpeexModule>;
  export default factory;
}

declare module 'unbzip2-stream' {
  import type { Transform } from 'node:stream';
  /** A stream that decompresses bzip2 (a classic `through` stream: written, piped, 'error' on bad data). */
  const unbzip2: () => Transform;
  export default unbzip2;
}
