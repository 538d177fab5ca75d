/**
 * Drives generation: takes task deliveries from the TaskQueue (under a lease, at most `concurrency`
 * at once on this node), claims each in the database with the lease's fencing token, synthesises
 * each piece in order into its growing PCM file (readable by stream sessions while it grows),
 * encodes each finished piece to MP3, then the merged audio through one continuous encoder, stored
 * atomically. Every database write is fenced by the token: a holder whose lease was lost (and the
 * task delivered again elsewhere) stops at its next write without touching the task. On start,
 * every unfinished task is queued (the queue never steals a live lease), so tasks a stopped process
 * left processing resume — finished pieces are kept — or fail after too many attempts.
 */
import { Readable } from 'node:stream';
import type { Logger } from 'pino';
import { encodeContinuous, encodePiece, type ContinuousPiece } from '../audio/continuous-encoder.js';
import type { EncoderPool } from '../audio/encoder-pool.js';
import type { SpeechEngine } from '../audio/engines/engine.js';
import { CANONICAL_RATE } from '../audio/pcm.js';
import { pcmChunks } from '../audio/pcm-stream.js';
import { isAppError } from '../errors/app-error.js';
import type { BlobStore } from '../storage/blob-store.js';
import type { TaskContentRow, TaskRow } from '../storage/schema.js';
import { voiceBindingSchema, type VoiceBinding } from '../voices/voice-binding.js';
import type { PieceParams } from './generate-request.js';
import type { PieceAudioStore } from './piece-audio.js';
import type { TaskEvents } from './task-events.js';
import { LeaseLostError, QueueClosingError, type TaskLease, type TaskQueue } from './task-queue.js';
import type { TaskStore } from './task-store.js';

/** A task interrupted this many times (crash, restart) is failed instead of retried again. */
export const MAX_ATTEMPTS = 3;

export interface TaskRunnerDeps {
  store: TaskStore;
  /** Who generates what: deliveries under leases (in-process or shared by every node). */
  queue: TaskQueue;
  /** This node's base URL, recorded on each task it claims. */
  workerUrl: string;
  pieceAudio: PieceAudioStore;
  blobs: BlobStore;
  encoders: EncoderPool;
  engineFor(binding: VoiceBinding): SpeechEngine;
  events: TaskEvents;
  concurrency: number;
  /** Piece audio of finished tasks untouched this long is deleted from this node's work files. */
  workFilesIdleMs: number;
  log: Pick<Logger, 'info' | 'warn' | 'error'>;
}

/** The generation worker of one node: consumes the TaskQueue and writes under the lease's token. */
export class TaskRunner {
  private sweepTimer: NodeJS.Timeout | undefined;

  constructor(private readonly deps: TaskRunnerDeps) {}

  /** Queues every unfinished task (interrupted ones resume), then starts taking deliveries. */
  async start(): Promise<void> {
    const unfinished = await this.deps.store.unfinishedIds();
    await this.deps.queue.enqueue(unfinished);
    if (unfinished.length > 0)
      this.deps.log.info({ tasks: unfinished.length }, 'queued unfinished generation tasks');
    await this.deps.queue.start((lease) => this.handle(lease), this.deps.concurrency);
    const every = Math.max(1000, Math.min(this.deps.workFilesIdleMs, 10 * 60_000));
    this.sweepTimer = setInterval(() => void this.sweepWorkFiles(), every);
    this.sweepTimer.unref();
    void this.sweepWorkFiles();
  }

  /** Deletes this node's piece audio of tasks that are finished or gone (see PieceAudioStore.sweep). */
  async sweepWorkFiles(): Promise<void> {
    const { pieceAudio, store, log, workFilesIdleMs } = this.deps;
    try {
      const removed = await pieceAudio.sweep((ids) => store.unfinishedAmong(ids), workFilesIdleMs);
      if (removed.length > 0) log.info({ tasks: removed.length }, 'removed piece audio of finished tasks');
    } catch (err) {
      log.warn({ err }, 'could not sweep piece audio work files');
    }
  }

  /** Number of tasks being generated on this node right now. */
  get active(): number {
    return this.deps.queue.active;
  }

  /** Queues a new task (TaskService calls this after inserting it). */
  async enqueue(taskId: string): Promise<void> {
    await this.deps.queue.enqueue([taskId]);
  }

  /** Stops taking work and interrupts running tasks; they stay processing and are delivered again. */
  async stop(): Promise<void> {
    clearInterval(this.sweepTimer);
    await this.deps.queue.close();
  }

  /** One delivery: claim the task under the lease token, then generate it (never throws). */
  private async handle(lease: TaskLease): Promise<void> {
    const { store, events, log, workerUrl } = this.deps;
    if (lease.signal.aborted) return; // interrupted before it began: no attempt to count
    let task: TaskRow | undefined;
    try {
      task = await store.claim(lease.taskId, lease.token, workerUrl);
    } catch (err) {
      // Left as it is: queued again when a runner starts.
      log.error({ err, taskId: lease.taskId }, 'could not claim a generation task');
      return;
    }
    if (task === undefined) return; // deleted or finished meanwhile: nothing to do
    if (task.attempts > MAX_ATTEMPTS) {
      await store
        .markFailed(task.id, `generation was interrupted ${task.attempts - 1} times`, undefined, lease.token)
        .then(
          () => log.warn({ taskId: task.id }, 'generation task failed after too many interrupted attempts'),
          (err: unknown) => log.error({ err, taskId: task.id }, 'could not mark task failed'),
        );
      events.changed(task.id);
      return;
    }
    await this.generate(task, lease);
  }

