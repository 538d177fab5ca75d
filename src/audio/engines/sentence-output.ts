/**
 * How a synthesis thread of an engine that makes a sentence's whole waveform at once (Flite, the
 * neural models) hands it on: resampled to the pipeline's rate in one go, posted as one chunk
 * with the sentence's end mark, then SENTENCE_END. Loaded only by worker modules.
 */
import { CANONICAL_RATE } from '../pcm.js';
import { createResampler } from '../resampler.js';
import type { TimingMark } from './engine.js';
import type { PieceOutput } from './piece-output.js';

/** A word's start in a piece's waveform (samples at the waveform's rate) and its text in the piece. */
export interface WaveWord {
  sample: number;
  textStart: number;
  textEnd: number;
}

/**
 * Resamples `wave` (at `rate`) and posts it as the piece's whole output with the sentence's mark
 * and the marks of `words` (in order), through the call's GainStage when the task carries one
 * (see PieceOutput); resolves with the samples of the piece.
 */
export async function postWholeSentence(
  output: PieceOutput,
  wave: Int16Array,
  rate: number,
  sentenceEnd: number | undefined,
  words: readonly WaveWord[] = [],
): Promise<number> {
  const pcm = await resampled(wave, rate);
  const marks: TimingMark[] =
    sentenceEnd === undefined ? [] : [{ kind: 'sentence', sample: 0, textStart: 0, textEnd: sentenceEnd }];
  // The resampler keeps sample 0 at sample 0 and the length in proportion: a word's place scales.
  const last = Math.max(pcm.length - 1, 0);
  for (const w of words) {
    const sample = Math.min(Math.round((w.sample * CANONICAL_RATE) / rate), last);
    marks.push({ kind: 'word', sample, textStart: w.textStart, textEnd: w.textEnd });
  }
  output.send(pcm, marks);
  return output.end();
}

/** `wave` (at `rate`) at the canonical rate, whole. */
async function resampled(wave: Int16Array, rate: number): Promise<Int16Array> {
  const resampler = await createResampler(rate);
  let pcm: Int16Array;
  try {
    const head = resampler.process(wave);
    const tail = resampler.flush();
    pcm = new Int16Array(head.length + tail.length);
    pcm.set(head);
    pcm.set(tail, head.length);
  } finally {
    resampler.destroy();
  }
  return pcm;
}
