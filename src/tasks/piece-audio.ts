/**
 * The canonical PCM (44.1 kHz mono s16) of every content piece, written by generation as it is
 * synthesised and read by stream sessions while it grows. A piece being generated in this process
 * is an append-only FsSessionCache (readers follow its growth); a finished piece is a complete file
 * under DATA_DIR/work. Readers wait on TaskEvents, never poll.
 */
import { createReadStream } from 'node:fs';
import { mkdir, rm } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { AppError } from '../errors/app-error.js';
import { FsSessionCache } from '../stream/session-cache.fs.js';
import type { TaskEvents } from './task-events.js';

/** Where generation stands for one piece, as far as a reader cares. */
export type PieceState = 'waiting' | 'generated' | 'failed';

/** Looks up the persisted state of a piece (the task store). */
export type PieceStateLookup = (taskId: string, idx: number) => Promise<PieceState>;

/** Write side of one piece: append PCM bytes, then finish (or fail). */
export interface PieceWriter {
  append(pcm: Int16Array): Promise<void>;
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
}

export class PieceAudioStore implements PieceAudioSource {
  private readonly live = new Map<string, FsSessionCache>();

  constructor(
    private readonly root: string,
    private readonly events: TaskEvents,
    private readonly pieceState: PieceStateLookup,
  ) {}

  private dir(taskId: string): string {
    return join(this.root, taskId);
  }

  /** Path of a piece's complete PCM file. */
  path(taskId: string, idx: number): string {
    return join(this.dir(taskId), `${idx}.pcm`);
  }

  /** Starts (or restarts) writing a piece; any earlier partial file of it is discarded. */
  async startPiece(taskId: string, idx: number): Promise<PieceWriter> {
    const key = `${taskId}/${idx}`;
    await mkdir(this.dir(taskId), { recursive: true });
    await rm(this.path(taskId, idx), { force: true });
    const cache = new FsSessionCache({ dir: this.dir(taskId), name: `${idx}.pcm` });
    this.live.set(key, cache);
    this.events.changed(taskId);
    return {
      append: (pcm) => cache.append(new Uint8Array(pcm.buffer, pcm.byteOffset, pcm.byteLength)),
      finish: () => cache.finish(),
      fail: (err) => {
        cache.fail(err);
        this.live.delete(key);
        this.events.changed(taskId);
      },
    };
  }

  /** Called once the piece is recorded as generated: new readers then read the complete file. */
  pieceRecorded(taskId: string, idx: number): void {
    this.live.delete(`${taskId}/${idx}`);
    this.events.changed(taskId);
  }

  async openPiece(taskId: string, idx: number, signal: AbortSignal): Promise<Readable> {
    for (;;) {
      signal.throwIfAborted();
      // Subscribe before reading state so a change in between is not missed; unsubscribe on return.
      const subscription = new AbortController();
      const change = this.events.nextChange(taskId, AbortSignal.any([signal, subscription.signal]));
      change.catch(() => undefined);
      let opened: Readable | undefined;
      try {
        opened = await this.tryOpen(taskId, idx, signal);
      } catch (err) {
        subscription.abort();
        throw err;
      }
      if (opened !== undefined) {
        subscription.abort();
        return opened;
      }
      await change;
    }
  }

  private async tryOpen(taskId: string, idx: number, signal: AbortSignal): Promise<Readable | undefined> {
    const live = this.live.get(`${taskId}/${idx}`);
    if (live) return live.createReadStream(0, null, signal);
    const state = await this.pieceState(taskId, idx);
    if (state === 'generated') return createReadStream(this.path(taskId, idx), { signal });
    if (state === 'failed') throw new AppError('TTS_GENERATE_FAILED', `generation of content ${idx} failed`);
    return undefined;
  }

  /** Removes every piece file of a task. */
  async deleteTask(taskId: string): Promise<void> {
    await rm(this.dir(taskId), { recursive: true, force: true });
  }
}
