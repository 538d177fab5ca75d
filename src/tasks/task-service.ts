/**
 * Generation tasks: creation from contents or splitter mode (within the account's
 * quotas), detail with billing, list, delete, cancel, and the stream endpoints' view. Generation
 * itself is the TaskRunner's job.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { codePointLength } from '../common/code-points.js';
import { pageSchema } from '../common/paging.js';
import { secretDigest, secretMatches, secretsEqual } from '../common/secret-compare.js';
import { TtlCache } from '../common/ttl-cache.js';
import { AppError, errors } from '../errors/app-error.js';
import { parseInput } from '../errors/validation.js';
import type { BlobStore } from '../storage/blob-store.js';
import { storageLimitExceeded } from '../storage/storage-limits.js';
import type { TaskContentRow, TaskRow, TaskStatus } from '../storage/schema.js';
import type { TaskVoice, VoiceService } from '../voices/voice-service.js';
import { refusalMessage, type VoiceLanguages } from '../audio/engines/language-decision.js';
import type { ParsedGenerateRequest, PieceParams, SplitterLookup } from './requests/generate-request.js';
import { normalizeLanguage } from './requests/generation-params.js';
import type { RequestParser } from './requests/request-parser.js';
import { CANONICAL_RATE } from '../audio/pcm.js';
import type { PieceAudioStore } from './piece-audio.js';
import type { StreamTaskLookup, StreamTaskView } from './stream-view.js';
import type { TaskEvents } from './queue/task-events.js';
import type { GenerationJob } from './runner/task-runner.js';
import {
  CANCELLED_BY_CLIENT,
  utcDay,
  type AccountQuotas,
  type AccountUsage,
  newTaskRow,
  type Admission,
  type QuotaRefusal,
  type TaskStore,
  type ListedPieceRow,
  type TaskSummaryRow,
} from './task-store.js';

/** Retry-After (seconds) of a 429 for the queued-tasks quota: about when a task may have finished. */
const QUEUED_QUOTA_RETRY_AFTER_S = 10;
/** How long a cancel request waits for the generating node to stop a processing task. */
const CANCEL_WAIT_MS = 10_000;

/** Where TaskService sends new tasks for generation, and takes cancelled pending ones back from. */
export interface GenerationQueue {
  enqueue(job: GenerationJob): Promise<void>;
  dequeue(taskId: string): Promise<void>;
}

/** An account's quotas and what it uses of them (account info; the hosted fields are added there). */
export interface AccountQuotaReport {
  quota: {
    /** Pending plus processing tasks at most; null = unlimited. */
    maxQueuedTasks: number | null;
    /** Tasks processing at once, on every node together; null = unlimited. */
    maxConcurrentTasks: number | null;
    /** Characters of accepted tasks per UTC day; null = unlimited. */
    dailyCharacters: number | null;
  };
  usage: {
    /** Pending plus processing tasks (what maxQueuedTasks limits). */
    queuedTasks: number;
    pendingTasks: number;
    processingTasks: number;
    /** Characters of the tasks accepted today (UTC). */
    charactersToday: number;
    /** null = unlimited. */
    charactersRemaining: number | null;
    /** When the daily characters count starts again from 0 (next 00:00 UTC). */
    resetsAt: string;
  };
}

/** Characters per second of speech at speechRate 1, for the estimate before audio exists. */
const CHARS_PER_SECOND = 14;

export interface TaskContentView {
  index: number;
  type: 'text';
  text: string;
  voiceId: string;
  [param: string]: unknown;
  audio?: string;
  generatedAt?: string;
}

/** What every representation of a task carries, in lists and in detail. */
interface TaskViewBase {
  id: string;
  userId: string;
  status: TaskStatus;
  type: string;
  createdAt: string;
  error?: string;
  streamUrl?: string;
}

/** The public representation of a task. */
export interface TaskView extends TaskViewBase {
  metadata: {
    contents: TaskContentView[];
    characters: number;
    /** The voices spoken, as voice objects (the hosted API's clients read them so). */
    voices: TaskVoice[];
    audio?: string;
    generatedAt?: string;
    request?: Record<string, unknown>;
    /** The task's SRT subtitles URL, when a content asked for them (`srt: true`). */
    srt?: string;
  };
}

