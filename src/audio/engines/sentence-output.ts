/**
 * How a synthesis thread of an engine that makes a sentence's whole waveform at once (Flite, the
 * neural models) hands it on: resampled to the pipeline's rate in one go, posted as one chunk
 * with the sentence's end mark, then SENTENCE_END. Loaded only by worker modules.
 */
import type { MessagePort } from 'node:worker_threads';
import { createResampler } from '../resampler.js';
import type { TimingMark } from './engine.js';
import { SENTENCE_END, type SentenceChunk } from './sentence-protocol.js';

/** Resamples `wave` (at `rate`) and posts it on `port`; resolves with the samples posted. */
export async function postWholeSentence(
  port: MessagePort,
  wave: Int16Array,
  rate: number,
  sentenceEnd: number | undefined,
): Promise<number> {
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
  const marks: TimingMark[] =
    sentenceEnd === undefined ? [] : [{ kind: 'sentence', sample: 0, textStart: 0, textEnd: sentenceEnd }];
  const samples = pcm.length;
  const chunk: SentenceChunk = { pcm, marks };
  port.postMessage(chunk, [pcm.buffer as ArrayBuffer]); // detaches pcm
  port.postMessage(SENTENCE_END);
  return samples;
}
