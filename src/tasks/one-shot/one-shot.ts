/**
 * One-shot synthesis: the hosted API's synchronous endpoints (`POST /api/tts/simple-generate`,
 * `GET /api/tts/simple-generate.mp3`). One content item becomes an ordinary one-piece generation
 * task (queued, billed, listed and stored like any other), and the caller either
 *  - waits for it and gets its stored audio URL (JSON form), or
 *  - gets the MP3 bytes directly (`direct_stream`, or the GET form), encoded by its own encoder
 *    from the piece's PCM while the piece is being synthesised, so audio starts before the piece
 *    is finished.
 * A task that has not started (no generation slot became free: every slot busy, or the account at
 * its concurrency limit) within `startTimeoutMs` is cancelled and the caller gets 503
 * NO_WORKER_AVAILABLE with Retry-After, instead of waiting without bound.
 * No HTTP here: the routes live in src/http/routes/simple-generate.routes.ts.
 */
import type { Readable } from 'node:stream';
import { AppError, errors, isAppError } from '../../errors/app-error.js';
import { BOOLEAN_FIELDS, lenientItem, NUMBER_FIELDS } from '../requests/generation-params.js';
import type { StreamTaskView } from '../stream-view.js';
import type { TaskEvents } from '../queue/task-events.js';
import type { TaskDetailView, TaskService } from '../task-service.js';

/** A validated one-shot request: the content item (validated by task creation) and the answer mode. */
export interface OneShotRequest {
  /** Content-item fields (text, voiceId, speechRate, …); unknown keys are dropped later. */
  item: Record<string, unknown>;
  /** Include `streamUrl` in the JSON answer. */
  stream: boolean;
  /** Answer with the MP3 bytes instead of JSON. */
  directStream: boolean;
}

/** `data` of the JSON form. */
export interface OneShotResult {
  id: string;
  audio: string;
  streamUrl?: string;
  credit_used: number;
  /** The SRT subtitles URL, when the request asked for them (`srt: true`). */
  srt?: string;
}

/** What the direct form announces in `X-Service-Response-Data` (and its id in `X-Service-Audio-Id`). */
export interface OneShotAudioInfo {
  id: string;
  /** Where the finished audio will be stored (the task's metadata.audio once generated). */
  audio: string;
  streamUrl: string;
  /** Credits this synthesis costs (the headers go out before generation has finished). */
  credit_used: number;
  billing: TaskDetailView['billing'];
  estimatedDuration: number;
  /** The SRT subtitles URL, when the request asked for them (`srt: true`); growing while generated. */
  srt?: string;
}

/** The direct form's answer: its headers' data, and MP3 bytes that already hold the first chunk. */
export interface OneShotAudio {
  info: OneShotAudioInfo;
  /** MP3 bytes; closing it early (return()) stops encoding. Fails mid-way if generation fails. */
  body: AsyncIterable<Uint8Array>;
}

export interface OneShotDeps {
  tasks: TaskService;
  events: TaskEvents;
  /**
   * The MP3 of a content piece from its first byte, live while it is synthesised, from whichever
   * node generates the task (read directly there, relayed through the piece's session elsewhere).
   * `task`: its stream view once claimed.
   */
  contentAudio(task: StreamTaskView, contentIndex: number, signal: AbortSignal): Promise<Readable>;
  /** How long the task may stay pending before the synthesis is cancelled with a 503. */
  startTimeoutMs: number;
}

function flag(value: unknown, name: string): boolean {
  if (value === undefined || value === null) return false;
  if (typeof value === 'boolean') return value;
  throw errors.invalidValue(`${name} must be a boolean`);
}

/** The JSON body of `POST /api/tts/simple-generate`; generation fields are taken leniently (`lenientItem`). */
export function parseOneShotBody(body: unknown): OneShotRequest {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new AppError('VALIDATION_INVALID_FORMAT', 'request body must be a JSON object');
  }
  const { stream, direct_stream: directStream, ...item } = body as Record<string, unknown>;
  return {
    item: lenientItem(item),
    stream: flag(stream, 'stream'),
    directStream: flag(directStream, 'direct_stream'),
  };
}