/** Contents a list entry shows, and the characters of each text it shows. */
export const LISTED_CONTENTS = { count: 20, textChars: 200 } as const;

/** A content as a list entry shows it: its text cut to LISTED_CONTENTS.textChars, no parameters. */
export interface ListedContentView {
  index: number;
  type: 'text';
  text: string;
  /** True when `text` is the start of a longer text (the detail has it whole). */
  textTruncated: boolean;
  voiceId: string;
  audio?: string;
  duration?: number;
  generatedAt?: string;
}

/**
 * A task as the list shows it: its first LISTED_CONTENTS.count contents with their texts cut and
 * their audio URLs, `contentsCount`, no parameters or request echo, so a page's size is bounded by
 * its length whatever its tasks hold. The whole record is the detail endpoint's.
 */
export interface TaskSummaryView extends TaskViewBase {
  metadata: {
    contents: ListedContentView[];
    characters: number;
    contentsCount: number;
    voices: TaskVoice[];
    audio?: string;
    generatedAt?: string;
  };
}

/** The whole task record with billing and the duration estimate: the detail endpoint's answer. */
export interface TaskDetailView extends TaskView {
  credit_used: number;
  billing: { unit: 'character'; characters: number; credits: number };
  estimatedDuration: number;
}

export const taskListQuerySchema = pageSchema.extend({
  status: z.enum(['pending', 'processing', 'generated', 'failed']).optional(),
  stream: z.enum(['true', 'false']).optional(),
});

/** Options of `TaskService`. */
export interface TaskServiceOptions {
  /**
   * How long a node remembers a finished task's stream view, auth token and audio keys
   * (AUTH_CACHE_MS); 0 = look up every time. A task deleted or given a new stream token is
   * forgotten at once on every node that hears the announcement, else within this time (a deleted
   * task's blobs are gone meanwhile: its audio reads 404).
   */
  finishedCacheMs?: number;
  /**
   * Bytes of task audio an account may store (ACCOUNT_MAX_TASK_BYTES); 0 = unlimited. A new task
   * is refused once what is stored has reached it.
   */
  maxTaskBytes?: number;
}

/** Finished tasks a node remembers at once (each up to a few tens of KiB with 200 pieces). */
const FINISHED_CACHE_ENTRIES = 1_000;

/** A finished task as the audio and stream routes read it. */
interface FinishedTask {
  view: StreamTaskView;
  audioKey: string | null;
  pieceKeys: ReadonlyMap<number, string | null>;
  /** The token's digest, made at the first shortcut lookup (finished audio is asked for often). */
  tokenDigest?: Buffer;
}

/** Generation tasks of every account: creation, views, cancellation, deletion, audio lookups. */
export class TaskService implements StreamTaskLookup {
  constructor(
    private readonly store: TaskStore,
    private readonly voices: VoiceService,
    private readonly blobs: BlobStore,
    private readonly pieceAudio: PieceAudioStore,
    /** Parses generate requests (large ones off the event loop). */
    private readonly parser: RequestParser,
    private readonly publicUrl: string,
    /** Where inserted tasks are queued for generation (and cancelled pending ones taken out). */
    private readonly queue: GenerationQueue,
    /** Per-account limits checked when a task is created (and by the runner's claim). */
    private readonly quotas: AccountQuotas,
    /** Announces cancellations to the node generating the task and to waiting readers. */
    private readonly events: TaskEvents,
    private readonly options: TaskServiceOptions = {},
  ) {
    this.remembered = new TtlCache(options.finishedCacheMs ?? 0, FINISHED_CACHE_ENTRIES);
    // A task deleted, given a new token, cancelled, claimed or finished on another node is
    // forgotten here too (best effort: an announcement missed in a lapse of the bus is covered by
    // forgetting everything, and at worst by the caches' own time).
    // The bus is the node's own and closes with it: this listener needs no unsubscribing.
    events.onAnnouncement((taskId, kind) => {
      if (taskId === null) {
        this.remembered.clear();
        this.lookingUp.clear();
      } else if (kind !== null) this.forget(taskId);
    });
  }

