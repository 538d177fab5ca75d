/**
 * What an embedded engine (main thread) and its synthesis threads exchange, whatever the engine.
 * Kept apart from the worker modules so that the main thread never loads one (a worker module
 * lowers its thread's priority and loads its wasm build when evaluated).
 */
import type { MessagePort } from 'node:worker_threads';
import type { TimingMark } from './engine.js';

/** One piece of text for a synthesis thread, and the port its audio goes to. */
export interface SentenceTask {
  text: string;
  /** Where the piece's audio goes while it is spoken: SentenceChunks in order, then SENTENCE_END. */
  port: MessagePort;
}

/**
 * A piece of a sentence's audio (canonical PCM) and the marks whose sample falls in it (the
 * sentence's end mark, if any, comes with the last piece). Mark samples count from the piece's
 * first sample, text offsets from the piece's first character.
 */
export interface SentenceChunk {
  pcm: Int16Array;
  marks: TimingMark[];
}

/** The last message of a piece on its port (every chunk was posted before it). */
export const SENTENCE_END = 'end';
