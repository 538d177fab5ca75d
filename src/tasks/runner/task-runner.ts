/**
 * Drives generation: takes task deliveries from the TaskQueue (under a lease, at most `concurrency`
 * at once on this node), claims each in the database with the lease's fencing token, synthesises
 * each piece in order into its growing PCM file (readable by stream sessions while it grows),
 * encodes each finished piece to MP3 (an instruct/design piece whose engine delivers MP3 keeps and
 * stores that MP3 unchanged instead), then the merged audio through one continuous
 * encoder, stored atomically. Every database write is fenced by the token: a holder whose lease
 * was lost (and the task delivered again elsewhere) stops at its next write without touching the
 * task. On start, every unfinished task is queued (the queue never steals a live lease), so tasks
 * a stopped process left processing resume — finished pieces are kept — or fail after too many
 * attempts.
 *
 * Per-account fairness: the claim refuses a task whose account already has
 * `accountConcurrency` tasks processing anywhere (counted in the database), and the delivery goes
 * back to the queue (ACCOUNT_BUSY).
 *
 * Short work has its own lane (`shortLane`): a task of at most `maxChars` characters (one-shot
 * synthesis, a sentence or two) goes to a second queue with its own slots, so it never waits behind
 * long tasks holding every generation slot; the lane is fair across accounts like the main one, and
 * its tasks do not count against the account's concurrency limit of long tasks (a short task is
 * over in a second or so). See docs/decisions.md (Generation lanes). Cancellation: while a task runs here, the runner watches its
 * task events and re-reads the task's cancel reason at each; when one is set (by any node's
 * `POST …/cancel`), the task is aborted as by abort() and failed with that reason.
 */
import type { Logger } from 'pino';
import { encodeContinuous, type ContinuousPiece } from '../../audio/continuous-encoder.js';
import type { EncoderPool } from '../../audio/encoder-pool.js';
import { audioWithMarks, EngineCallError, type SpeechEngine } from '../../audio/engines/engine.js';
import { CANONICAL_RATE } from '../../audio/pcm.js';
import { pcmChunks } from '../../audio/pcm-stream.js';
import { AppError, isAppError } from '../../errors/app-error.js';
import { isDependencyUnavailable } from '../../errors/dependency-unavailable.js';
import type { BlobStore } from '../../storage/blob-store.js';
import { storageUnavailable } from '../../storage/storage-errors.js';
import type { TaskContentRow, TaskRow } from '../../storage/schema.js';
import { voiceBindingSchema, type VoiceBinding } from '../../audio/engines/engine-registry.js';
import type { PieceParams } from '../requests/generate-request.js';
import { presetStyle } from '../requests/generation-params.js';
import type { PieceAudioStore } from '../piece-audio.js';
import type { TaskEvents } from '../queue/task-events.js';
import {
  ACCOUNT_BUSY,
  RETRY_LATER,
  LeaseLostError,
  QueueClosingError,
  type QueuedTask,
  type TaskLease,
  type TaskOutcome,
  type TaskQueue,
} from '../queue/task-queue.js';
import type { ClaimOutcome, TaskStore } from '../task-store.js';
import { TimingCollector, type SentenceTiming } from '../timings/timing-collector.js';
import type { TimingStore } from '../timings/timing-store.js';

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
  /**
   * Whether a live session of the task on this node is to play its audio at `at` seconds soon: that
   * batch work then stays in this process's threads when other batch work runs in the batch
   * process. Absent = nobody.
   */
  listened?: ((taskId: string, at: number) => boolean) | undefined;
  /** Where each piece's timed sentences go as they are synthesised; absent = none recorded. */
  timings?: TimingStore | undefined;
  events: TaskEvents;
  concurrency: number;
  /** Tasks of one account processing at once across every node (ACCOUNT_MAX_CONCURRENT_TASKS); 0 or absent = unlimited. */
  accountConcurrency?: number;
  /** Piece audio of finished tasks untouched this long is deleted from this node's work files. */
  workFilesIdleMs: number;
  /** The lane of short tasks; absent = every task goes to `queue`. */
  shortLane?: ShortLane | undefined;
  log: Pick<Logger, 'info' | 'warn' | 'error'>;
}

