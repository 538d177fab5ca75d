/**
 * The piece-audio port: the canonical PCM (44.1 kHz mono s16) of every content piece, written by
 * generation as it is synthesised and read by stream sessions while it grows, and each piece's MP3
 * beside it: the canonical encoding, made while the PCM is written (one encode per piece: its
 * per-content stream forwards those bytes and they are what is stored), or, for an
 * instruct/design piece whose engine delivers MP3, that MP3 unchanged. A task of several
 * pieces also has its merged MP3, made while its pieces are written; full-task streams forward it
 * (and a one-piece task's piece MP3) instead of encoding the same audio again. Readers wait on
 * TaskEvents, never poll. The adapter keeps them as growing files on this node's disk
 * (`piece-audio.fs.ts`).
 */
import type { Readable } from 'node:stream';
import type { EncoderPool } from '../audio/encoder-pool.js';

/** Where generation stands for one piece, as far as a reader cares. */
export type PieceState = 'waiting' | 'generated' | 'failed';

/** The persisted state of a piece, and whether its task is still being generated. */
export interface PieceStatus {
  piece: PieceState;
  /** The task is pending or processing: a piece missing here may still be generated (again). */
  taskUnfinished: boolean;
}

/** Looks up the persisted state of a piece (the task store). */
export type PieceStateLookup = (taskId: string, idx: number) => Promise<PieceStatus>;

/** Looks up the persisted states of several pieces of one task at once: an entry for every idx asked. */
export type PieceStatesLookup = (
  taskId: string,
  idxs: readonly number[],
) => Promise<ReadonlyMap<number, PieceStatus>>;

/**
 * A PieceStateLookup that answers the lookups of one task made in the same turn of the event loop
 * with one `lookupMany` call. Readers waiting for pieces look again at every change of their task:
 * without this, N waiting readers made N database reads per change, and a task with 1,000 streams
 * waiting on its later contents took minutes of database work to generate.
 */
export function batchedPieceStates(lookupMany: PieceStatesLookup): PieceStateLookup {
  type Waiter = { resolve: (status: PieceStatus) => void; reject: (err: unknown) => void };
  const batches = new Map<string, Map<number, Waiter[]>>();
  const flush = (taskId: string, asked: Map<number, Waiter[]>): void => {
    batches.delete(taskId);
    lookupMany(taskId, [...asked.keys()]).then(
      (states) => {
        for (const [idx, waiters] of asked) {
          const status = states.get(idx);
          for (const waiter of waiters) {
            if (status === undefined)
              waiter.reject(new Error(`no state was found for piece ${idx} of ${taskId}`));
            else waiter.resolve(status);
          }
        }
      },
      (err: unknown) => {
        for (const waiters of asked.values()) for (const waiter of waiters) waiter.reject(err);
      },
    );
  };
  return (taskId, idx) =>
    new Promise<PieceStatus>((resolve, reject) => {
      let batch = batches.get(taskId);
      if (batch === undefined) {
        const asked = new Map<number, Waiter[]>();
        batches.set(taskId, asked);
        setImmediate(() => flush(taskId, asked));
        batch = asked;
      }
      const waiters = batch.get(idx) ?? [];
      waiters.push({ resolve, reject });
      batch.set(idx, waiters);
    });
}

/** Where a piece's MP3 comes from while it is written. */
export type PieceMp3Source =
  /** Encoded here from the piece's PCM as it arrives (the canonical 320 kbps encoding). */
  | {
      kind: 'encode';
      encoders: EncoderPool;
      signal: AbortSignal;
      interactive?: boolean;
      /** Someone listens to the task live: encoded in this process (EncoderPool.open). */
      listened?: boolean;
    }
  /** The engine's own MP3, given through `appendMp3`. */
  | { kind: 'engine' }
  /** None kept: readers encode the PCM themselves (what pieces written before this had). */
  | { kind: 'none' };

/** Write side of one piece: append PCM bytes (and engine MP3 bytes), then finish (or fail). */
export interface PieceWriter {
  append(pcm: Int16Array): Promise<void>;
  /** Appends engine MP3 bytes unchanged; only for a piece whose MP3 source is the engine. */
  appendMp3(mp3: Uint8Array): Promise<void>;
  /**
   * Someone listens to the task now: a piece whose MP3 the batch process encodes is encoded again
   * here from its first sample (its PCM is on disk), and live readers may follow it from then on.
   * The batch process's encoding would otherwise hold the task's next piece, at its priority.
   */
  encodeHere(): void;
  /** Completes the piece's PCM, then its MP3 (the encoding's end, or the engine's). */
  finish(): Promise<void>;
  fail(err: Error): void;
}

