/**
 * Drives generation: claims pending tasks from the durable queue (the tasks table) up to a
 * concurrency bound, synthesises each piece in order into its growing PCM file (readable by stream
 * sessions while it grows), encodes each finished piece to MP3, then the merged audio through one
 * continuous encoder, stored atomically. On start, tasks a stopped process left processing are
 * resumed (finished pieces are kept) or failed after too many attempts — never left processing.
 */
import { createReadStream } from 'node:fs';
import { Readable } from 'node:stream';
import type { FastifyBaseLogger } from 'fastify';
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
import type { TaskStore } from './task-store.js';

/** A task interrupted this many times (crash, restart) is failed instead of retried again. */
export const MAX_ATTEMPTS = 3;

export interface TaskRunnerDeps {
  store: TaskStore;
  pieceAudio: PieceAudioStore;
  blobs: BlobStore;
  encoders: EncoderPool;
  engineFor(binding: VoiceBinding): SpeechEngine;
  events: TaskEvents;
  concurrency: number;
  log: Pick<FastifyBaseLogger, 'info' | 'warn' | 'error'>;
}

export class TaskRunner {
  private readonly running = new Map<string, { controller: AbortController; done: Promise<void> }>();
  private stopped = false;
  private pumping = false;
  private pumpAgain = false;

  constructor(private readonly deps: TaskRunnerDeps) {}

  /** Recovers interrupted tasks, then starts working through the queue. */
  async start(): Promise<void> {
    const { requeued, failed } = await this.deps.store.recoverInterrupted(MAX_ATTEMPTS);
    if (requeued + failed > 0)
      this.deps.log.warn({ requeued, failed }, 'recovered interrupted generation tasks');
    this.wake();
  }

  /** Number of tasks being generated right now. */
  get active(): number {
    return this.running.size;
  }

  /** Looks for work; called when a task is queued and whenever a slot frees up. */
  wake(): void {
    if (this.stopped) return;
    if (this.pumping) {
      this.pumpAgain = true;
      return;
    }
    this.pumping = true;
    void this.pump().finally(() => {
      this.pumping = false;
      if (this.pumpAgain) {
        this.pumpAgain = false;
        this.wake();
      }
    });
  }

  private async pump(): Promise<void> {
    while (!this.stopped && this.running.size < this.deps.concurrency) {
      let task: TaskRow | undefined;
      try {
        task = await this.deps.store.claimNext();
      } catch (err) {
        if (!this.stopped) this.deps.log.error({ err }, 'could not claim a generation task');
        return;
      }
      if (!task) return;
      const claimed = task;
      const controller = new AbortController();
      const done = this.generate(claimed, controller.signal).finally(() => {
        this.running.delete(claimed.id);
        this.wake();
      });
      this.running.set(claimed.id, { controller, done });
    }
  }

  /** Stops taking work and interrupts running tasks; they stay processing and resume on next start. */
  async stop(): Promise<void> {
    this.stopped = true;
    const all = [...this.running.values()];
    for (const { controller } of all) controller.abort(new Error('service is shutting down'));
    await Promise.allSettled(all.map((r) => r.done));
  }

  private async generate(task: TaskRow, signal: AbortSignal): Promise<void> {
    const { store, events, log } = this.deps;
    this.deps.events.changed(task.id);
    let current: number | undefined;
    try {
      const pieces = await store.pieces(task.id);
      for (const piece of pieces) {
        if (piece.status === 'generated') continue;
        current = piece.idx;
        await this.generatePiece(task, piece, signal);
      }
      current = undefined;
      const totalSamples = (await store.pieces(task.id)).reduce(
        (sum, p, i, all) => sum + Number(p.samples ?? 0) + (i < all.length - 1 ? intervalSamples(p) : 0),
        0,
      );
      // Merged audio first, then `generated`: a generated task is complete, so a delete cannot race
      // the merged write (orphan blob), and a stop in between resumes the task instead of leaving
      // it generated without metadata.audio for good.
      await this.storeMergedAudio(task, pieces, signal);
      await store.markGenerated(task.id, totalSamples / CANONICAL_RATE);
      events.changed(task.id);
      log.info({ taskId: task.id, pieces: pieces.length }, 'task generated');
    } catch (err) {
      if (signal.aborted && this.stopped) return; // left processing: resumed on next start
      const message = isAppError(err) ? err.message : 'internal error during generation';
      log.error({ err, taskId: task.id, piece: current }, 'generation failed');
      await store
        .markFailed(task.id, message, current)
        .catch((e: unknown) => log.error({ err: e }, 'could not mark task failed'));
      events.changed(task.id);
    }
  }

  private async generatePiece(task: TaskRow, piece: TaskContentRow, signal: AbortSignal): Promise<void> {
    const { store, pieceAudio, blobs, encoders } = this.deps;
    const params = JSON.parse(piece.params) as PieceParams;
    const binding = voiceBindingSchema.parse(JSON.parse(piece.binding));
    await store.setPieceStatus(task.id, piece.idx, 'processing');
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
    const mp3 = encodePiece(
      pcmChunks(createReadStream(pieceAudio.path(task.id, piece.idx))),
      encoders.open(),
      signal,
    );
    await blobs.put(key, Readable.from(mp3), 'audio/mpeg');
    await store.pieceGenerated(task.id, piece.idx, samples, key);
    pieceAudio.pieceRecorded(task.id, piece.idx);
  }

  /** The merged finished audio: every piece and silence through one encoder, stored atomically. */
  private async storeMergedAudio(
    task: TaskRow,
    pieces: TaskContentRow[],
    signal: AbortSignal,
  ): Promise<void> {
    const { pieceAudio, blobs, encoders, store } = this.deps;
    // Lazily: one piece file open at a time.
    const sources = function* (): Iterable<ContinuousPiece> {
      for (const p of pieces) {
        yield {
          pcm: pcmChunks(createReadStream(pieceAudio.path(task.id, p.idx))),
          silenceAfterSeconds: (JSON.parse(p.params) as PieceParams).interval,
        };
      }
    };
    const key = `tasks/${task.id}/audio.mp3`;
    await blobs.put(key, Readable.from(encodeContinuous(sources(), encoders.open(), signal)), 'audio/mpeg');
    await store.setAudio(task.id, key);
  }
}

function intervalSamples(piece: TaskContentRow): number {
  return Math.round((JSON.parse(piece.params) as PieceParams).interval * CANONICAL_RATE);
}