/** A second queue with its own slots for tasks of at most `maxChars` characters. */
export interface ShortLane {
  queue: TaskQueue;
  /** Slots of this lane on this node (besides the `concurrency` of the main queue). */
  concurrency: number;
  /** Tasks with at most this many characters take this lane. */
  maxChars: number;
}

/** A task to generate: what the queue needs, plus its size, which picks its lane. */
export interface GenerationJob extends QueuedTask {
  readonly characters: number;
}

/** The generation worker of one node: consumes the TaskQueue and writes under the lease's token. */
export class TaskRunner {
  private sweepTimer: NodeJS.Timeout | undefined;
  /** Aborts the work of each task being generated on this node (see abort()). */
  private readonly running = new Map<string, AbortController>();

  constructor(private readonly deps: TaskRunnerDeps) {}

  /** Queues every unfinished task (interrupted ones resume), then starts taking deliveries. */
  async start(): Promise<void> {
    const unfinished = await this.deps.store.unfinished();
    // Positions count per lane and account: each lane is fair on its own.
    const positions = new Map<string, number>();
    const byLane = new Map<TaskQueue, QueuedTask[]>();
    for (const { id, account_id: accountId, characters } of unfinished) {
      const queue = this.laneOf(characters);
      const key = `${queue === this.deps.queue ? 'main' : 'short'}:${accountId}`;
      const position = (positions.get(key) ?? 0) + 1;
      positions.set(key, position);
      byLane.set(queue, [...(byLane.get(queue) ?? []), { taskId: id, accountId, position }]);
    }
    for (const [queue, tasks] of byLane) await queue.enqueue(tasks);
    if (unfinished.length > 0)
      this.deps.log.info({ tasks: unfinished.length }, 'queued unfinished generation tasks');
    const short = this.deps.shortLane;
    if (short !== undefined) {
      await short.queue.start((lease) => this.handle(lease, 0), short.concurrency);
    }
    await this.deps.queue.start(
      (lease) => this.handle(lease, this.deps.accountConcurrency ?? 0),
      this.deps.concurrency,
    );
    const every = Math.max(1000, Math.min(this.deps.workFilesIdleMs, 10 * 60_000));
    this.sweepTimer = setInterval(() => void this.sweepWorkFiles(), every);
    this.sweepTimer.unref();
    void this.sweepWorkFiles();
  }

  /** Whether a task of `characters` characters is short-lane work. */
  private isShort(characters: number): boolean {
    const short = this.deps.shortLane;
    return short !== undefined && characters <= short.maxChars;
  }

