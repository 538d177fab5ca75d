/**
 * What the espeak engine (main thread) and its worker threads exchange. Kept apart from the worker
 * module so that the main thread never loads that module (it lowers its thread's priority and
 * loads espeak when evaluated).
 */
import type { MessagePort } from 'node:worker_threads';
import type { TimingMark } from './engine.js';

/** One sentence to speak; `voice` is an espeak spec such as 'gmw/en-US+f3' (already validated). */
export interface SynthesizeTask {
  text: string;
  voice: string;
  /** Words per minute. */
  rate: number;
  /** 0–99. */
  pitch: number;
  /** Where the sentence's audio goes while it is spoken: SentenceChunks in order, then SENTENCE_END. */
  port: MessagePort;
}

/**
 * A piece of a sentence's audio (canonical PCM) and the marks whose sample falls in it (the
 * sentence's end mark, if any, comes with the last piece). Mark samples count from the sentence's
 * first sample, text offsets from the sentence's first character.
 */
export interface SentenceChunk {
  pcm: Int16Array;
  marks: TimingMark[];
}

/** The last message of a sentence on its port (every chunk was posted before it). */
export const SENTENCE_END = 'end';

/** Voices and variants this espeak build knows. */
export interface EspeakCatalogue {
  /** `id` is what synthesis uses; `languages` are the codes the voice answers to (lower priority = better match). */
  voices: { id: string; name: string; languages: { code: string; priority: number }[] }[];
  variants: string[];
  /** The variants' own names and genders (from their files), in the order of `variants`. */
  variantInfo: { id: string; name: string; gender?: 'female' | 'male' }[];
}
