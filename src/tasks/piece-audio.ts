/**
 * The canonical PCM (44.1 kHz mono s16) of every content piece, written by generation as it is
 * synthesised and read by stream sessions while it grows. A piece being generated in this process
 * is an append-only FsSessionCache (readers follow its growth); a finished piece is a complete file
 * under DATA_DIR/work. Readers wait on TaskEvents, never poll.
 */
import { createReadStream } from 'node:fs';
import { access, mkdir, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { AppError } from '../errors/app-error.js';
import { FsSessionCache } from '../stream/session-cache.fs.js';
import type { TaskEvents } from './task-events.js';

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

  private path(taskId: string, idx: number): string {
    return join(this.dir(taskId), `${idx}.pcm`);
  }

  /** The complete PCM of a piece generated on this node (generation reads it back to encode). */
  readComplete(taskId: string, idx: number, signal?: AbortSignal): Readable {
    return createReadStream(this.path(taskId, idx), signal === undefined ? {} : { signal });
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
        // Consumers iterate the reader later (the encoder takes a piece once the previous one is
        // done): an abort before then destroys it with an 'error' event nobody listens to yet,
        // which would be an uncaughtException. Iteration still reports the error.
        opened.on('error', () => undefined);
        return opened;
      }
      await change;
    }
  }

  private async tryOpen(taskId: string, idx: number, signal: AbortSignal): Promise<Readable | undefined> {
    const live = this.live.get(`${taskId}/${idx}`);
    if (live) return live.createReadStream(0, null, signal);
    const { piece: state, taskUnfinished } = await this.pieceState(taskId, idx);
    if (state === 'generated') {
      if (await this.hasPiece(taskId, idx)) return this.readComplete(taskId, idx, signal);
      // Generated by a node that is gone (scale-out): this node's worker generates it again.
      if (taskUnfinished) return undefined;
      throw new AppError('TTS_GENERATE_FAILED', `the audio of content ${idx} is not available on this node`);
    }
    if (state === 'failed') throw new AppError('TTS_GENERATE_FAILED', `generation of content ${idx} failed`);
    return undefined;
  }

  /** Whether this node holds the complete PCM of a piece (a task resumed on another node may not). */
  async hasPiece(taskId: string, idx: number): Promise<boolean> {
    if (this.live.has(`${taskId}/${idx}`)) return false;
    return access(this.path(taskId, idx)).then(
      () => true,
      () => false,
    );
  }

  /** Removes every piece file of a task. */
  async deleteTask(taskId: string): Promise<void> {
    await rm(this.dir(taskId), { recursive: true, force: true });
  }

  /**
   * Deletes the piece audio of tasks that no longer need it on this node: not being written here,
   * not among the tasks `stillNeeded` reports (unfinished ones), and untouched for `idleMs` (stream
   * pipelines of a finished task have read their pieces by then). On a cluster, the node that
   * deletes a task is rarely the one holding its piece audio, so every node sweeps its own.
   * Returns the task ids whose files were removed.
   */
  async sweep(stillNeeded: (taskIds: string[]) => Promise<Set<string>>, idleMs: number): Promise<string[]> {
    const names = await readdir(this.root).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [];
      throw err;
    });
    const idle: string[] = [];
    const cutoff = Date.now() - idleMs;
    for (const taskId of names) {
      if ([...this.live.keys()].some((key) => key.startsWith(`${taskId}/`))) continue;
      if ((await lastWrite(this.dir(taskId))) < cutoff) idle.push(taskId);
    }
    if (idle.length === 0) return [];
    const needed = await stillNeeded(idle);
    const removed = idle.filter((taskId) => !needed.has(taskId));
    for (const taskId of removed) await this.deleteTask(taskId);
    return removed;
  }
}

/** The newest modification time (ms) of a directory and the files in it. */
async function lastWrite(dir: string): Promise<number> {
  let newest = (await stat(dir)).mtimeMs;
  for (const name of await readdir(dir)) {
    const info = await stat(join(dir, name)).catch(() => undefined);
    if (info !== undefined) newest = Math.max(newest, info.mtimeMs);
  }
  return newest;
}