  /** The queue of a task of `characters` characters: the short lane when it fits there. */
  private laneOf(characters: number): TaskQueue {
    return this.deps.shortLane !== undefined && this.isShort(characters)
      ? this.deps.shortLane.queue
      : this.deps.queue;
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

  /** Engine calls that failed on this node since it started, by engine (metrics). */
  readonly engineErrors = new Map<string, number>();

  /** Number of tasks being generated on this node right now. */
  get active(): number {
    return this.deps.queue.active + (this.deps.shortLane?.queue.active ?? 0);
  }

  /** Queues a new task in its lane (TaskService calls this after inserting it). */
  async enqueue(job: GenerationJob): Promise<void> {
    const { taskId, accountId, position } = job;
    await this.laneOf(job.characters).enqueue([{ taskId, accountId, position }]);
  }

  /** Takes a cancelled task out of the queue if it was not delivered yet. */
  async dequeue(taskId: string): Promise<void> {
    await Promise.all([this.deps.queue.remove(taskId), this.deps.shortLane?.queue.remove(taskId)]);
  }

  /**
   * Stops the generation of `taskId` on this node now, its in-flight engine call included, and
   * records the task as failed with `reason`'s message (an AppError's message is shown to the
   * tenant; any other reason reads "generation was cancelled"). Returns false when the task is not
   * being generated on this node (pending, finished, or on another node).
   */
  abort(taskId: string, reason: Error): boolean {
    const control = this.running.get(taskId);
    if (control === undefined || control.signal.aborted) return false;
    control.abort(reason);
    return true;
  }

  /** Stops taking work and interrupts running tasks; they stay processing and are delivered again. */
  async stop(): Promise<void> {
    clearInterval(this.sweepTimer);
    await Promise.all([this.deps.queue.close(), this.deps.shortLane?.queue.close()]);
  }

  /**
   * One delivery: claim the task under the lease token, then generate it (never throws).
   * ACCOUNT_BUSY when its account already has `accountConcurrency` long tasks processing (0 = no limit);
   * RETRY_LATER when the claim could not be made (the database did not answer).
   */
  private async handle(lease: TaskLease, accountConcurrency: number): Promise<TaskOutcome> {
    const { events } = this.deps;
    if (lease.signal.aborted) return; // interrupted before it began: no attempt to count
    // Subscribed before the claim, which finds no cancellation asked for: the watch below then
    // needs no first read, since a request made after the claim's read is this change.
    const watching = new AbortController();
    const firstCancel = events.nextChange(lease.taskId, watching.signal, { only: 'cancel' });
    firstCancel.catch(() => undefined);
    try {
      return await this.claimAndGenerate(lease, accountConcurrency, firstCancel, watching);
    } finally {
      watching.abort(); // whichever way the delivery ends, the subscription ends with it
    }
  }

  /** handle() once subscribed to the task's cancellations (`firstCancel`, ended by `watching`). */
  private async claimAndGenerate(
    lease: TaskLease,
    accountConcurrency: number,
    firstCancel: Promise<void>,
    watching: AbortController,
  ): Promise<TaskOutcome> {
    const { store, events, log, workerUrl } = this.deps;
    let claim: ClaimOutcome;
    try {
      claim = await store.claimWithin(lease.taskId, lease.token, workerUrl, {
        maxConcurrent: accountConcurrency,
        // Short tasks have their own lane and do not take an account's place among its long ones.
        countAbove: this.deps.shortLane?.maxChars ?? 0,
      });
    } catch (err) {
      // The task is still pending: delivered again shortly (the database may be restarting).
      log.error({ err, taskId: lease.taskId }, 'could not claim a generation task; retrying later');
      return RETRY_LATER;
    }
    switch (claim.kind) {
      case 'gone':
        return; // deleted or finished meanwhile: nothing to do
      case 'busy':
        return ACCOUNT_BUSY;
      case 'cancelled':
        events.changed(lease.taskId, 'status');
        return;
      case 'claimed':
        break;
    }
    const task = claim.task;
    // Processing on this node: kept stream views of it are stale from now (announced at once, so
    // that a client who reads the new status finds no node on its own answering from the old one).
    events.changed(task.id, 'status');
    if (task.attempts > MAX_ATTEMPTS) {
      const message = `generation was interrupted ${task.attempts - 1} times`;
      const outcome = await this.recordFailure(task.id, message, undefined, lease.token);
      if (outcome === undefined)
        log.warn({ taskId: task.id }, 'generation task failed after too many interrupted attempts');
      return outcome;
    }
    // The lease's signal, plus abort() for this task: every engine call and write below stops on it.
    const control = new AbortController();
    this.running.set(task.id, control);
    const watcher = this.watchCancellation(task.id, firstCancel, watching.signal);
    try {
      return await this.generate(task, {
        taskId: lease.taskId,
        token: lease.token,
        signal: AbortSignal.any([lease.signal, control.signal]),
      });
    } finally {
      watching.abort(); // the watcher ends only then
      await watcher;
      this.running.delete(task.id);
    }
  }

  /**
   * Until `signal` aborts: at every cancellation request of the task (the first is `first`, the
   * change subscribed to before the claim read the task uncancelled; and at spurious wake-ups),
   * re-reads its cancel reason; when one is set, aborts the generation with it. The generation's
   * own progress does not wake it (a read per piece change, for nothing). Never throws.
   */
  private async watchCancellation(taskId: string, first: Promise<void>, signal: AbortSignal): Promise<void> {
    const { store, events, log } = this.deps;
    try {
      await first;
      while (!signal.aborted) {
        // Subscribe before reading, so a request in between is not missed (TaskEvents contract).
        const change = events.nextChange(taskId, signal, { only: 'cancel' });
        change.catch(() => undefined);
        const reason = await store.cancelReason(taskId);
        if (reason !== undefined) {
          this.abort(taskId, new AppError('TTS_GENERATE_FAILED', reason));
          return;
        }
        await change;
      }
    } catch (err) {
      if (!signal.aborted) log.warn({ err, taskId }, 'stopped watching a task for cancellation');
    }
  }

  /**
   * Generates the task's pending pieces, stores its merged audio and marks it generated; on an
   * error, fails it with a message tenants may read — except when a backing service went away
   * (PostgreSQL restarting, Redis or the bucket unreachable): then RETRY_LATER, and a later
   * delivery resumes it (at most MAX_ATTEMPTS deliveries in all), instead of failing a task for a
   * blip or leaving it processing when its failure could not be recorded either.
   */
  private async generate(task: TaskRow, lease: TaskLease): Promise<void | typeof RETRY_LATER> {
    const { store, events, log } = this.deps;
    const { signal, token } = lease;
    const aborted = this.running.get(task.id)?.signal;
    events.changed(task.id);
    let current: number | undefined;
    // Stops the merged audio's encoding when the pieces' generation fails.
    const merging = new AbortController();
    let merged: Promise<StoredMerged | undefined> | undefined;
    try {
      const pieces = await store.pieces(task.id);
      merged = (await this.startMergedAudio(task, pieces, AbortSignal.any([signal, merging.signal]))).stored;
      merged.catch(() => undefined); // awaited below, or moot once generation failed
      /** Samples of the task's audio before the next piece (pieces and silences): its place in the queue. */
      let before = 0;
      /** When this delivery began making the task's audio: its pieces are due from then on. */
      const since = performance.now() / 1000;
      /** What each piece recorded, in order: this delivery's, or an earlier one's kept here. */
      const generated: GeneratedPiece[] = [];
      for (const piece of pieces) {
        let made: GeneratedPiece;
        // A piece generated on another node (its worker died) has no PCM here: generate it again.
        if (piece.status === 'generated' && (await this.deps.pieceAudio.hasPiece(task.id, piece.idx))) {
          made = { samples: Number(piece.samples ?? 0), audioKey: piece.audio_key };
        } else {
          current = piece.idx;
          made = await this.generatePiece(task, piece, lease, before / CANONICAL_RATE, since);
        }
        generated.push(made);
        before += made.samples + intervalSamples(piece);
      }
      current = undefined;
      // The pieces and the silences between them (none after the last).
      const last = pieces.at(-1);
      const totalSamples = before - (last === undefined ? 0 : intervalSamples(last));
      // Merged audio stored first, then the task generated with its key in one update: a generated
      // task is complete, so a delete cannot race the merged write (orphan blob), and a stop in
      // between resumes the task instead of leaving it generated without metadata.audio.
      // No merged encode for a one-piece task in the canonical encoding: its piece's audio is it.
      // Its bytes count once: a one-piece task's merged audio is its piece's, already counted.
      const mergedAudio = await merged;
      const mergedKey = mergedAudio?.key ?? generated[0]?.audioKey;
      if (mergedKey === null || mergedKey === undefined) throw new Error('the task has no merged audio');
      await store.markGenerated(
        task.id,
        mergedKey,
        totalSamples / CANONICAL_RATE,
        token,
        mergedAudio?.bytes ?? 0,
      );
      events.changed(task.id, 'status');
      log.info({ taskId: task.id, pieces: pieces.length }, 'task generated');
    } catch (err) {
      merging.abort(err);
      await merged?.catch(() => undefined);
      if (aborted?.aborted === true && !(err instanceof LeaseLostError)) {
        return this.recordAborted(task, current, token, aborted.reason);
      }
      // Lease lost or queue closing: the task is someone else's now, or is delivered again later.
      if (err instanceof LeaseLostError || signal.aborted) {
        if (!(signal.reason instanceof QueueClosingError))
          log.warn(
            { taskId: task.id, piece: current, reason: String(signal.reason ?? err) },
            'generation lease lost',
          );
        return;
      }
      if (!(err instanceof EngineCallError) && isDependencyUnavailable(err)) {
        log.warn(
          { err, taskId: task.id, piece: current },
          'generation interrupted: a backing service is unavailable; retrying later',
        );
        return RETRY_LATER;
      }
      // Engine errors are generic for tenants; `err.detail` (URL, status, upstream body) is logged.
      // A full or read-only disk (piece PCM or a blob) is named as such, never "internal error".
      const storage = storageUnavailable(err);
      const message =
        err instanceof EngineCallError
          ? `content ${current ?? '-'} of task ${task.id}: ${err.message}`
          : storage !== undefined
            ? `${current === undefined ? '' : `content ${current} of `}task ${task.id}: ${storage.message}`
            : isAppError(err)
              ? err.message
              : 'internal error during generation';
      // `engine` apart from `err`: the log's error serializer keeps only an allowlist of fields.
      const engine = err instanceof EngineCallError ? { engine: err.detail } : {};
      if (err instanceof EngineCallError)
        this.engineErrors.set(err.detail.engine, (this.engineErrors.get(err.detail.engine) ?? 0) + 1);
      log.error({ err, taskId: task.id, piece: current, ...engine }, 'generation failed');
      return this.recordFailure(task.id, message, current, token);
    }
  }

  /**
   * Fails the task with `message` under this delivery's token and drops its piece audio. When the
   * database does not answer, RETRY_LATER: the task is delivered again and failed then (its claim
   * sees a cancellation, or it runs again), instead of staying `processing` with no delivery.
   */
  private async recordFailure(
    taskId: string,
    message: string,
    piece: number | undefined,
    token: string,
  ): Promise<void | typeof RETRY_LATER> {
    const { store, events, log } = this.deps;
    try {
      await store.markFailed(taskId, message, piece, token);
    } catch (err) {
      if (err instanceof LeaseLostError) {
        log.warn({ taskId }, 'generation lease lost');
        return;
      }
      log.error({ err, taskId }, 'could not mark task failed');
      return isDependencyUnavailable(err) ? RETRY_LATER : undefined;
    }
    // Announced before the piece audio is dropped: a reader who sees the task failed must not be
    // answered from a stream view of it still processing.
    events.changed(taskId, 'status');
    await this.discardPieceAudio(taskId);
    events.changed(taskId);
  }

  /**
   * A failed task never streams again (new requests get STREAM_NOT_READY, live readers were cut
   * by the failure), so its piece PCM is deleted at once instead of waiting for the idle sweep.
   */
  private async discardPieceAudio(taskId: string): Promise<void> {
    await this.deps.pieceAudio.deleteTask(taskId).catch((err: unknown) => {
      this.deps.log.warn({ err, taskId }, 'could not delete the piece audio of a failed task');
    });
  }

  /** The task was stopped by abort(): failed with the reason, under this delivery's token. */
  private async recordAborted(
    task: TaskRow,
    piece: number | undefined,
    token: string,
    reason: unknown,
  ): Promise<void | typeof RETRY_LATER> {
    const message = reason instanceof AppError ? reason.message : 'generation was cancelled';
    this.deps.log.info({ taskId: task.id, piece, reason: String(reason) }, 'generation aborted');
    return this.recordFailure(task.id, message, piece, token);
  }

  /**
   * Generates one piece, starting `startsAt` seconds into the task's audio (made since `since`);
   * answers what it recorded: its samples and its stored MP3's key.
   */
  private async generatePiece(
    task: TaskRow,
    piece: TaskContentRow,
    lease: TaskLease,
    startsAt: number,
    since: number,
  ): Promise<GeneratedPiece> {
    const { store, pieceAudio, blobs, encoders } = this.deps;
    const { signal, token } = lease;
    const params = JSON.parse(piece.params) as PieceParams;
    const binding = voiceBindingSchema.parse(JSON.parse(piece.binding));
    await store.setPieceStatus(task.id, piece.idx, 'processing', token);
    // A piece generated again (an earlier delivery died) starts its timings afresh; before its
    // audio file is started, so a failure here leaves nothing open.
    await this.deps.timings?.clearPiece(task.id, piece.idx, token);
    const engine = this.deps.engineFor(binding);
    // An instruct/design piece on an engine that delivers MP3 keeps that MP3 unchanged
    // (its per-content stream and stored audio); the PCM decoded from the same call feeds the
    // full-task stream and the merged audio like any other piece.
    const forwardMp3 = params.instruct_mode === true ? engine.synthesizeMp3 : undefined;
    // Only asked while batch work can leave the process (the batch process): a lookup per chunk.
    let samples = 0;
    /** Whether a live listener is to hear the task's audio at `at` seconds soon (default: where the piece is now). */
    const listened = (at = startsAt + samples / CANONICAL_RATE): boolean =>
      encoders.hosted() && this.deps.listened?.(task.id, at) === true;
    // The piece's MP3 is made while it is synthesised (or is the engine's own): its per-content
    // stream forwards those bytes and they are stored below, so a piece is encoded once.
    const writer = await pieceAudio.startPiece(
      task.id,
      piece.idx,
      forwardMp3 === undefined
        ? {
            kind: 'encode',
            encoders,
            signal,
            interactive: this.isShort(task.characters),
            listened: listened(),
          }
        : { kind: 'engine' },
    );
    const { timings } = this.deps;
    const collector = new TimingCollector(piece.text.length);
    const record = async (sentences: SentenceTiming[]): Promise<void> => {
      if (timings !== undefined && sentences.length > 0)
        await timings.append(task.id, piece.idx, sentences, token);
    };
    try {
      const request = {
        text: piece.text,
        voice: binding,
        speechRate: params.speechRate,
        ...(params.seed !== undefined && { seed: params.seed }),
        ...(params.preset !== undefined && { preset: presetStyle(params.preset) }),
        ...(params.language !== undefined && { language: params.language }),
        ...(params.languages !== undefined && { languages: params.languages }),
        ...(params.instruct_mode !== undefined && { instructMode: params.instruct_mode }),
        ...(params.instructions !== undefined && { instructions: params.instructions }),
        // Short-lane work (one-shots, small tasks) has a client waiting: its sentences go first.
        ...(this.isShort(task.characters) && { interactive: true }),
        // Accounts share the synthesis threads fairly, however many tasks each runs at once, and
        // within an account the task furthest behind goes first.
        owner: task.account_id,
        startsAt,
        since,
        listened,
      };
      // Timings are taken before the PCM is written (the writer may hand the array to the encoder)
      // and recorded after it, so a reader never sees a sentence ahead of its audio.
      if (forwardMp3 === undefined) {
        for await (const chunk of audioWithMarks(engine, request, signal)) {
          const sentences = collector.add(chunk);
          if (chunk.pcm.length > 0) {
            samples += chunk.pcm.length;
            await writer.append(chunk.pcm);
          }
          if (listened()) writer.encodeHere();
          await record(sentences);
        }
      } else {
        for await (const { mp3, pcm } of forwardMp3(request, signal)) {
          // The MP3 first: its bytes reach the per-content stream as soon as they arrived.
          if (mp3.length > 0) await writer.appendMp3(mp3);
          if (pcm.length > 0) {
            const sentences = collector.add({ pcm, marks: [] });
            samples += pcm.length;
            await writer.append(pcm);
            await record(sentences);
          }
        }
      }
      await writer.finish();
    } catch (err) {
      writer.fail(err instanceof Error ? err : new Error(String(err)));
      throw err;
    }
    // The last sentence ends with the call: recorded once the piece's audio is complete.
    await record(collector.finish());
    const key = `tasks/${task.id}/contents/${piece.idx}.mp3`;
    const stored = await blobs.put(key, pieceAudio.readCompleteMp3(task.id, piece.idx, signal), 'audio/mpeg');
    // Its size counts against the account's stored task audio (ACCOUNT_MAX_TASK_BYTES).
    await store.pieceGenerated(task.id, piece.idx, samples, key, token, stored.size);
    pieceAudio.pieceRecorded(task.id, piece.idx);
    return { samples, audioKey: key };
  }

  /**
   * Starts the merged finished audio: every piece and silence through one encoder, encoded while
   * the pieces are generated (it follows each piece as it is written, in order), so a task of many
   * contents is complete when its last piece is, not one whole encode later. Its bytes grow in the
   * task's merged MP3 file, which full-task streams on this node forward instead of encoding the
   * same audio again, and are stored atomically once complete. Resolves once that file is started
   * (before the first piece); `stored` resolves with the key and size, or undefined for a task of one piece
   * stored in the canonical encoding (not an engine's own MP3): its piece's audio is its merged
   * audio, the same bytes the encoder would make again (no silence follows the last piece).
   */
  private async startMergedAudio(
    task: TaskRow,
    pieces: TaskContentRow[],
    signal: AbortSignal,
  ): Promise<{ stored: Promise<StoredMerged | undefined> }> {
    const { pieceAudio, blobs, encoders } = this.deps;
    const [only, ...others] = pieces;
    if (
      only !== undefined &&
      others.length === 0 &&
      (JSON.parse(only.params) as PieceParams).instruct_mode !== true
    )
      return { stored: Promise.resolve(undefined) };
    // Decided once: a listener who comes later encodes the pieces in its own session.
    const listened = encoders.hosted() && this.deps.listened?.(task.id, 0) === true;
    // Hosted: the batch process reads the pieces' files and writes the merged file itself.
    const encoded = encoders.hosted({ listened })
      ? { done: pieceAudio.encodeMergedInHost(task.id, mergeOrder(pieces), encoders, signal) }
      : await this.encodeMergedHere(task, pieces, listened, signal);
    const stored = (async () => {
      await encoded.done;
      try {
        const key = `tasks/${task.id}/audio.mp3`;
        const { size } = await blobs.put(
          key,
          pieceAudio.readCompleteMergedMp3(task.id, signal),
          'audio/mpeg',
        );
        return { key, bytes: size };
      } finally {
        pieceAudio.mergedDone(task.id);
      }
    })();
    return { stored };
  }

  /**
   * The merged audio encoded here while the pieces are written, into the task's merged MP3 file
   * (which full-task streams follow); resolves once the file is started, with the encoding.
   */
  private async encodeMergedHere(
    task: TaskRow,
    pieces: TaskContentRow[],
    listened: boolean,
    signal: AbortSignal,
  ): Promise<{ done: Promise<void> }> {
    const { pieceAudio, encoders } = this.deps;
    const writer = await pieceAudio.startMergedMp3(task.id);
    // Lazily: each piece is opened once the encoder reaches it (waiting for it to start).
    const sources = async function* (): AsyncIterable<ContinuousPiece> {
      for (const p of pieces) {
        yield {
          pcm: pcmChunks(await pieceAudio.openPiece(task.id, p.idx, signal)),
          silenceAfterSeconds: (JSON.parse(p.params) as PieceParams).interval,
        };
      }
    };
    const done = (async () => {
      try {
        for await (const mp3 of encodeContinuous(sources(), encoders.open({ listened }), signal))
          await writer.append(mp3);
        await writer.finish();
      } catch (err) {
        writer.fail(err instanceof Error ? err : new Error(String(err)));
        throw err;
      }
    })();
    return { done };
  }
}

/** A task's merged audio as stored: its key and size. */
interface StoredMerged {
  key: string;
  bytes: number;
}

/** What generating a piece recorded: its samples, and its stored MP3's key. */
interface GeneratedPiece {
  samples: number;
  audioKey: string | null;
}

/** The pieces in the merged audio's order, each with the silence that follows it. */
function mergeOrder(pieces: TaskContentRow[]): { idx: number; silenceAfterSeconds: number }[] {
  return pieces.map((p) => ({
    idx: p.idx,
    silenceAfterSeconds: (JSON.parse(p.params) as PieceParams).interval,
  }));
}

function intervalSamples(piece: TaskContentRow): number {
  return Math.round((JSON.parse(piece.params) as PieceParams).interval * CANONICAL_RATE);
}
