/**
 * Piscina task module for espeak-ng: one long-lived instance per worker thread (init ≈ 0.1 s,
 * then ≈ 15 ms per sentence). Each `synthesize` task speaks one sentence and posts it as canonical
 * PCM (22050 → 44100 Hz here, off the main thread) through the task's port while espeak speaks it,
 * in chunks transferred, not copied: a listener's audio starts after the sentence's first tenth
 * of a second is synthesised, not after the whole sentence.
 */
import type { ESpeakEvent, ESpeakNGWorker } from '@echogarden/espeak-ng-emscripten';
import { loadEspeakWasm as loadEspeak } from './espeak-wasm.js';
import { workerData } from 'piscina';
import { concatPcm } from '../pcm.js';
import { createResampler } from '../resampler.js';
import { lowerThreadPriority } from '../../common/worker-priority.js';
import type { TimingMark } from './engine.js';
import type { EspeakCatalogue, SynthesizeTask } from './espeak-protocol.js';
import type { ClausePause } from './sentences.js';
import { PieceOutput } from './piece-output.js';
import { CANONICAL_RATE } from '../pcm.js';

// Synthesis is batch work: the event loop (requests, live listeners) goes first; the interactive
// lane's thread (sentences a client waits for) keeps normal priority.
if ((workerData as { interactive?: boolean } | undefined)?.interactive !== true) lowerThreadPriority();

/**
 * Samples (44.1 kHz) of a sentence's first posted chunk, about 0.1 s: espeak hands over ~0.1 s at
 * a time. Each later chunk waits for twice as many as the one before, so a sentence of seconds
 * costs a handful of messages, and its start still leaves after the first ~1 ms of synthesis.
 */
const FIRST_CHUNK_SAMPLES = 4096;

/** Voice settings whose clause pauses a thread keeps (a handful in practice). */
const MAX_PAUSE_SETTINGS = 64;

/** espeak-ng's output rate. */
const ESPEAK_RATE = 22050;
// Where the emscripten build mounts its data; the variant files live in `voices/!v`.
const VARIANT_DIR = '/usr/share/espeak-ng-data/voices/!v';

interface Instance {
  worker: ESpeakNGWorker;
  variants: () => string[];
  readVariant: (id: string) => string;
  settings: string;
  /** Clause pauses by settings, measured when a clause first needs them (a text may switch voices). */
  pauses: Map<string, Record<ClausePause, number>>;
}

let instance: Promise<Instance> | undefined;

async function espeak(): Promise<Instance> {
  instance ??= loadEspeak().then((m) => ({
    worker: new m.eSpeakNGWorker(),
    variants: () => m.FS.readdir(VARIANT_DIR).filter((f) => !f.startsWith('.')),
    readVariant: (id) => m.FS.readFile(`${VARIANT_DIR}/${id}`, { encoding: 'utf8' }),
    settings: '',
    pauses: new Map(),
  }));
  return instance;
}

/**
 * espeak's word and sentence events as marks: `audio_position` is milliseconds from the start of
 * this synthesis (so words land within 44 samples; a sentence's own start is sample 0 exactly),
 * `text_position` a 1-based code point index into the piece, `word_length` in code points. The
 * sentence mark spans to `sentenceEnd` (the piece may be the first clause of its sentence); a
 * later clause of a sentence starts none.
 */
function marksOf(
  events: readonly ESpeakEvent[],
  codePoints: readonly string[],
  sentenceEnd: number | undefined,
): TimingMark[] {
  const marks: TimingMark[] = [];
  for (const e of events) {
    if (e.type !== 'word' && (e.type !== 'sentence' || sentenceEnd === undefined)) continue;
    const start = Math.min(Math.max(e.text_position - 1, 0), codePoints.length);
    const end = Math.min(start + Math.max(e.word_length, 0), codePoints.length);
    marks.push({
      kind: e.type,
      sample: Math.round((e.audio_position * CANONICAL_RATE) / 1000),
      textStart: utf16Length(codePoints, start),
      textEnd: e.type === 'sentence' ? (sentenceEnd ?? 0) : utf16Length(codePoints, end),
    });
  }
  return marks;
}

/** Samples (espeak's rate) of the text's audio. */
function spokenLength(worker: ESpeakNGWorker, text: string): number {
  let samples = 0;
  worker.synthesize(text, (pcm) => {
    samples += pcm.length;
    return false;
  });
  return samples;
}