/** A query-string value as the JSON field it stands for (numbers, booleans, emo_switch lists). */
function queryValue(key: string, raw: string): unknown {
  if (NUMBER_FIELDS.has(key) && raw.trim() !== '' && Number.isFinite(Number(raw))) return Number(raw);
  if (BOOLEAN_FIELDS.has(key)) {
    if (raw === 'true' || raw === '1') return true;
    if (raw === 'false' || raw === '0') return false;
  }
  if (key === 'emo_switch') {
    const parts = raw.split(',').map((part) => part.trim());
    return parts.every((part) => /^\d{1,2}$/.test(part)) ? parts.map(Number) : raw;
  }
  return raw;
}

/**
 * The query of `GET /api/tts/simple-generate.mp3`: the same fields as the POST body, as strings
 * (numbers, `true`/`false`/`1`/`0` and comma-separated `emo_switch` are converted; anything else
 * is left for validation). Always the direct form; generation fields are taken leniently.
 */
export function parseOneShotQuery(query: Record<string, unknown>): OneShotRequest {
  const item: Record<string, unknown> = {};
  let stream = false;
  for (const [key, raw] of Object.entries(query)) {
    if (Array.isArray(raw)) throw errors.invalidValue(`${key} is given more than once`);
    const value = typeof raw === 'string' ? queryValue(key, raw) : raw;
    if (key === 'stream') stream = flag(value, 'stream');
    else if (key === 'direct_stream') flag(value, 'direct_stream');
    else item[key] = value;
  }
  return { item: lenientItem(item), stream, directStream: true };
}

/** Task creation speaks of `contents[0].text`; a one-shot caller sent just `text`. */
function asOneShotError(err: unknown): unknown {
  if (!isAppError(err) || !err.message.startsWith('contents[0].')) return err;
  return new AppError(err.code, err.message.slice('contents[0].'.length), {
    headers: { ...err.headers },
    cause: err.cause,
  });
}

export class OneShotService {
  constructor(private readonly deps: OneShotDeps) {}

  /** Validates the item and queues its one-piece task (validation errors as for task creation). */
  async start(accountId: string, request: OneShotRequest): Promise<TaskDetailView> {
    try {
      return await this.deps.tasks.create(accountId, { contents: [request.item] }, () => {
        throw new Error('one-shot synthesis has no splitter mode');
      });
    } catch (err) {
      throw asOneShotError(err);
    }
  }

  /** JSON form: waits until the task's audio is stored; TTS_GENERATE_FAILED with the task's error if it fails. */
  async result(
    accountId: string,
    task: TaskDetailView,
    withStream: boolean,
    signal: AbortSignal,
  ): Promise<OneShotResult> {
    const { authToken } = await this.started(accountId, task.id, signal);
    const done = await this.waitUntil(
      task.id,
      () => this.deps.tasks.get(accountId, task.id),
      finished,
      signal,
    );
    const audio = done.metadata.audio;
    if (done.status !== 'generated' || audio === undefined) throw this.failure(done);
    const result: OneShotResult = { id: done.id, audio, credit_used: done.credit_used };
    if (withStream) result.streamUrl = this.deps.tasks.liveUrl(done.id, authToken);
    if (done.metadata.srt !== undefined) result.srt = done.metadata.srt;
    return result;
  }

  /**
   * Direct form: the MP3 of the piece, encoded as its PCM is produced. Resolves once the first MP3
   * bytes exist, so that any failure before them is still an ordinary (JSON) error.
   */
  async audio(accountId: string, task: TaskDetailView, signal: AbortSignal): Promise<OneShotAudio> {
    let claimed: StreamTaskView;
    let bytes: Readable | undefined;
    let mp3: AsyncIterator<Uint8Array> | undefined;
    let first: IteratorResult<Uint8Array>;
    try {
      // Once a worker holds the task, its piece's MP3 is made where the piece is synthesised.
      claimed = await this.started(accountId, task.id, signal);
      if (claimed.status === 'failed') throw this.failure(await this.deps.tasks.get(accountId, task.id));
      bytes = await this.deps.contentAudio(claimed, 0, signal);
      mp3 = (bytes as AsyncIterable<Uint8Array>)[Symbol.asyncIterator]();
      first = await mp3.next();
    } catch (err) {
      bytes?.destroy();
      await mp3?.return?.();
      throw await this.explain(accountId, task.id, err, signal);
    }
    if (first.done === true) throw new AppError('TTS_GENERATE_FAILED', 'synthesis produced no audio');
    const info: OneShotAudioInfo = {
      id: task.id,
      audio: this.deps.tasks.audioUrl(task.id, claimed.authToken),
      streamUrl: this.deps.tasks.liveUrl(task.id, claimed.authToken),
      credit_used: task.billing.credits,
      billing: task.billing,
      estimatedDuration: task.estimatedDuration,
      ...(task.metadata.srt !== undefined && { srt: task.metadata.srt }),
    };
    const rest = mp3;
    async function* body(): AsyncIterable<Uint8Array> {
      yield first.value;
      for (let next = await rest.next(); next.done !== true; next = await rest.next()) yield next.value;
    }
    return { info, body: withReturn(body(), rest) };
  }