  /**
   * What the audio and stream routes read of tasks, as last read. A finished task's never changes
   * but for its deletion or token: it serves every lookup without the database. An unfinished
   * task's serves the full-task stream only (`liveStreamView`), which reads none of its pieces'
   * progress, until the task's row changes (announced as `status`, or cancelled, deleted or given a
   * new token; else for the cache's time): a crowd joining one live session then costs one database
   * read, not one each, each waiting its turn behind the generation's writes.
   */
  private readonly remembered: TtlCache<string, FinishedTask>;
  /**
   * Lookups of unfinished tasks in flight: requests for the same task that arrive meanwhile share
   * the answer instead of queueing their own (a crowd of listeners joining one live session made
   * 1,000 lookups, serialised on the database, and waited seconds).
   */
  private readonly lookingUp = new Map<string, Promise<FinishedTask>>();

  /**
   * Refuses (429, or 413 for stored audio) a request to create a task when no task of the account
   * could be admitted now; for a large body, before it is read: an account flooding past its
   * quota with 100,000-character requests then costs one read each, not a parse of each body.
   */
  async refuseWhenFull(accountId: string): Promise<void> {
    const now = new Date();
    const refusal = await this.store.refusalBeforeAdmission(
      accountId,
      1,
      this.quotas,
      utcDay(now),
      this.options.maxTaskBytes ?? 0,
    );
    if (refusal !== undefined) throw refusalError(refusal, 1, now);
  }

  /**
   * Validates and queues a task; voices must exist in the caller's account. `bodyBytes`: the
   * request body's size (large ones are parsed off the event loop).
   */
  async create(
    accountId: string,
    body: unknown,
    lookupSplitter: SplitterLookup,
    bodyBytes = 0,
  ): Promise<TaskDetailView> {
    const request = await this.parser.generate(body, lookupSplitter, bodyBytes);
    // The voices in first-use order, read once: their bindings, and the answer's voice objects.
    const spoken = await this.voices.forGeneration(accountId, [
      ...new Set(request.pieces.map((p) => p.voiceId)),
    ]);
    const bindings = new Map([...spoken.bindings].map(([id, binding]) => [id, JSON.stringify(binding)]));
    // Before anything is stored or queued: a language the voice's engine cannot speak is a 400.
    const params = await this.spokenParams(request, spoken.languages);
    const now = new Date();
    const id = randomUUID();
    const characters = request.pieces.reduce((n, p) => n + codePointLength(p.text), 0);
    const task = newTaskRow({
      id,
      accountId,
      type: request.type,
      authToken: newStreamToken(),
      request: JSON.stringify(request.echo),
      characters,
      at: now,
    });
    const pieces = request.pieces.map((p, idx) => ({
      task_id: id,
      idx,
      text: p.text,
      voice_id: p.voiceId,
      binding: bindings.get(p.voiceId) ?? '{}',
      params: JSON.stringify(params[idx]),
      status: 'pending' as const,
      samples: null,
      audio_key: null,
      audio_bytes: '0',
      generated_at: null,
      speaker: p.speaker ?? null,
    }));
    const admission = await this.store.insert(
      { task, pieces },
      this.quotas,
      utcDay(now),
      this.options.maxTaskBytes ?? 0,
    );
    if (!admission.admitted) throw refusalError(admission, characters, now);
    await this.queue.enqueue({ taskId: id, accountId, position: admission.position, characters });
    // The rows just stored (a worker may already be changing them: the answer shows them as created).
    return this.detailView(accountId, task, pieces, false, spoken.voices);
  }

