/**
 * What the Flite engine (main thread) and its worker threads exchange. Kept apart from the worker
 * module so that the main thread never loads that module (it lowers its thread's priority and
 * loads the wasm build when evaluated).
 */
import type { SentenceTask } from './sentence-protocol.js';

/** One piece of text to speak: a sentence, or a clause of a long one. */
export interface FliteTask extends SentenceTask {
  /** A built-in voice name such as 'slt' (already validated). */
  voice: string;
  /** Flite's duration_stretch: 2 speaks twice as long. */
  stretch: number;
  /**
   * Set when the piece starts a sentence: it gets the sentence's mark at its first sample, ending
   * this many UTF-16 units after the piece's first character (where the sentence ends).
   */
  sentenceEnd?: number;
  /** The piece continues a sentence: Flite's leading pause is left out (the clause before it ended with one). */
  continues: boolean;
  /** Place its words too (word marks): a second, short Flite run for words not read before. */
  words: boolean;
}
