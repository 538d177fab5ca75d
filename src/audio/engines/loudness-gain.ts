/**
 * Loudness matching of engine voices: every voice of an engine whose provider calibrates gets one
 * fixed gain that brings its speech to LOUDNESS_TARGET_LUFS (the integrated loudness of a piece
 * still being spoken is not known, so the gain is the voice's, measured once on CALIBRATION_TEXT),
 * followed by the look-ahead limiter that holds its peaks under the ceiling (GainStage). The gain
 * is applied to the engine's canonical PCM as it leaves the engine, before any encoder, so stored
 * audio, live streams and one-shots all carry it; lengths and timing marks are unchanged.
 *
 * The key of a gain is the voice's whole engine binding (engine, voice and every setting, e.g.
 * espeak-ng's variant and pitch, which change its level by several LU), never the request's speech
 * rate: rate stretches the same sounds, and pauses do not count in gated loudness. Gains of the
 * built-in voices as the catalogue lists them are in loudness-table.ts (no measurement at run
 * time); any other binding is measured on its first use in the process, once, and remembered.
 */
import { createHash } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Piscina } from 'piscina';
import { siblingModuleUrl, workerExecArgv } from '../../common/worker-url.js';
import {
  GainStage,
  integratedLoudness,
  LIMITER_CEILING_DBFS,
  LOUDNESS_TARGET_LUFS,
  MAX_GAIN_DB,
  STEREO_OFFSET_LU,
} from '../loudness.js';
import {
  audioWithMarks,
  type EngineAudio,
  type EngineMp3Chunk,
  type SpeechEngine,
  type SynthesisRequest,
  type TimingMark,
  type VoiceBinding,
} from './engine.js';
import { LOUDNESS_TABLE } from './loudness-table.js';

/**
 * What every voice speaks once to be measured: ordinary English prose, the phonetically balanced
 * "North Wind and the Sun" with a question and an exclamation after it — 35 s or more of speech
 * from each voice: a voice's level moves by about ±0.6 LU from one text to another, and a longer,
 * more varied text gives the gain that fits its speech on average.
 */
export const CALIBRATION_TEXT =
  'The North Wind and the Sun were disputing which was the stronger, when a traveller came along ' +
  'wrapped in a warm cloak. They agreed that the one who first succeeded in making the traveller ' +
  'take his cloak off should be considered stronger than the other. Then the North Wind blew as ' +
  'hard as he could, but the more he blew the more closely did the traveller fold his cloak around ' +
  'him; and at last the North Wind gave up the attempt. Then the Sun shined out warmly, and ' +
  'immediately the traveller took off his cloak. And so the North Wind was obliged to confess that ' +
  'the Sun was the stronger of the two. Did you like the story? Yes! I think it is a very good ' +
  'one, and I would tell it again.';

/**
 * What the stored table was measured for: the target, the ceiling and the calibration text. A
 * table of another basis is ignored (every voice is then measured on first use), so changing one
 * of them cannot leave stale gains behind.
 */
export const CALIBRATION_BASIS = createHash('sha256')
  .update(`${LOUDNESS_TARGET_LUFS}|${LIMITER_CEILING_DBFS}|${CALIBRATION_TEXT}`)
  .digest('hex')
  .slice(0, 16);

/** The key of a binding's gain: its fields in a fixed order. */
export function loudnessKey(binding: VoiceBinding): string {
  const fields = Object.entries(binding)
    .filter(([, v]) => v !== undefined)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify(Object.fromEntries(fields));
}

/** Target loudness of the mono PCM: the served MP3 carries it on two channels. */
const TARGET_MONO = LOUDNESS_TARGET_LUFS - STEREO_OFFSET_LU;

/**
 * The gain (dB) that brings `pcm` (canonical, at least 10 s of one voice's speech) to the target
 * through the limiter: the level difference, corrected once for what the limiter took off the
 * peaks, capped at MAX_GAIN_DB. Silence gets 0 dB.
 */
