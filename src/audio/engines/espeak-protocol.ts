/**
 * What the espeak engine (main thread) and its worker threads exchange. Kept apart from the worker
 * module so that the main thread never loads that module (it lowers its thread's priority and
 * loads espeak when evaluated).
 */
import type { MessagePort } from 'node:worker_threads';

/** One sentence to speak; `voice` is an espeak spec such as 'gmw/en-US+f3' (already validated). */
export interface SynthesizeTask {
  text: string;
  voice: string;
  /** Words per minute. */
  rate: number;
  /** 0–99. */
  pitch: number;
  /** Where the sentence's PCM goes while it is spoken: Int16Array chunks in order, then SENTENCE_END. */
  port: MessagePort;
}

/** The last message of a sentence on its port (every chunk was posted before it). */
export const SENTENCE_END = 'end';

/** Voices and variants this espeak build knows. */
export interface EspeakCatalogue {
  /** `id` is what synthesis uses; `languages` are the codes the voice answers to (lower priority = better match). */
  voices: { id: string; name: string; languages: { code: string; priority: number }[] }[];
  variants: string[];
}
