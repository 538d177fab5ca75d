/**
 * Loudness of canonical PCM and the stage that brings a voice to the service's target: integrated
 * loudness per ITU-R BS.1770-4 / EBU R128 (K-weighting, 400 ms blocks every 100 ms, absolute gate
 * at −70 LUFS, relative gate 10 LU below), and a sample-exact look-ahead peak limiter that keeps
 * the gained audio under the peak ceiling without changing its length or timing.
 *
 * Levels are those of the served MP3: canonical PCM is mono and the encoder writes it on both
 * stereo channels, which BS.1770 sums, so the served file measures 10·log10(2) ≈ 3.01 LU louder
 * than the mono PCM does.
 */
import { CANONICAL_RATE } from './pcm.js';

/** Integrated loudness every voice is brought to, in LUFS, as the served (stereo) MP3 measures. */
export const LOUDNESS_TARGET_LUFS = -16;
/** The true-peak limit of the served MP3, in dBTP. */
export const TRUE_PEAK_LIMIT_DBTP = -1;
/**
 * The limiter's ceiling on sample values, in dBFS: a dB under the true-peak limit leaves room for
 * the peaks between samples and the MP3 encoder's own overshoot.
 */
export const LIMITER_CEILING_DBFS = -2;
/** Loudness the two served channels add over the mono PCM they carry. */
export const STEREO_OFFSET_LU = 10 * Math.log10(2);
/** The largest gain a quiet voice gets: more would mostly raise its noise. */
export const MAX_GAIN_DB = 15;

/** Below this a block is silence (BS.1770's absolute gate). */
const ABSOLUTE_GATE_LUFS = -70;
/** Blocks this far under the ungated level are pauses (BS.1770's relative gate). */
const RELATIVE_GATE_LU = 10;

/** One biquad section, direct form I. */
interface Biquad {
  b: [number, number, number];
  a: [number, number];
}

/**
 * The K-weighting filter at `rate`: BS.1770's high-shelf pre-filter and RLB high-pass, derived
 * from their analogue prototypes (the standard lists the 48 kHz coefficients only).
 */
function kWeighting(rate: number): [Biquad, Biquad] {
  let f0 = 1681.974450955533;
  const g = 3.999843853973347;
  let q = 0.7071752369554196;
  let k = Math.tan((Math.PI * f0) / rate);
  const vh = 10 ** (g / 20);
  const vb = vh ** 0.4996667741545416;
  let a0 = 1 + k / q + k * k;
  const shelf: Biquad = {
    b: [(vh + (vb * k) / q + k * k) / a0, (2 * (k * k - vh)) / a0, (vh - (vb * k) / q + k * k) / a0],
    a: [(2 * (k * k - 1)) / a0, (1 - k / q + k * k) / a0],
  };
  f0 = 38.13547087602444;
  q = 0.5003270373238773;
  k = Math.tan((Math.PI * f0) / rate);
  a0 = 1 + k / q + k * k;
  const highPass: Biquad = { b: [1, -2, 1], a: [(2 * (k * k - 1)) / a0, (1 - k / q + k * k) / a0] };
  return [shelf, highPass];
}

/**
 * Integrated loudness of mono PCM at `rate`, in LUFS as BS.1770 measures one channel (add
 * STEREO_OFFSET_LU for the served MP3); −Infinity for audio with no block above the gates
 * (silence, or less than one 400 ms block).
 */
export function integratedLoudness(pcm: Int16Array, rate = CANONICAL_RATE): number {
  const [s1, s2] = kWeighting(rate);
  const step = Math.round(rate / 10);
  const steps = Math.floor(pcm.length / step);
  // Energy of each 100 ms step; a gating block is four consecutive steps.
  const energy = new Float64Array(steps);
  let x1 = 0;
  let x2 = 0;
  let y1 = 0;
  let y2 = 0;
  let z1 = 0;
  let z2 = 0;
  for (let i = 0; i < steps * step; i++) {
    const x = (pcm[i] ?? 0) / 32768;
    const y = s1.b[0] * x + s1.b[1] * x1 + s1.b[2] * x2 - s1.a[0] * y1 - s1.a[1] * y2;
    const z = s2.b[0] * y + s2.b[1] * y1 + s2.b[2] * y2 - s2.a[0] * z1 - s2.a[1] * z2;
    x2 = x1;
    x1 = x;
    y2 = y1;
    y1 = y;
    z2 = z1;
    z1 = z;
    energy[Math.floor(i / step)]! += z * z;
  }
  const blocks: number[] = [];
  for (let i = 0; i + 4 <= steps; i++) {
    blocks.push((energy[i]! + energy[i + 1]! + energy[i + 2]! + energy[i + 3]!) / (4 * step));
  }
  const lufs = (meanSquare: number) => -0.691 + 10 * Math.log10(meanSquare);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  const audible = blocks.filter((z) => lufs(z) > ABSOLUTE_GATE_LUFS);
  if (audible.length === 0) return -Infinity;
  const relativeGate = lufs(mean(audible)) - RELATIVE_GATE_LU;
  const speech = audible.filter((z) => lufs(z) > relativeGate);
  return lufs(mean(speech));
}