/** What stream sessions read: the PCM of a piece, following it while it is generated. */
export interface PieceAudioSource {
  /**
   * Waits until piece `idx` has started (or is complete) and returns a stream of its PCM bytes
   * that ends when the piece is complete; rejects with TTS_GENERATE_FAILED if generation failed.
   */
  openPiece(taskId: string, idx: number, signal: AbortSignal): Promise<Readable>;
  /**
   * The MP3 of a piece (its canonical encoding, or the engine's own for an instruct/design piece), like
   * openPiece: waits until the piece has started (or is complete) and returns a stream of those
   * bytes that follows the piece while it is generated; null when the piece keeps no MP3 (started
   * with `none`, or written before MP3s were kept beside the PCM) or while its MP3 is made by the
   * batch process, at a lower priority than a reader's own encoding. Rejects like openPiece.
   */
  openPieceMp3(taskId: string, idx: number, signal: AbortSignal): Promise<Readable | null>;
  /**
   * The canonical MP3 of a piece being generated on this node (the encoding of its PCM made
   * while it is written), following it from its first byte: waits like openPiece until the piece
   * has started; null when this node is not writing one for it (complete already, an engine's
   * own MP3, none kept, or made by the batch process), and the reader then encodes the PCM itself.
   */
  openCanonicalMp3(taskId: string, idx: number, signal: AbortSignal): Promise<Readable | null>;
  /**
   * The merged MP3 of a task of several pieces being generated on this node (every piece and
   * silence through one encoder, made while the pieces are written), following it from its first
   * byte: waits like openPiece until piece `firstIdx` has started (generation starts the merged
   * MP3 before its first piece); null when this node is not writing it (or the batch process
   * encodes it), and the reader then encodes the pieces itself.
   */
  openMergedMp3(taskId: string, firstIdx: number, signal: AbortSignal): Promise<Readable | null>;
}

/** Write side of a task's merged MP3 (see PieceAudioSource.openMergedMp3). */
export interface MergedMp3Writer {
  append(mp3: Uint8Array): Promise<void>;
  finish(): Promise<void>;
  fail(err: Error): void;
}

/**
 * The piece audio of this node: what generation writes (the task runner) and removes (the task
 * service), and what stream sessions read (PieceAudioSource).
 */
export interface PieceAudioStore extends PieceAudioSource {
  /** Starts (or restarts) writing a piece; any earlier partial file of it is discarded. */
  startPiece(taskId: string, idx: number, mp3Source: PieceMp3Source): Promise<PieceWriter>;
  /** Called once the piece is recorded as generated: new readers then read the complete file. */
  pieceRecorded(taskId: string, idx: number): void;
  /** The complete PCM of a piece generated on this node (what openPiece gives once it is recorded). */
  readComplete(taskId: string, idx: number, signal?: AbortSignal): Readable;
  /** The complete MP3 of a piece generated on this node (generation stores it as the piece's audio). */
  readCompleteMp3(taskId: string, idx: number, signal?: AbortSignal): Readable;
  /** Starts (or restarts) writing a task's merged MP3; any earlier file of it is discarded. */
  startMergedMp3(taskId: string): Promise<MergedMp3Writer>;
  /**
   * Writes (or writes again) a task's merged MP3 in the batch process, which `encoders` hosts:
   * every piece's PCM in order, each followed by its silence except the last, read there from the
   * piece files as they grow (the audio never passes through this process). Resolves once it is
   * complete; live readers do not follow it.
   */
  encodeMergedInHost(
    taskId: string,
    pieces: readonly { idx: number; silenceAfterSeconds: number }[],
    encoders: EncoderPool,
    signal: AbortSignal,
  ): Promise<void>;
  /** The complete merged MP3 of a task generated on this node (generation stores it as the task's audio). */
  readCompleteMergedMp3(taskId: string, signal?: AbortSignal): Readable;
  /**
   * Called once the task's merged MP3 is stored, or its writing or storing failed: new full-task
   * streams no longer follow it (they read the stored audio, or encode the pieces themselves).
   */
  mergedDone(taskId: string): void;
  /** Whether this node holds the complete PCM of a piece (a task resumed on another node may not). */
  hasPiece(taskId: string, idx: number): Promise<boolean>;
  /** Removes every piece file of a task. */
  deleteTask(taskId: string): Promise<void>;
  /**
   * Deletes the piece audio of tasks that no longer need it on this node: not being written here,
   * not among the tasks `stillNeeded` reports (unfinished ones), and untouched for `idleMs` (stream
   * pipelines of a finished task have read their pieces by then). Returns the task ids whose files
   * were removed.
   */
  sweep(stillNeeded: (taskIds: string[]) => Promise<Set<string>>, idleMs: number): Promise<string[]>;
}