  /**
   * Resolves with the task's stream view (status and stream token: two small reads, not the whole
   * record) once a worker has claimed it (or it failed). When that takes longer than
   * `startTimeoutMs`, cancels the task and throws 503 NO_WORKER_AVAILABLE with Retry-After.
   */
  async started(accountId: string, taskId: string, signal: AbortSignal): Promise<StreamTaskView> {
    const { startTimeoutMs, tasks } = this.deps;
    const timeout = AbortSignal.timeout(startTimeoutMs);
    const view = () => tasks.streamView(taskId);
    const claimed = (t: StreamTaskView): boolean => t.status !== 'pending';
    try {
      return await this.waitUntil(taskId, view, claimed, AbortSignal.any([signal, timeout]));
    } catch (err) {
      if (signal.aborted || !timeout.aborted) throw err;
    }
    const seconds = Math.max(1, Math.ceil(startTimeoutMs / 1000));
    const now = await view();
    if (claimed(now)) return now; // started at the last moment
    await tasks
      .cancel(accountId, taskId, `cancelled: no generation slot became free within ${seconds} s`)
      .catch(() => undefined);
    throw new AppError(
      'NO_WORKER_AVAILABLE',
      `no generation slot became free within ${seconds} s; the synthesis was cancelled, retry later`,
      { headers: { 'Retry-After': String(seconds) } },
    );
  }

  /** Resolves with what `read` gives once `done` holds for it, reading again at every change of the task. */
  private async waitUntil<T>(
    taskId: string,
    read: () => Promise<T>,
    done: (task: T) => boolean,
    signal: AbortSignal,
  ): Promise<T> {
    for (;;) {
      signal.throwIfAborted();
      // Subscribe before reading, so a change in between is not missed (TaskEvents contract).
      const subscription = new AbortController();
      const change = this.deps.events.nextChange(taskId, AbortSignal.any([signal, subscription.signal]));
      change.catch(() => undefined);
      let task: T;
      try {
        task = await read();
      } catch (err) {
        subscription.abort();
        throw err;
      }
      if (done(task)) {
        subscription.abort();
        return task;
      }
      await change;
    }
  }

  private failure(task: TaskDetailView): AppError {
    return new AppError('TTS_GENERATE_FAILED', `generation failed: ${task.error ?? 'unknown error'}`);
  }

  /** A failure before the first byte: reported with the task's own error when generation failed. */
  private async explain(
    accountId: string,
    taskId: string,
    err: unknown,
    signal: AbortSignal,
  ): Promise<unknown> {
    if (signal.aborted || !isAppError(err) || err.code !== 'TTS_GENERATE_FAILED') return err;
    const task = await this.deps.tasks.get(accountId, taskId).catch(() => undefined);
    return task?.status === 'failed' ? this.failure(task) : err;
  }
}

/** A task that will not change any more: failed, or generated with its audio stored. */
function finished(task: TaskDetailView): boolean {
  return task.status === 'failed' || (task.status === 'generated' && task.metadata.audio !== undefined);
}

/** `body` whose return() also closes `inner` (a generator suspended before its first next() would not). */
function withReturn(
  body: AsyncIterable<Uint8Array>,
  inner: AsyncIterator<Uint8Array>,
): AsyncIterable<Uint8Array> {
  return {
    [Symbol.asyncIterator]() {
      const it = body[Symbol.asyncIterator]();
      return {
        next: () => it.next(),
        return: async () => {
          await inner.return?.();
          return (await it.return?.()) ?? { done: true, value: undefined };
        },
      };
    },
  };
}