/** Look-ahead of the limiter: its gain starts falling this long before a peak (5 ms). */
export const LIMITER_LOOKAHEAD = Math.round(CANONICAL_RATE * 0.005);
/** Time constant of the limiter's recovery after a peak (60 ms): slow enough not to distort. */
const LIMITER_RELEASE = Math.round(CANONICAL_RATE * 0.06);
/**
 * A raising gain lifts speech, not an engine's noise floor: where the audio's peak level (held
 * over the look-ahead, decaying by 100 ms) is under NOISE_FLOOR_DBFS, the raise fades out over
 * NOISE_FLOOR_RANGE_DB below it, so a pause keeps the near-silence the engine made. Speech and
 * the pauses within it hold the level far above; loudness gating ignores such quiet blocks anyway.
 */
const NOISE_FLOOR_DBFS = -50;
const NOISE_FLOOR_RANGE_DB = 20;
/** NOISE_FLOOR_DBFS and the bottom of its range, in sample values. */
const FLOOR_TOP = 32768 * 10 ** (NOISE_FLOOR_DBFS / 20);
const FLOOR_BOTTOM = 32768 * 10 ** ((NOISE_FLOOR_DBFS - NOISE_FLOOR_RANGE_DB) / 20);
const LEVEL_DECAY = Math.exp(-1 / Math.round(CANONICAL_RATE * 0.1));
/** Smoothing of the noise-floor gain (1 ms), well inside the look-ahead. */
const FLOOR_SMOOTHING = 1 - Math.exp(-1 / Math.round(CANONICAL_RATE * 0.001));

/** A GainStage's whole state (GainStage.snapshot): numbers and typed arrays, posted between threads as they are. */
export interface GainStageState {
  gainDb: number;
  ceilingDbfs: number;
  level: number;
  floorGain: number;
  held: Float64Array;
  need: Float64Array;
  deque: Int32Array;
  head: number;
  tail: number;
  recent: Float64Array;
  recentSum: number;
  envelope: number;
  count: number;
}

/**
 * A fixed gain followed by a look-ahead peak limiter, for one engine call's canonical PCM. Every
 * sample comes out exactly once and in place (same count, same positions), LIMITER_LOOKAHEAD − 1
 * samples after it went in; `flush()` hands over the held ones at the end of the call.
 *
 * The limiter's gain at sample n is the mean over the last L values of a held minimum of the gain
 * each sample needs (ceiling / |x|) over the L samples ahead, with a slow exponential release: a
 * mean of values that are each at most the need of sample n, so no sample exceeds the ceiling,
 * and the gain moves smoothly over L samples instead of clipping.
 */
export class GainStage {
  private readonly gain: number;
  private readonly gainDb: number;
  private readonly ceilingDbfs: number;
  private readonly ceiling: number;
  /** Peak level of the input, held and decaying (see NOISE_FLOOR_DBFS). */
  private level = 0;
  /** The gain in force at the noise floor stage, smoothed. */
  private floorGain = 1;
  private readonly l = LIMITER_LOOKAHEAD;
  private readonly release = 1 - Math.exp(-1 / LIMITER_RELEASE);
  /** Gained samples waiting for their look-ahead, oldest first (a ring of l). */
  private readonly held: Float64Array;
  /** Needed gains of the held samples, for the sliding minimum (monotonic deque of positions). */
  private readonly need: Float64Array;
  private readonly deque: Int32Array;
  private head = 0;
  private tail = 0;
  /** The last l held-minimum values (a ring) and their sum: the smoothing mean. */
  private readonly recent: Float64Array;
  private recentSum: number;
  private envelope = 1;
  /** Samples taken in so far. */
  private count = 0;

  constructor(gainDb: number, ceilingDbfs = LIMITER_CEILING_DBFS) {
    this.gainDb = gainDb;
    this.ceilingDbfs = ceilingDbfs;
    this.gain = 10 ** (gainDb / 20);
    // A call starts in its engine's leading pause: at the noise floor.
    this.floorGain = gainDb > 0 ? 1 : this.gain;
    this.ceiling = 32768 * 10 ** (ceilingDbfs / 20);
    this.held = new Float64Array(this.l);
    this.need = new Float64Array(this.l);
    this.deque = new Int32Array(this.l + 1);
    this.recent = new Float64Array(this.l).fill(1);
    this.recentSum = this.l;
  }

  /**
   * Everything the stage holds between two samples, as plain data a thread can post to another:
   * a call whose pieces are spoken by different synthesis threads carries its stage from each
   * piece's thread to the next one's (GainStage.restore), so the call sounds as if one stage had
   * taken all of it.
   */
  snapshot(): GainStageState {
    return {
      gainDb: this.gainDb,
      ceilingDbfs: this.ceilingDbfs,
      level: this.level,
      floorGain: this.floorGain,
      held: this.held.slice(),
      need: this.need.slice(),
      deque: this.deque.slice(),
      head: this.head,
      tail: this.tail,
      recent: this.recent.slice(),
      recentSum: this.recentSum,
      envelope: this.envelope,
      count: this.count,
    };
  }