  /**
   * The pieces' parameters with their languages decided for their voices (`auto` per sentence,
   * see language-decision.ts); 400 UNSUPPORTED_LANGUAGE naming the piece and the language when
   * a voice's engine cannot speak one.
   */
  private async spokenParams(
    request: ParsedGenerateRequest,
    languages: ReadonlyMap<string, VoiceLanguages>,
  ): Promise<PieceParams[]> {
    const voiceIds = [...languages.keys()];
    const decisions = await this.parser.languages({
      voices: [...languages.values()],
      pieces: request.pieces.map((p) => ({
        text: p.text,
        language: p.params.language,
        voice: voiceIds.indexOf(p.voiceId),
      })),
    });
    const canonical = (tag: string) => normalizeLanguage(tag) ?? tag;
    return request.pieces.map((piece, i) => {
      const decision = decisions[i];
      if (decision === undefined) throw new Error(`no language decision for piece ${i}`);
      if (!decision.ok) {
        const where = `${request.type === 'contents' ? 'contents' : 'utterances'}[${i}]`;
        throw new AppError('UNSUPPORTED_LANGUAGE', refusalMessage(where, decision.refusal));
      }
      const { language: _asked, languages: _runs, ...rest } = piece.params;
      const { language, languages: runs } = decision.spoken;
      return {
        ...rest,
        ...(language !== undefined && { language: canonical(language) }),
        ...(runs !== undefined && {
          languages: runs.map((run) => ({ at: run.at, language: canonical(run.language) })),
        }),
      };
    });
  }

  /** The voice objects of the voices a task speaks, in first-use order. */
  private async taskVoices(accountId: string, voiceIds: readonly string[]): Promise<TaskVoice[]> {
    return this.voices.forTask(accountId, [...new Set(voiceIds)]);
  }

  /**
   * Cancels a pending or processing task of the account (our extension,
   * `POST /api/tts/generate/{id}/cancel`): it ends `failed` with `reason` as its error. A pending
   * task fails at once and leaves the queue; a processing one is stopped by the node generating it
   * (this call waits up to 10 s for that). Idempotent: a task already cancelled answers the same.
   * A task that finished otherwise → 400 VALIDATION_CONFLICT; another account's → 404.
   */
  async cancel(accountId: string, id: string, reason = CANCELLED_BY_CLIENT): Promise<TaskDetailView> {
    await this.requireOwn(accountId, id);
    const after = await this.store.requestCancel(accountId, id, reason);
    if (after === undefined) {
      const task = await this.requireOwn(accountId, id);
      if (task.status === 'failed' && task.cancel_reason !== null) return this.get(accountId, id);
      throw new AppError(
        'VALIDATION_CONFLICT',
        `task ${id} has already finished (${task.status}); there is nothing to cancel`,
      );
    }
    this.events.changed(id, 'cancel');
    if (after === 'failed') {
      // Best effort: a delivery of a failed task finds nothing to claim anyway.
      await this.queue.dequeue(id).catch(() => undefined);
    } else {
      await this.whileProcessing(id, AbortSignal.timeout(CANCEL_WAIT_MS));
    }
    return this.get(accountId, id);
  }

  /** Pending tasks of the accounts with the most of them, at most `limit` accounts (metrics). */
  async queueDepthByAccount(limit: number): Promise<{ accountId: string; pending: number }[]> {
    return this.store.pendingByAccount(limit);
  }

  /** The account's quotas and its current use of them. */
  async quotaReport(accountId: string, now = new Date()): Promise<AccountQuotaReport> {
    return this.quotaReportOf(await this.store.accountUsage(accountId, utcDay(now)), now);
  }

  /**
   * `quotaReport` and the bytes of task audio the account stores (account info's
   * `usage.taskBytes`), from one read.
   */
  async accountReport(
    accountId: string,
    now = new Date(),
  ): Promise<{ quotas: AccountQuotaReport; taskBytes: number }> {
    const usage = await this.store.accountUsageAndBytes(accountId, utcDay(now));
    return { quotas: this.quotaReportOf(usage, now), taskBytes: usage.taskBytes };
  }

  private quotaReportOf(usage: AccountUsage, now: Date): AccountQuotaReport {
    const { maxQueuedTasks, maxConcurrentTasks, dailyCharacters } = this.quotas;
    const limited = (n: number): number | null => (n > 0 ? n : null);
    return {
      quota: {
        maxQueuedTasks: limited(maxQueuedTasks),
        maxConcurrentTasks: limited(maxConcurrentTasks),
        dailyCharacters: limited(dailyCharacters),
      },
      usage: {
        queuedTasks: usage.pendingTasks + usage.processingTasks,
        pendingTasks: usage.pendingTasks,
        processingTasks: usage.processingTasks,
        charactersToday: usage.charactersToday,
        charactersRemaining:
          dailyCharacters > 0 ? Math.max(0, dailyCharacters - usage.charactersToday) : null,
        resetsAt: nextUtcMidnight(now).toISOString(),
      },
    };
  }

