/**
 * espeak-ng as WebAssembly (native/espeak-ng, built by native/espeak-ng/build.sh) behind the API
 * the espeak worker speaks to. The build is the library of the commit the npm package
 * `@echogarden/espeak-ng-emscripten` was made from, and it reads that package's data file: it
 * speaks the same samples and marks as the package's JavaScript build, at less than half its CPU,
 * and a new thread starts without compiling the engine's JavaScript (V8 shares a module's compiled
 * code between the threads of a process).
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type {
  ESpeakEvent,
  ESpeakModule,
  ESpeakNGWorker,
  ESpeakVoiceInfo,
} from '@echogarden/espeak-ng-emscripten';

/** Where the build mounts the data (the voice variants are read from `voices/!v` below it). */
const DATA_DIR = '/usr/share/espeak-ng-data';
const BUILD_DIR = fileURLToPath(new URL('../../../native/espeak-ng/', import.meta.url));
const require = createRequire(import.meta.url);

/** espeak_EVENT_TYPE's values, in order. */
const EVENT_TYPES = [
  'list_terminated',
  'word',
  'sentence',
  'mark',
  'play',
  'end',
  'msg_terminated',
  'phoneme',
  'samplerate',
];

/** The members of the WebAssembly global used here (the project's `lib` has no DOM or wasm types). */
interface Wasm {
  compile(bytes: Uint8Array): Promise<object>;
  instantiate(module: object, imports: object): Promise<object>;
}
const wasm = (globalThis as unknown as { WebAssembly: Wasm }).WebAssembly;

/** What the emscripten build exports (only the members used here). */
interface EmscriptenEspeak {
  FS: {
    mkdirTree(path: string): void;
    writeFile(path: string, data: Uint8Array): void;
    readdir(path: string): string[];
    readFile(path: string, options: { encoding: 'utf8' }): string;
  };
  ENV: Record<string, string>;
  HEAP16: Int16Array;
  addFunction(fn: (...args: number[]) => number, signature: string): number;
  removeFunction(index: number): void;
  wrapPointer<T>(ptr: number, type: new () => T): T;
  espeak_EVENT: new () => RawEvent;
  eSpeakNGWorker: new () => RawWorker;
}
interface RawEvent {
  get_type(): number;
  get_text_position(): number;
  get_length(): number;
  get_audio_position(): number;
}
interface RawVoice {
  ptr: number;
  get_name(): string;
  get_identifier(): string;
  get_languages(index: number): number;
}
interface RawWorker {
  samplerate: number;
  set_voice(name: string): number;
  set_rate(rate: number): void;
  set_pitch(pitch: number): void;
  get_voices(index: number): RawVoice;
  getSizeOfEventStruct_(): number;
  synth_(text: string, callback: number): void;
}

/** The data files of the npm package, as its loader lists them (path, start and end in its data file). */
function packageData(): { files: { path: string; start: number; end: number }[]; data: Buffer } {
  const entry = require.resolve('@echogarden/espeak-ng-emscripten');
  const script = readFileSync(entry, 'utf8');
  const files = [...script.matchAll(/filename:"([^"]+)",start:(\d+),end:(\d+)/g)].map((m) => ({
    path: m[1] ?? '',
    start: Number(m[2]),
    end: Number(m[3]),
  }));
  if (!files.some((f) => f.path === `${DATA_DIR}/phondata`))
    throw new Error(`cannot read the espeak-ng data listed by ${entry}`);
  return { files, data: readFileSync(join(dirname(entry), 'espeak-ng.data')) };
}

/** Loads an instance; resolves once espeak-ng's data is in its file system. */
export async function loadEspeakWasm(): Promise<ESpeakModule> {
  const { files, data } = packageData();
  const binary = await wasm.compile(readFileSync(join(BUILD_DIR, 'espeak-ng.wasm')));
  const factory = require(join(BUILD_DIR, 'espeak-ng.cjs')) as (options: object) => Promise<EmscriptenEspeak>;
  const m = await factory({
    // This emscripten fetches the binary where `fetch` exists, which fails on a path: hand it over.
    instantiateWasm(imports: object, done: (instance: object) => void) {
      void wasm.instantiate(binary, imports).then(done);
      return {};
    },
    preRun: [
      (mod: EmscriptenEspeak) => {
        for (const f of files) {
          mod.FS.mkdirTree(dirname(f.path));
          mod.FS.writeFile(f.path, data.subarray(f.start, f.end));
        }
        // The library's own default is the build machine's install path.
        mod.ENV.ESPEAK_DATA_PATH = DATA_DIR;
      },
    ],
    print: () => {},
    printErr: () => {},
  });
  return { eSpeakNGWorker: workerClass(m), FS: m.FS };
}

function workerClass(m: EmscriptenEspeak): new () => ESpeakNGWorker {
  return class implements ESpeakNGWorker {
    private readonly raw = new m.eSpeakNGWorker();

    set_voice(name: string): number {
      return this.raw.set_voice(name);
    }
    set_rate(wpm: number): number {
      this.raw.set_rate(wpm);
      return 0;
    }
    set_pitch(pitch: number): number {
      this.raw.set_pitch(pitch);
      return 0;
    }
    get_samplerate(): number {
      return this.raw.samplerate;
    }
    list_voices(): ESpeakVoiceInfo[] {
      const voices: ESpeakVoiceInfo[] = [];
      for (let i = 0; ; i++) {
        const voice = this.raw.get_voices(i);
        if (voice.ptr === 0) return voices;
        voices.push({
          name: voice.get_name(),
          identifier: voice.get_identifier(),
          languages: languagesOf(voice),
        });
      }
    }
    synthesize(text: string, callback: (pcm: Int16Array, events: ESpeakEvent[]) => boolean): void {
      const eventSize = this.raw.getSizeOfEventStruct_();
      const pointer = m.addFunction((samples: number, length: number, eventsAt: number) => {
        const pcm = m.HEAP16.slice(samples >> 1, (samples >> 1) + length);
        const events: ESpeakEvent[] = [];
        for (let at = eventsAt; ; at += eventSize) {
          const e = m.wrapPointer(at, m.espeak_EVENT);
          const type = e.get_type();
          if (type === 0) break;
          events.push({
            type: EVENT_TYPES[type] ?? String(type),
            text_position: e.get_text_position(),
            word_length: e.get_length(),
            audio_position: e.get_audio_position(),
          });
        }
        return callback(pcm, events) ? 1 : 0;
      }, 'iiii');
      try {
        this.raw.synth_(text, pointer);
      } finally {
        m.removeFunction(pointer);
      }
    }
  };
}

/** A voice's languages: a priority byte, then its name up to a zero byte, until a zero priority. */
function languagesOf(voice: RawVoice): { priority: number; name: string }[] {
  const languages: { priority: number; name: string }[] = [];
  let at = 0;
  for (let priority = voice.get_languages(at); priority !== 0; priority = voice.get_languages(at)) {
    let name = '';
    for (let c = voice.get_languages(++at); c !== 0; c = voice.get_languages(++at))
      name += String.fromCharCode(c);
    languages.push({ priority, name });
    at++;
  }
  return languages;
}
