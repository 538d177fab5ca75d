/**
 * Piscina task module for espeak-ng: one long-lived wasm instance per worker thread (init ≈ 0.1 s,
 * then ≈ 15 ms per sentence). Each `synthesize` task speaks one sentence and returns it as
 * canonical PCM (22050 → 44100 Hz here, off the main thread), transferred, not copied.
 */
import loadEspeak, { type ESpeakNGWorker } from '@echogarden/espeak-ng-emscripten';
import { move, workerData } from 'piscina';
import { concatPcm } from '../pcm.js';
import { createResampler } from '../resampler.js';
import { lowerThreadPriority } from '../../common/worker-priority.js';

// Synthesis is batch work: the event loop (requests, live listeners) goes first; the interactive
// lane's thread (sentences a client waits for) keeps normal priority.
if ((workerData as { interactive?: boolean } | undefined)?.interactive !== true) lowerThreadPriority();

/** One sentence to speak; `voice` is an espeak spec such as 'gmw/en-US+f3' (already validated). */
export interface SynthesizeTask {
  text: string;
  voice: string;
  /** Words per minute. */
  rate: number;
  /** 0–99. */
  pitch: number;
}

/** Voices and variants this espeak build knows. */
export interface EspeakCatalogue {
  /** `id` is what synthesis uses; `languages` are the codes the voice answers to (lower priority = better match). */
  voices: { id: string; name: string; languages: { code: string; priority: number }[] }[];
  variants: string[];
}

/** espeak-ng's output rate. */
const ESPEAK_RATE = 22050;
// Where the emscripten build mounts its data; the variant files live in `voices/!v`.
const VARIANT_DIR = '/usr/share/espeak-ng-data/voices/!v';

interface Instance {
  worker: ESpeakNGWorker;
  variants: () => string[];
  settings: string;
}

let instance: Promise<Instance> | undefined;

async function espeak(): Promise<Instance> {
  instance ??= loadEspeak().then((m) => ({
    worker: new m.eSpeakNGWorker(),
    variants: () => m.FS.readdir(VARIANT_DIR).filter((f) => !f.startsWith('.')),
    settings: '',
  }));
  return instance;
}

/** Speaks one sentence; resolves with its canonical PCM (transferred to the caller). */
export async function synthesize(task: SynthesizeTask): Promise<Int16Array> {
  const e = await espeak();
  // Re-applying an unchanged voice reloads voice files; skip it between sentences of one request.
  const settings = `${task.voice}|${task.rate}|${task.pitch}`;
  if (settings !== e.settings) {
    if (e.worker.set_voice(task.voice) !== 0) throw new Error(`espeak-ng rejected voice ${task.voice}`);
    e.worker.set_rate(task.rate);
    e.worker.set_pitch(task.pitch);
    e.settings = settings;
  }
  const resampler = await createResampler(ESPEAK_RATE);
  const chunks: Int16Array[] = [];
  try {
    e.worker.synthesize(task.text, (pcm) => {
      chunks.push(resampler.process(pcm));
      return false;
    });
    chunks.push(resampler.flush());
  } finally {
    resampler.destroy();
  }
  return move(concatPcm(chunks)) as Int16Array;
}

/** Lists the voices and variants of this build (for validation and the voice catalogue). */
export async function catalogue(): Promise<EspeakCatalogue> {
  const e = await espeak();
  return {
    voices: e.worker.list_voices().map((v) => ({
      id: v.identifier,
      name: v.name.trim(),
      languages: v.languages.map((l) => ({ code: l.name, priority: l.priority })),
    })),
    variants: e.variants().sort(),
  };
}

// Piscina resolves the default export when a thread starts (the `synthesize` task runs as default).
export default synthesize;