  /** Resolves once the task is no longer processing, or when `signal` aborts. */
  private async whileProcessing(id: string, signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const change = this.events.nextChange(id, signal);
      change.catch(() => undefined);
      const task = await this.store.get(id);
      if (task?.status !== 'processing') return;
      await change.catch(() => undefined);
    }
  }

  async get(accountId: string, id: string, query: { stream?: unknown } = {}): Promise<TaskDetailView> {
    // The task and its pieces in one round trip (another account's pieces are read and dropped: 404).
    const [task, pieces] = await Promise.all([this.requireOwn(accountId, id), this.store.pieces(id)]);
    return this.detailView(accountId, task, pieces, query.stream === 'true');
  }

  async list(
    accountId: string,
    query: Record<string, unknown>,
  ): Promise<{ items: TaskSummaryView[]; total: number }> {
    const q = parseInput(taskListQuerySchema, query);
    const { rows, total } = await this.store.list(accountId, q.limit, q.offset, q.status, LISTED_CONTENTS);
    const pageVoices = await this.taskVoices(
      accountId,
      rows.flatMap((row) => row.voiceIds),
    );
    const voices = new Map(pageVoices.map((v) => [v.id, v]));
    const items = rows.map((row) =>
      this.summaryView(
        row,
        row.voiceIds.flatMap((id) => voices.get(id) ?? []),
        row.firstPieces,
        q.stream === 'true',
      ),
    );
    return { items, total };
  }

  /** Deletes a finished task and its audio; 403 while it is pending or processing. */
  async delete(accountId: string, id: string): Promise<void> {
    const task = await this.requireOwn(accountId, id);
    if (task.status === 'pending' || task.status === 'processing') {
      throw new AppError(
        'GENERATE_DELETE_IN_PROGRESS',
        `task ${id} is ${task.status}; wait until it has finished`,
      );
    }
    if (!(await this.store.deleteFinished(accountId, id)))
      throw errors.notFound('GENERATE_NOT_FOUND', `task ${id}`);
    this.forget(id);
    // Every node ends its live sessions of the task (their readers would go on hearing it).
    this.events.changed(id, 'deleted');
    await this.blobs.deletePrefix(`tasks/${id}/`);
    await this.pieceAudio.deleteTask(id);
  }

  /**
   * Gives a task of the account a new stream token (our extension,
   * `POST /api/tts/generate/{id}/rotate-token`) and answers the task with its new URLs. From then
   * on the old token opens and reads nothing on any node: this node forgets its remembered view at
   * once and the announcement makes every other node forget theirs. Sessions a reader opened with
   * the old token are not cut: they were authorised when they opened and end with their readers.
   * Any status; another account's task → 404.
   */
  async rotateToken(accountId: string, id: string): Promise<TaskDetailView> {
    if (!(await this.store.setAuthToken(accountId, id, newStreamToken())))
      throw errors.notFound('GENERATE_NOT_FOUND', `task ${id}`);
    this.forget(id);
    this.events.changed(id, 'token');
    return this.get(accountId, id, { stream: 'true' });
  }

  /**
   * Drops what this node remembers of a task, so its next lookup reads the database: a lookup in
   * flight may have read the row before the change, so later requests do not share it either.
   */
  private forget(taskId: string): void {
    this.remembered.delete(taskId);
    this.lookingUp.delete(taskId);
  }

  /** The remembered view of `taskId` if it has finished (an unfinished one may be behind its pieces). */
  private rememberedFinished(taskId: string): FinishedTask | undefined {
    const task = this.remembered.get(taskId);
    return task !== undefined && finished(task.view.status) ? task : undefined;
  }

  async exists(taskId: string): Promise<boolean> {
    return this.store.exists(taskId);
  }

  async streamView(taskId: string): Promise<StreamTaskView> {
    return (await this.lookUp(taskId)).view;
  }

  async liveStreamView(taskId: string): Promise<StreamTaskView> {
    return (this.remembered.get(taskId) ?? (await this.lookUp(taskId))).view;
  }

  /**
   * The task's stream view and audio keys: remembered once it has finished, else read each time
   * (and kept for `liveStreamView` until the task's row changes).
   */
  private lookUp(taskId: string): Promise<FinishedTask> {
    const remembered = this.rememberedFinished(taskId);
    if (remembered !== undefined) return Promise.resolve(remembered);
    const shared = this.lookingUp.get(taskId);
    if (shared !== undefined) return shared;
    // Remembered only if the task was not forgotten meanwhile (deleted or given a new token while
    // the rows were read): an older read must not bring the old token back for AUTH_CACHE_MS.
    const lookup: Promise<FinishedTask> = this.readStreamRows(taskId).then(
      (found) => {
        const current = this.lookingUp.get(taskId) === lookup;
        if (current) this.remembered.set(taskId, found);
        if (current) this.lookingUp.delete(taskId);
        return found;
      },
      (err: unknown) => {
        if (this.lookingUp.get(taskId) === lookup) this.lookingUp.delete(taskId);
        throw err;
      },
    );
    this.lookingUp.set(taskId, lookup);
    return lookup;
  }

  private async readStreamRows(taskId: string): Promise<FinishedTask> {
    const rows = await this.store.streamRows(taskId);
    if (!rows) throw errors.notFound('GENERATE_NOT_FOUND', `task ${taskId}`);
    const { task, pieces } = rows;
    const found: FinishedTask = {
      view: {
        id: task.id,
        accountId: task.account_id,
        status: task.status,
        authToken: task.auth_token,
        audioUrl: task.audio_key ? this.audioUrl(task.id, task.auth_token, null) : null,
        workerUrl: task.worker_url,
        pieces: pieces.map((p) => {
          const params = JSON.parse(p.params) as PieceParams;
          return {
            idx: p.idx,
            interval: params.interval,
            status: p.status,
            audioUrl: p.audio_key ? this.audioUrl(task.id, task.auth_token, p.idx) : null,
          };
        }),
      },
      audioKey: task.audio_key,
      pieceKeys: new Map(pieces.map((p) => [p.idx, p.audio_key])),
    };
    return found;
  }

  /**
   * The one-shot answer's `streamUrl`: live bytes while the task is generated, the stored file
   * afterwards, from the same URL and without a redirect (`…/{id}/live.mp3`).
   */
  liveUrl(taskId: string, authToken: string): string {
    return `${this.publicUrl}/api/tts/generate/${taskId}/live.mp3?auth=${authToken}`;
  }

  /** The task's full stream (a 302 to the stored file once there is one). */
  streamUrl(taskId: string, authToken: string): string {
    return `${this.publicUrl}/api/tts/generate/${taskId}/stream.mp3?auth=${authToken}`;
  }

  /** Stored audio of a task (null) or piece, checked against the task's auth token. */
  async audioKeyFor(taskId: string, idx: number | null, auth: unknown): Promise<string> {
    if (auth === undefined || auth === '') throw errors.unauthorized('the auth query parameter is required');
    // A repeated `auth` arrives as an array: 401 like the stream endpoints (the fuzz suite found a 500).
    if (typeof auth !== 'string') throw errors.unauthorized('the auth query parameter must be given once');
    const task = await this.lookUp(taskId);
    if (!secretsEqual(auth, task.view.authToken)) throw errors.forbidden('auth does not match this task');
    const key = storedAudioKey(task, idx);
    if (key === undefined) throw new AppError('RESOURCE_NOT_FOUND', 'this audio is not stored (yet)');
    return key;
  }

  /**
   * The audio key audioKeyFor would answer, decided from the remembered finished task alone (no
   * I/O): undefined when the task is not remembered, `auth` is not its token or the audio is not
   * stored, where audioKeyFor (which answers every such case) must decide instead.
   */
  rememberedAudioKey(taskId: string, idx: number | null, auth: string): string | undefined {
    const task = this.rememberedFinished(taskId);
    if (task === undefined) return undefined;
    task.tokenDigest ??= secretDigest(task.view.authToken);
    if (!secretMatches(auth, task.tokenDigest)) return undefined;
    return storedAudioKey(task, idx);
  }

  /**
   * The audio key of a finished task that `auth` opens, looked up as audioKeyFor looks it up;
   * undefined for anything audioKeyFor refuses and for a task not yet finished, whose pieces may
   * still be written again (what another process may hold in memory for good must not change).
   */
  async finishedAudioKey(taskId: string, idx: number | null, auth: string): Promise<string | undefined> {
    const task = await this.lookUp(taskId).catch(() => undefined);
    if (task === undefined || !finished(task.view.status)) return undefined;
    if (!secretsEqual(auth, task.view.authToken)) return undefined;
    return storedAudioKey(task, idx);
  }

  /** URL of a task's SRT subtitles (metadata.srt), carrying its stream token like the audio URLs. */
  srtUrl(taskId: string, authToken: string): string {
    return `${this.publicUrl}/api/tts/generate/${taskId}/subtitles.srt?auth=${authToken}`;
  }

  /** URL of a task's stored merged audio (idx null) or of one piece's, as metadata shows it. */
  audioUrl(taskId: string, authToken: string, idx: number | null = null): string {
    const path = idx === null ? 'audio.mp3' : `${idx}/audio.mp3`;
    return `${this.publicUrl}/api/tts/generate/${taskId}/${path}?auth=${authToken}`;
  }

  private async requireOwn(accountId: string, id: string): Promise<TaskRow> {
    const task = await this.store.get(id);
    if (!task || task.account_id !== accountId) throw errors.notFound('GENERATE_NOT_FOUND', `task ${id}`);
    return task;
  }

  private view(task: TaskRow, pieces: TaskContentRow[], voices: TaskVoice[], withStream: boolean): TaskView {
    const view: TaskView = {
      id: task.id,
      userId: task.account_id,
      status: task.status,
      type: task.type,
      createdAt: task.created_at.toISOString(),
      metadata: {
        contents: pieces.map((p) => {
          const content: TaskContentView = {
            index: p.idx,
            type: 'text',
            text: p.text,
            voiceId: p.voice_id,
            ...(JSON.parse(p.params) as PieceParams),
          };
          if (p.audio_key) content.audio = this.audioUrl(task.id, task.auth_token, p.idx);
          // Our extension: the piece's length once generated (players draw their timeline from it).
          const samples = Number(p.samples ?? 0);
          if (p.status === 'generated' && samples > 0) content.duration = samples / CANONICAL_RATE;
          if (p.generated_at) content.generatedAt = p.generated_at.toISOString();
          return content;
        }),
        characters: task.characters,
        voices,
      },
    };
    const echo = JSON.parse(task.request) as Record<string, unknown>;
    if (Object.keys(echo).length > 0) view.metadata.request = echo;
    if (task.audio_key) view.metadata.audio = this.audioUrl(task.id, task.auth_token, null);
    if (task.generated_at) view.metadata.generatedAt = task.generated_at.toISOString();
    // Only when asked for: without `srt` the record keeps the hosted API's shape exactly.
    if (pieces.some((p) => (JSON.parse(p.params) as PieceParams).srt === true))
      view.metadata.srt = this.srtUrl(task.id, task.auth_token);
    if (task.error) view.error = task.error;
    if (withStream) view.streamUrl = this.streamUrl(task.id, task.auth_token);
    return view;
  }

  private summaryView(
    task: TaskSummaryRow,
    voices: TaskVoice[],
    pieces: ListedPieceRow[],
    withStream: boolean,
  ): TaskSummaryView {
    const view: TaskSummaryView = {
      id: task.id,
      userId: task.account_id,
      status: task.status,
      type: task.type,
      createdAt: task.created_at.toISOString(),
      metadata: {
        contents: pieces.map((p) => this.listedContent(task, p)),
        characters: task.characters,
        contentsCount: task.contentsCount,
        voices,
      },
    };
    if (task.audio_key) view.metadata.audio = this.audioUrl(task.id, task.auth_token, null);
    if (task.generated_at) view.metadata.generatedAt = task.generated_at.toISOString();
    if (task.error) view.error = task.error;
    if (withStream) view.streamUrl = this.streamUrl(task.id, task.auth_token);
    return view;
  }

  private listedContent(task: TaskSummaryRow, p: ListedPieceRow): ListedContentView {
    const chars = [...p.text];
    const cut = chars.length > LISTED_CONTENTS.textChars;
    const content: ListedContentView = {
      index: p.idx,
      type: 'text',
      text: cut ? chars.slice(0, LISTED_CONTENTS.textChars).join('') : p.text,
      textTruncated: cut,
      voiceId: p.voice_id,
    };
    if (p.audio_key) content.audio = this.audioUrl(task.id, task.auth_token, p.idx);
    const samples = Number(p.samples ?? 0);
    if (p.status === 'generated' && samples > 0) content.duration = samples / CANONICAL_RATE;
    if (p.generated_at) content.generatedAt = p.generated_at.toISOString();
    return content;
  }

  private async detailView(
    accountId: string,
    task: TaskRow,
    pieces: TaskContentRow[],
    withStream: boolean,
    /** The task's voices when already read (a new task's), else they are read here. */
    known?: TaskVoice[],
  ): Promise<TaskDetailView> {
    const voices =
      known ??
      (await this.taskVoices(
        accountId,
        pieces.map((p) => p.voice_id),
      ));
    const estimate = pieces.reduce((sum, p, i) => {
      const params = JSON.parse(p.params) as PieceParams;
      const speech = (codePointLength(p.text) / CHARS_PER_SECOND) * params.speechRate;
      return sum + speech + (i < pieces.length - 1 ? params.interval : 0);
    }, 0);
    return {
      ...this.view(task, pieces, voices, withStream),
      credit_used: task.status === 'generated' ? task.characters : 0,
      billing: { unit: 'character', characters: task.characters, credits: task.characters },
      estimatedDuration: Math.round((task.duration_seconds ?? estimate) * 1000) / 1000,
    };
  }
}

