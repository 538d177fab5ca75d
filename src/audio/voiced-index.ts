/**
 * Where a chunk of canonical PCM is voiced, as much as the timing collector asks of it: at chosen
 * positions of the chunk (its start, its end and where its timing marks fall), the first voiced
 * sample at or after each and the last one before it. A synthesis thread indexes the chunks it
 * makes, so the collector on the main thread answers its questions per mark instead of scanning
 * every sample of every piece there (most of them in the pauses, where a scan runs longest).
 */
import type { TimingMark } from './engines/engine.js';

/**
 * Samples at least this loud (|s|, s16) count as voiced: −50 dBFS, below any speech and above
 * the dither and resampling ripple engines leave in their pauses.
 */
export const VOICED_LEVEL = 104;

/** Positions of a chunk with the voiced samples nearest to each; -1 where there is none. */
export interface VoicedIndex {
  /** Positions in the chunk, ascending and distinct: 0 first, the chunk's length last. */
  at: Int32Array;
  /** The first voiced sample at or after `at[k]`, or -1. */
  next: Int32Array;
  /** The last voiced sample before `at[k]`, or -1. */
  prev: Int32Array;
}

export function isVoiced(sample: number): boolean {
  return sample >= VOICED_LEVEL || sample <= -VOICED_LEVEL;
}

/**
 * Where the timing collector cuts a chunk of `length` samples starting at `start` (on the marks'
 * timeline) at its `marks`: each mark's sample, kept in order and within the chunk.
 */
export function markPositions(marks: readonly TimingMark[], start: number, length: number): number[] {
  const out: number[] = [];
  let scanned = 0;
  for (const mark of marks) {
    scanned = Math.min(Math.max(mark.sample - start, scanned), length);
    out.push(scanned);
  }
  return out;
}

/** The index of `pcm` at `positions` (each within 0…length), with its start and end. */
export function indexVoiced(pcm: Int16Array, positions: readonly number[]): VoicedIndex {
  const at = Int32Array.from(new Set([0, ...positions, pcm.length])).sort();
  const next = new Int32Array(at.length).fill(-1);
  const prev = new Int32Array(at.length).fill(-1);
  let last = -1;
  /** The first position whose next voiced sample is still to be found. */
  let open = 0;
  let k = 0;
  for (let i = 0; i < pcm.length; i++) {
    while (k < at.length && at[k]! <= i) prev[k++] = last;
    if (isVoiced(pcm[i]!)) {
      last = i;
      while (open < k || (open < at.length && at[open]! <= i)) next[open++] = i;
    }
  }
  while (k < at.length) prev[k++] = last;
  return { at, next, prev };
}

/** The index of `length` samples of silence. */
export function silentIndex(length: number): VoicedIndex {
  const at = length === 0 ? Int32Array.of(0) : Int32Array.of(0, length);
  return { at, next: new Int32Array(at.length).fill(-1), prev: new Int32Array(at.length).fill(-1) };
}

/** The index of chunks played one after another; undefined when one of them has none. */
export function concatVoiced(
  parts: readonly { length: number; voiced?: VoicedIndex | undefined }[],
): VoicedIndex | undefined {
  const at: number[] = [];
  const next: number[] = [];
  const prev: number[] = [];
  let offset = 0;
  for (const part of parts) {
    const index = part.voiced;
    if (index === undefined) return undefined;
    for (let k = 0; k < index.at.length; k++) {
      const n = index.next[k] === -1 ? -1 : index.next[k]! + offset;
      // A part's start is the end of the part before it: one position, whose next voiced sample
      // is this part's first (nothing of the part before lies at or after its end).
      if (k === 0 && at.length > 0 && at[at.length - 1] === offset) {
        next[next.length - 1] = n;
        continue;
      }
      at.push(index.at[k]! + offset);
      next.push(n);
      prev.push(index.prev[k] === -1 ? -1 : index.prev[k]! + offset);
    }
    offset += part.length;
  }
  // Within a part, -1 means none in that part: the nearest voiced sample is then in another one
  // (before a position: the latest found so far; after it: the earliest found after it).
  let last = -1;
  for (let k = 0; k < at.length; k++) {
    if (prev[k] === -1) prev[k] = last;
    else last = prev[k]!;
  }
  let first = -1;
  for (let k = at.length - 1; k >= 0; k--) {
    if (next[k] === -1) next[k] = first;
    else first = next[k]!;
  }
  return { at: Int32Array.from(at), next: Int32Array.from(next), prev: Int32Array.from(prev) };
}