  private async generate(task: TaskRow, lease: TaskLease): Promise<void> {
    const { store, events, log } = this.deps;
    const { signal, token } = lease;
    events.changed(task.id);
    let current: number | undefined;
    try {
      const pieces = await store.pieces(task.id);
      for (const piece of pieces) {
        // A piece generated on another node (its worker died) has no PCM here: generate it again.
        if (piece.status === 'generated' && (await this.deps.pieceAudio.hasPiece(task.id, piece.idx)))
          continue;
        current = piece.idx;
        await this.generatePiece(task, piece, lease);
      }
      current = undefined;
      const totalSamples = (await store.pieces(task.id)).reduce(
        (sum, p, i, all) => sum + Number(p.samples ?? 0) + (i < all.length - 1 ? intervalSamples(p) : 0),
        0,
      );
      // Merged audio first, then `generated`: a generated task is complete, so a delete cannot race
      // the merged write (orphan blob), and a stop in between resumes the task instead of leaving
      // it generated without metadata.audio for good.
      await this.storeMergedAudio(task, pieces, lease);
      await store.markGenerated(task.id, totalSamples / CANONICAL_RATE, token);
      events.changed(task.id);
      log.info({ taskId: task.id, pieces: pieces.length }, 'task generated');
    } catch (err) {
      // Lease lost or queue closing: the task is someone else's now, or is delivered again later.
      if (err instanceof LeaseLostError || signal.aborted) {
        if (!(signal.reason instanceof QueueClosingError))
          log.warn(
            { taskId: task.id, piece: current, reason: String(signal.reason ?? err) },
            'generation lease lost',
          );
        return;
      }
      const message = isAppError(err) ? err.message : 'internal error during generation';
      log.error({ err, taskId: task.id, piece: current }, 'generation failed');
      await store.markFailed(task.id, message, current, token).catch((e: unknown) => {
        if (e instanceof LeaseLostError) log.warn({ taskId: task.id }, 'generation lease lost');
        else log.error({ err: e }, 'could not mark task failed');
      });
      events.changed(task.id);
    }
  }

  private async generatePiece(task: TaskRow, piece: TaskContentRow, lease: TaskLease): Promise<void> {
    const { store, pieceAudio, blobs, encoders } = this.deps;
    const { signal, token } = lease;
    const params = JSON.parse(piece.params) as PieceParams;
    const binding = voiceBindingSchema.parse(JSON.parse(piece.binding));
    await store.setPieceStatus(task.id, piece.idx, 'processing', token);
    const writer = await pieceAudio.startPiece(task.id, piece.idx);
    let samples = 0;
    try {
      const engine = this.deps.engineFor(binding);
      const request = {
        text: piece.text,
        voice: binding,
        speechRate: params.speechRate,
        ...(params.seed !== undefined && { seed: params.seed }),
        ...(params.preset !== undefined && { preset: params.preset }),
        ...(params.language !== undefined && { language: params.language }),
        ...(params.instruct_mode !== undefined && { instructMode: params.instruct_mode }),
      };
      for await (const pcm of engine.synthesize(request, signal)) {
        samples += pcm.length;
        await writer.append(pcm);
      }
      await writer.finish();
    } catch (err) {
      writer.fail(err instanceof Error ? err : new Error(String(err)));
      throw err;
    }
    const key = `tasks/${task.id}/contents/${piece.idx}.mp3`;
    const mp3 = encodePiece(pcmChunks(pieceAudio.readComplete(task.id, piece.idx)), encoders.open(), signal);
    await blobs.put(key, Readable.from(mp3), 'audio/mpeg');
    await store.pieceGenerated(task.id, piece.idx, samples, key, token);
    pieceAudio.pieceRecorded(task.id, piece.idx);
  }

  /** The merged finished audio: every piece and silence through one encoder, stored atomically. */
  private async storeMergedAudio(
    task: TaskRow,
    pieces: TaskContentRow[],
    { signal, token }: TaskLease,
  ): Promise<void> {
    const { pieceAudio, blobs, encoders, store } = this.deps;
    // Lazily: one piece file open at a time.
    const sources = function* (): Iterable<ContinuousPiece> {
      for (const p of pieces) {
        yield {
          pcm: pcmChunks(pieceAudio.readComplete(task.id, p.idx)),
          silenceAfterSeconds: (JSON.parse(p.params) as PieceParams).interval,
        };
      }
    };
    const key = `tasks/${task.id}/audio.mp3`;
    await blobs.put(key, Readable.from(encodeContinuous(sources(), encoders.open(), signal)), 'audio/mpeg');
    await store.setAudio(task.id, key, token);
  }
}

function intervalSamples(piece: TaskContentRow): number {
  return Math.round((JSON.parse(piece.params) as PieceParams).interval * CANONICAL_RATE);
}
