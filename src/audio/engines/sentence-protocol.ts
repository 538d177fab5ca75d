/**
 * What an embedded engine (main thread) and its synthesis threads exchange, whatever the engine.
 * Kept apart from the worker modules so that the main thread never loads one (a worker module
 * lowers its thread's priority and loads its wasm build when evaluated).
 */
import type { MessagePort } from 'node:worker_threads';
import type { GainStageState } from '../loudness.js';
import type { VoicedIndex } from '../voiced-index.js';
import type { TimingMark } from './engine.js';

/** One piece of text for a synthesis thread, and the port its audio goes to. */
export interface SentenceTask {
  text: string;
  /** Where the piece's audio goes while it is spoken: SentenceChunks in order, then SENTENCE_END. */
  port: MessagePort;
  /** Set when the call's loudness gain is applied in the synthesis threads (see PieceChain). */
  chain?: PieceChain;
}

/**
 * A piece of a call whose GainStage runs in the synthesis threads: the stage goes from each
 * piece's thread to the next piece's (a piece's last samples wait in it for the next piece's
 * first ones, the limiter's look-ahead), so the call's samples are those of one stage over all of
 * it. Such a piece's chunks carry their marks on the call's timeline and text, and the marks of a
 * sample the stage still holds go on with the stage.
 */
export interface PieceChain {
  /** The voice's gain (dB): the first piece starts the call's stage with it. */
  gainDb: number;
  /** Where the previous piece's thread hands over the stage (a ChainHandover); none on the first piece. */
  from?: MessagePort;
  /** Where this piece hands the stage on; none on the last piece, which flushes the stage. */
  to?: MessagePort;
  /** UTF-16 offset of the piece in the call's text. */
  textAt: number;
}

/** What a piece's thread hands the next one: the stage, the marks it holds, where the next piece starts. */
export interface ChainHandover {
  stage: GainStageState;
  /** Marks (call timeline) of samples the stage still holds. */
  pending: TimingMark[];
  /** Samples of the call before the next piece (its marks' samples count from there). */
  samples: number;
  /** Samples of the call posted so far (the stage holds the rest). */
  emitted: number;
}

/** A chained piece's first message: its thread took it, so the next piece may be queued (it waits for this one). */
export const SENTENCE_STARTED = 'started';

/**
 * A piece of a sentence's audio (canonical PCM) and the marks whose sample falls in it (the
 * sentence's end mark, if any, comes with the last piece). Mark samples count from the piece's
 * first sample, text offsets from the piece's first character; in a chained piece (PieceChain)
 * both count from the call's start.
 */
export interface SentenceChunk {
  pcm: Int16Array;
  marks: TimingMark[];
  /** Where the chunk is voiced, at its start, end and marks (the timing collector's questions). */
  voiced?: VoicedIndex;
}

/** The last message of a piece on its port (every chunk was posted before it). */
export const SENTENCE_END = 'end';