export async function gainForCalibration(pcm: Int16Array): Promise<number> {
  // Each pass over the audio (a few tens of ms of CPU) runs in a turn of its own, so a thread that
  // serves other work meanwhile (the main thread, where no GainMeter measures) is not held up by
  // one long block.
  await yieldTurn();
  const raw = integratedLoudness(pcm);
  if (!Number.isFinite(raw)) return 0;
  const clamp = (db: number) => Math.min(MAX_GAIN_DB, db);
  const first = clamp(TARGET_MONO - raw);
  await yieldTurn();
  const gained = applyGain(pcm, first);
  await yieldTurn();
  const limited = integratedLoudness(gained);
  return Number.isFinite(limited) ? clamp(first + (TARGET_MONO - limited)) : first;
}

const yieldTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** `pcm` through a GainStage of `gainDb`, whole. */
export function applyGain(pcm: Int16Array, gainDb: number): Int16Array {
  const stage = new GainStage(gainDb);
  const head = stage.process(pcm);
  const tail = stage.flush();
  const out = new Int16Array(head.length + tail.length);
  out.set(head);
  out.set(tail, head.length);
  return out;
}

/**
 * Measures gains (gainForCalibration) in a thread of its own at lower priority, one at a time: a
 * tenant that uses many bindings the table lacks queues their measurements there, instead of
 * holding the event loop with each. Started on first use, retired after an idle minute.
 */
export class GainMeter {
  private readonly pool = new Piscina({
    filename: fileURLToPath(MEASURE_WORKER),
    execArgv: workerExecArgv(MEASURE_WORKER),
    minThreads: 0,
    maxThreads: 1,
    idleTimeout: 60_000,
  });

  /** The gain of `pcm` (calibration audio; its buffer is handed to the thread, so it is left detached). */
  async measure(pcm: Int16Array): Promise<number> {
    const own = pcm.byteOffset === 0 && pcm.byteLength === pcm.buffer.byteLength;
    return (await this.pool.run(pcm, own ? { transferList: [pcm.buffer as ArrayBuffer] } : {})) as number;
  }

  async close(): Promise<void> {
    await this.pool.destroy();
  }
}

const MEASURE_WORKER = siblingModuleUrl(import.meta.url, 'loudness-measure.worker');

/** Most gains measured at run time kept per process (each is a few bytes; the oldest go first). */
const MAX_MEASURED = 10_000;

/** Gains per binding: the stored table, else measured once per process by `calibrate`. */
export class LoudnessGains {
  private readonly measured = new Map<string, Promise<number>>();
  private readonly table: Readonly<Record<string, number>>;

  constructor(
    /** Speaks CALIBRATION_TEXT with a binding, to the end (bounded by the signal). */
    private readonly calibrate: (binding: VoiceBinding, signal: AbortSignal) => Promise<Int16Array>,
    /** How long one measurement may take. */
    private readonly timeoutMs: number,
    table: { basis: string; gains: Readonly<Record<string, number>> } = LOUDNESS_TABLE,
    /** The gain of the calibration audio (GainMeter.measure runs it off the main thread). */
    private readonly measure: (pcm: Int16Array) => Promise<number> = gainForCalibration,
  ) {
    this.table = table.basis === CALIBRATION_BASIS ? table.gains : {};
  }

  /**
   * The gain of `binding`, in dB. A measurement is shared by every caller and runs to its end
   * under its own deadline, whoever stops waiting; one that failed is forgotten (the next use
   * measures again) and its error reaches the callers waiting for it.
   */
  async gainFor(binding: VoiceBinding, signal: AbortSignal): Promise<number> {
    const key = loudnessKey(binding);
    const stored = this.table[key];
    if (stored !== undefined) return stored;
    let gain = this.measured.get(key);
    if (gain === undefined) {
      gain = this.calibrate(binding, AbortSignal.timeout(this.timeoutMs)).then((pcm) => this.measure(pcm));
      this.measured.set(key, gain);
      if (this.measured.size > MAX_MEASURED) {
        const oldest = this.measured.keys().next().value;
        if (oldest !== undefined) this.measured.delete(oldest);
      }
      gain.catch(() => {
        if (this.measured.get(key) === gain) this.measured.delete(key);
      });
    }
    return untilAborted(gain, signal);
  }
}

