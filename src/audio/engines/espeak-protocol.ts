/**
 * What the espeak engine (main thread) and its worker threads exchange. Kept apart from the worker
 * module so that the main thread never loads that module (it lowers its thread's priority and
 * loads espeak when evaluated).
 */
import type { SentenceTask } from './sentence-protocol.js';
import type { ClausePause } from './sentences.js';

export { SENTENCE_END, type SentenceChunk } from './sentence-protocol.js';

/**
 * One sentence, or a clause of one, to speak; `voice` is an espeak spec such as 'gmw/en-US+f3'
 * (already validated).
 */
export interface SynthesizeTask extends SentenceTask {
  /**
   * Where the piece's sentence ends, from the piece's start (UTF-16): the sentence mark spans it.
   * Undefined on a sentence's later clauses, which start no sentence.
   */
  sentenceEnd: number | undefined;
  /** The pause espeak-ng makes after this clause inside its sentence, put back after it as silence. */
  pauseAfter?: ClausePause;
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
  /** The variants' own names and genders (from their files), in the order of `variants`. */
  variantInfo: { id: string; name: string; gender?: 'female' | 'male' }[];
}