/**
 * The pause espeak-ng makes after a clause's punctuation inside a sentence, in canonical samples,
 * for the voice and rate set now: what a two-clause sentence lasts beyond its clauses spoken
 * alone. It depends on the rate only (≈143 ms after a comma and ≈219 ms after a semicolon or colon
 * at 175 words per minute, whatever the language); measured once per setting, ~15 ms.
 */
function measurePauses(worker: ESpeakNGWorker): Record<ClausePause, number> {
  const second = spokenLength(worker, 'two.');
  const pause = (mark: string) =>
    Math.max(0, spokenLength(worker, `one${mark} two.`) - spokenLength(worker, `one${mark}`) - second);
  const toCanonical = (samples: number) => Math.round((samples * CANONICAL_RATE) / ESPEAK_RATE);
  return { comma: toCanonical(pause(',')), semicolon: toCanonical(pause(';')) };
}

/** UTF-16 length of the first `n` code points. */
function utf16Length(codePoints: readonly string[], n: number): number {
  let length = 0;
  for (let i = 0; i < n; i++) length += codePoints[i]?.length ?? 0;
  return length;
}

/**
 * Speaks one sentence, posting its PCM through `task.port` as it is made (then SENTENCE_END),
 * through the call's GainStage when the task carries one (PieceOutput); resolves with the number
 * of samples the sentence has.
 */
export async function synthesize(task: SynthesizeTask): Promise<number> {
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
  const output = new PieceOutput(task);
  const codePoints = Array.from(task.text);
  let pending: Int16Array[] = [];
  let pendingSamples = 0;
  let pendingMarks: TimingMark[] = [];
  let posted = 0;
  let nextPostAt = FIRST_CHUNK_SAMPLES;
  /** Sends the pending PCM with the marks that fall in it; `last` also sends the rest (end marks). */
  const post = (last: boolean) => {
    if (pendingSamples === 0 && !(last && pendingMarks.length > 0)) return;
    const pcm = concatPcm(pending); // a fresh array: its buffer can be transferred
    const end = posted + pcm.length;
    const marks = last ? pendingMarks : pendingMarks.filter((m) => m.sample < end);
    pendingMarks = last ? [] : pendingMarks.filter((m) => m.sample >= end);
    posted = end;
    nextPostAt = 2 * pcm.length;
    output.send(
      pcm,
      marks.map((m) => ({ ...m, sample: Math.min(m.sample, end) })),
    );
    pending = [];
    pendingSamples = 0;
  };
  const add = (pcm: Int16Array) => {
    if (pcm.length === 0) return;
    pending.push(pcm);
    pendingSamples += pcm.length;
  };
  try {
    try {
      e.worker.synthesize(task.text, (pcm, events) => {
        pendingMarks.push(...marksOf(events, codePoints, task.sentenceEnd));
        add(resampler.process(pcm));
        if (pendingSamples >= nextPostAt) post(false);
        return false;
      });
      add(resampler.flush());
      // The clause's pause inside its sentence, which espeak-ng leaves out at the end of its text
      // (measured after the clause, so that its first audio never waits for the measurement).
      if (task.pauseAfter !== undefined) {
        post(false);
        let pauses = e.pauses.get(settings);
        if (pauses === undefined) {
          if (e.pauses.size >= MAX_PAUSE_SETTINGS) e.pauses.clear();
          pauses = measurePauses(e.worker);
          e.pauses.set(settings, pauses);
        }
        const pause = pauses[task.pauseAfter];
        if (pause > 0) add(new Int16Array(pause));
      }
    } finally {
      resampler.destroy();
    }
    post(true);
    return await output.end();
  } finally {
    output.close();
  }
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
    variantInfo: e
      .variants()
      .sort()
      .map((id) => variantDetails(id, e.readVariant(id))),
  };
}

/** A variant as its file describes it: its `name` and `gender` lines (either may be missing). */
function variantDetails(id: string, file: string): EspeakCatalogue['variantInfo'][number] {
  const line = (key: string) => new RegExp(`^\\s*${key}\\s+([^\\r\\n#]+)`, 'im').exec(file)?.[1]?.trim();
  const gender = line('gender')?.split(/\s+/)[0]?.toLowerCase();
  return {
    id,
    name: line('name') || id,
    ...((gender === 'female' || gender === 'male') && { gender }),
  };
}

// Piscina resolves the default export when a thread starts (the `synthesize` task runs as default).
export default synthesize;