/** `promise`, or the signal's reason once it is aborted first. */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  signal.throwIfAborted();
  let onAbort = () => {};
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => reject(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  return Promise.race([promise, aborted]).finally(() => signal.removeEventListener('abort', onAbort));
}

/** Every chunk of an engine call, whole. */
export async function collectPcm(chunks: AsyncIterable<Int16Array>): Promise<Int16Array> {
  const parts: Int16Array[] = [];
  for await (const pcm of chunks) parts.push(pcm);
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/**
 * `engine` with each call's PCM through the GainStage of its voice's gain: the same samples in
 * number and place, marks passed on with the chunk that holds their sample, an engine's own MP3
 * bytes forwarded unchanged (only the PCM decoded from them is matched). An engine that applies
 * the gain itself (the built-in ones, in their synthesis threads) is asked to; otherwise the
 * stage runs here, on the thread that reads the engine.
 */
export function withLoudnessMatching(
  engine: SpeechEngine,
  gainFor: (binding: VoiceBinding, signal: AbortSignal) => Promise<number>,
): SpeechEngine {
  // An engine's own MP3 cannot take a gain: such an engine's PCM is matched here.
  if (engine.appliesGain === true && engine.synthesizeMp3 === undefined)
    return withGainInEngine(engine, gainFor);
  async function* marked(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<EngineAudio> {
    const stage = new GainStage(await gainFor(req.voice, signal));
    let pending: TimingMark[] = [];
    let emitted = 0;
    const ready = () => {
      const out = pending.filter((m) => m.sample < emitted);
      pending = pending.filter((m) => m.sample >= emitted);
      return out;
    };
    for await (const chunk of audioWithMarks(engine, req, signal)) {
      const pcm = stage.process(chunk.pcm);
      emitted += pcm.length;
      pending.push(...chunk.marks);
      const marks = ready();
      if (pcm.length > 0 || marks.length > 0) yield { pcm, marks };
    }
    const pcm = stage.flush();
    emitted += pcm.length;
    const marks = pending;
    if (pcm.length > 0 || marks.length > 0) yield { pcm, marks };
  }
  async function* plain(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<Int16Array> {
    const stage = new GainStage(await gainFor(req.voice, signal));
    for await (const chunk of engine.synthesize(req, signal)) {
      const pcm = stage.process(chunk);
      if (pcm.length > 0) yield pcm;
    }
    const tail = stage.flush();
    if (tail.length > 0) yield tail;
  }
  const mp3 = engine.synthesizeMp3;
  async function* forwarded(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<EngineMp3Chunk> {
    if (mp3 === undefined) return;
    const stage = new GainStage(await gainFor(req.voice, signal));
    for await (const chunk of mp3.call(engine, req, signal)) {
      yield { mp3: chunk.mp3, pcm: stage.process(chunk.pcm) };
    }
    const tail = stage.flush();
    if (tail.length > 0) yield { mp3: new Uint8Array(0), pcm: tail };
  }
  return {
    synthesize: plain,
    ...(engine.synthesizeWithMarks !== undefined && { synthesizeWithMarks: marked }),
    ...(mp3 !== undefined && { synthesizeMp3: forwarded }),
  };
}

/**
 * An engine that applies the gain itself, given its voice's gain with each call: the per-sample
 * work of the stage runs where the engine makes its samples (its synthesis threads, at their
 * priority), and the main thread only passes the chunks on.
 */
function withGainInEngine(
  engine: SpeechEngine,
  gainFor: (binding: VoiceBinding, signal: AbortSignal) => Promise<number>,
): SpeechEngine {
  async function* marked(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<EngineAudio> {
    yield* audioWithMarks(engine, { ...req, gainDb: await gainFor(req.voice, signal) }, signal);
  }
  async function* plain(req: SynthesisRequest, signal: AbortSignal): AsyncIterable<Int16Array> {
    yield* engine.synthesize({ ...req, gainDb: await gainFor(req.voice, signal) }, signal);
  }
  return {
    synthesize: plain,
    ...(engine.synthesizeWithMarks !== undefined && { synthesizeWithMarks: marked }),
  };
}