/** A task that has finished: its stream view no longer changes (but for its deletion or token). */
function finished(status: TaskStatus): boolean {
  return status === 'generated' || status === 'failed';
}

/** A task's stream token: 128 random bits, hex (the `auth` query parameter of its URLs). */
function newStreamToken(): string {
  return randomBytes(16).toString('hex');
}

/** The start of the next UTC day after `now`. */
function nextUtcMidnight(now: Date): Date {
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1));
}

/** The error of a refused admission: 413 for the stored audio, else the quota's 429. */
function refusalError(
  refusal: Exclude<Admission, { admitted: true }>,
  characters: number,
  now: Date,
): AppError {
  return 'storage' in refusal
    ? storageLimitExceeded(refusal.storage)
    : quotaExceeded(refusal, characters, now);
}

/** 429 RATE_LIMIT_EXCEEDED naming the quota that refused a new task, with Retry-After. */
function quotaExceeded(refusal: QuotaRefusal, characters: number, now: Date): AppError {
  if (refusal.quota === 'queuedTasks') {
    return new AppError(
      'RATE_LIMIT_EXCEEDED',
      `queued tasks quota exceeded: the account has ${refusal.used} pending or processing tasks ` +
        `(at most ${refusal.limit}); retry when some have finished, or cancel some`,
      { headers: { 'Retry-After': String(QUEUED_QUOTA_RETRY_AFTER_S) } },
    );
  }
  const seconds = Math.max(1, Math.ceil((nextUtcMidnight(now).getTime() - now.getTime()) / 1000));
  if (characters > refusal.limit) {
    return new AppError(
      'RATE_LIMIT_EXCEEDED',
      `daily characters quota exceeded: this request alone has ${characters} characters, more than ` +
        `the ${refusal.limit} an account may use per day (UTC); split it into smaller tasks`,
      { headers: { 'Retry-After': String(seconds) } },
    );
  }
  return new AppError(
    'RATE_LIMIT_EXCEEDED',
    `daily characters quota exceeded: ${refusal.used} of ${refusal.limit} characters used today ` +
      `(UTC) and this request has ${characters}; the quota resets at 00:00 UTC`,
    { headers: { 'Retry-After': String(seconds) } },
  );
}

/** The key of a task's stored audio (idx null) or of one piece's; undefined while it is not stored. */
function storedAudioKey(task: FinishedTask, idx: number | null): string | undefined {
  return (idx === null ? task.audioKey : task.pieceKeys.get(idx)) || undefined;
}