  /** A stage that goes on exactly where the one that took `state` stood. */
  static restore(state: GainStageState): GainStage {
    const stage = new GainStage(state.gainDb, state.ceilingDbfs);
    stage.level = state.level;
    stage.floorGain = state.floorGain;
    stage.held.set(state.held);
    stage.need.set(state.need);
    stage.deque.set(state.deque);
    stage.head = state.head;
    stage.tail = state.tail;
    stage.recent.set(state.recent);
    stage.recentSum = state.recentSum;
    stage.envelope = state.envelope;
    stage.count = state.count;
    return stage;
  }

  /** The samples made final by `pcm` (fewer than it, or none, at the start of a call). */
  process(pcm: Int16Array): Int16Array {
    const out = new Int16Array(Math.max(0, Math.min(pcm.length, this.count + pcm.length - (this.l - 1))));
    this.run(pcm, pcm.length, out);
    return out;
  }

  /** The samples still held, at the end of the call. */
  flush(): Int16Array {
    const out = new Int16Array(Math.min(this.count, this.l - 1));
    // Past the end is silence: it needs no reduction, and pushes the held samples out.
    this.run(undefined, this.l - 1, out);
    return out;
  }

  /** The gain for the input level `level`: the full gain, but a raise fades out at the noise floor. */
  private gainAtLevel(level: number): number {
    // Speech is above the floor nearly all the time: no logarithm for it (this runs per sample).
    if (this.gainDb <= 0 || level >= FLOOR_TOP) return this.gain;
    if (level <= FLOOR_BOTTOM) return 1;
    const db = level > 0 ? 20 * Math.log10(level / 32768) : -Infinity;
    const share = Math.min(
      1,
      Math.max(0, (db - (NOISE_FLOOR_DBFS - NOISE_FLOOR_RANGE_DB)) / NOISE_FLOOR_RANGE_DB),
    );
    return 10 ** ((this.gainDb * share) / 20);
  }

  /**
   * Takes `length` input samples (of `input`, or silence) one by one, and writes each answered
   * sample — the one l − 1 places before the sample taken, once there is one — to `out` in order.
   * This runs per sample of every call: the state lives in locals for the loop, and ring positions
   * advance by a comparison instead of a remainder (up to a fifth less time per sample).
   */
  private run(input: Int16Array | undefined, length: number, out: Int16Array): void {
    const { l, held, need: needs, deque, recent, gain, ceiling, release } = this;
    const ring = deque.length;
    let n = this.count;
    let level = this.level;
    let head = this.head;
    let tail = this.tail;
    let envelope = this.envelope;
    let recentSum = this.recentSum;
    let floorGain = this.floorGain;
    /** n's place in the rings of l (held, need, recent). */
    let slot = n % l;
    let o = 0;
    for (let i = 0; i < length; i++) {
      const sample = input === undefined ? 0 : input[i]!;
      // The limiter reckons with the full gain: the noise floor stage only ever gives less.
      const x = sample * gain;
      const need = Math.abs(x) > ceiling ? ceiling / Math.abs(x) : 1;
      level = Math.max(Math.abs(sample), level * LEVEL_DECAY);
      // The sample leaving the ring (n − l) has been answered already: its slot takes sample n.
      held[slot] = sample;
      needs[slot] = need;
      // Sliding minimum of the need over [n − l + 1, n]; a position p of it sits at slot − (n − p).
      while (tail !== head) {
        const before = tail === 0 ? ring - 1 : tail - 1;
        const at = slot - (n - deque[before]!);
        if (needs[at < 0 ? at + l : at]! > need) tail = before;
        else break;
      }
      deque[tail] = n;
      tail = tail + 1 === ring ? 0 : tail + 1;
      const first = deque[head]!;
      if (first <= n - l) head = head + 1 === ring ? 0 : head + 1;
      const j = n - (l - 1);
      const headAt = slot - (n - deque[head]!);
      n++;
      // j's place, (n − l + 1) mod l, is the next sample's.
      slot = slot + 1 === l ? 0 : slot + 1;
      if (j < 0) continue;
      // Held minimum of the window starting at j, with the slow release.
      const windowMin = needs[headAt < 0 ? headAt + l : headAt]!;
      envelope = Math.min(windowMin, envelope + (1 - envelope) * release);
      recentSum += envelope - recent[slot]!;
      recent[slot] = envelope;
      const g = Math.min(1, recentSum / l);
      // The level covers sample j and the l − 1 after it: the raise is back before speech starts.
      floorGain += (this.gainAtLevel(level) - floorGain) * FLOOR_SMOOTHING;
      const y = held[slot]! * floorGain * g;
      out[o++] = Math.max(-32768, Math.min(32767, Math.round(y)));
    }
    this.count = n;
    this.level = level;
    this.head = head;
    this.tail = tail;
    this.envelope = envelope;
    this.recentSum = recentSum;
    this.floorGain = floorGain;
  }
}
