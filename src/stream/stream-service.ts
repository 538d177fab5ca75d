/**
 * The stream endpoints' domain: checks the query and the
 * task's `auth` token, picks the branch (302 to finished audio, STREAM_NOT_READY, or the MP3
 * stream), opens the session of the request's key, plans Range/If-Range and returns a response
 * description that the HTTP layer writes. Knows nothing of Fastify.
 */
import { Readable } from 'node:stream';
import type { EncoderPool } from '../audio/encoder-pool.js';
import { mp3ToPcm } from '../audio/mp3-pcm.js';
import { pcmChunks } from '../audio/pcm-stream.js';
import { secretsEqual } from '../common/secret-compare.js';
import { AppError } from '../errors/app-error.js';
import type { GrowingFileFolder, ReadPace } from '../storage/growing-file.js';
import type { PieceAudioSource } from '../tasks/piece-audio.js';
import type { StreamPieceView, StreamTaskLookup, StreamTaskView } from '../tasks/stream-view.js';
import type { TaskEvents } from '../tasks/queue/task-events.js';
import { ListenerPacer, type PaceSettings } from './listener-pace.js';
import { verifyRelay } from './relay-proof.js';
import { contentDispositionFromQuery } from './content-disposition.js';
import {
  bodyWindow,
  evaluatePreconditions,
  planHeaders,
  preconditionFailed,
  rangeNotSatisfiable,
  resolveRangePlan,
  type ConditionalHeaders,
  type ResponsePlan,
} from './range-plan.js';
import { SessionRegistry, type SessionLease } from './session-registry.js';
import { contentAudio, fullTaskAudio, type PipelineDeps } from './stream-pipeline.js';
import { parseContentIndex, parseSessionId, requireAuthToken } from './stream-request.js';
import { untilAborted } from '../common/call-deadline.js';
import type { SessionOwnership } from './session-ownership.js';
import { ownerUnreachable, RelayRedirect, type RelayTarget, type SessionRelay } from './session-relay.js';
import {
  newSessionEtag,
  pipelineSource,
  type PipelineFactory,
  type SessionBuild,
  type SessionSource,
  type StreamSession,
} from './stream-session.js';

/** Dependencies and settings of the stream service (wired in src/app.ts). */
export interface StreamServiceOptions {
  tasks: StreamTaskLookup;
  pieces: PieceAudioSource;
  encoders: EncoderPool;
  /** Where the session caches live (a folder of this service's own under DATA_DIR/stream-cache). */
  cacheFiles: GrowingFileFolder;
  /** Sliding idle time after which a session is reclaimed (30 minutes by default). */
  idleReclaimMs: number;
  /** Scale-out: this node's place in the cluster; absent on a single node. */
  cluster?: StreamCluster | undefined;
  /** Bounds of the live sessions of this node (per task, per account, cache bytes); absent = unbounded. */
  bounds?: StreamSessionBounds | undefined;
  /** Task announcements (every node's): a task's deletion ends its live sessions here. */
  events?: TaskEvents | undefined;
  /** The cluster's secret that signs relay requests; without it no request counts as relayed. */
  relaySecret?: string | undefined;
  /**
   * The pace of live listeners (a GET without Range of the unfinished session of a task still
   * generating, not a relay): a bounded burst, then the bytes that already exist at this rate.
   * Absent = every reader as fast as it reads.
   */
  pace?: PaceSettings | undefined;
}

/** How many live sessions a node keeps and how much disk their caches may use (0 = unbounded). */
export interface StreamSessionBounds {
  maxPerTask: number;
  maxPerAccount: number;
  cacheBudgetBytes: number;
}

/** A node of a scale-out cluster: its URL, the session ownership leases and the relay to other nodes. */
export interface StreamCluster {
  /** This node's URL as the other nodes reach it (what tasks record as their generator). */
  nodeUrl: string;
  ownership: SessionOwnership;
  relay: SessionRelay;
  /** Retry-After of a request whose owner node is unreachable (about the task lease). */
  retryAfterSeconds: number;
}

/** A stream.mp3 request as the HTTP layer hands it over (with its If-Match / If-None-Match, RFC 9110 §13). */
export interface StreamRequest extends ConditionalHeaders {
  method: 'GET' | 'HEAD';
  taskId: string;
  /** The raw `{contentIndex}` path segment for the per-content endpoint; undefined for the whole task. */
  contentIndex?: string | undefined;
  /** The parsed query string (`auth`, `i`, `response-content-disposition`; anything else is ignored). */
  query: Readonly<Record<string, unknown>>;
  rangeHeader?: string | undefined;
  ifRangeHeader?: string | undefined;
  /** Aborts when the client goes away: stops waiting for a closed range's bytes. */
  signal: AbortSignal;
  /**
   * The relay header and the request's path and query as received: with a valid proof, another node
   * relays this session (answer from this node's own session, never relay again).
   */
  relay?: { proof: string | string[] | undefined; pathAndQuery: string } | undefined;
}

/** What to send: status, headers and (for GET with audio) the body, already cut to the range. */
export interface StreamResponse {
  status: number;
  headers: Record<string, string>;
  body: Readable | null;
}

/** What the stream routes need, plus the lifecycle and the pipeline counter. */
export interface StreamService {
  /** GET/HEAD `…/{id}/stream.mp3` and `…/{id}/{contentIndex}/stream.mp3`. */
  stream(request: StreamRequest): Promise<StreamResponse>;
  /** GET `…/{id}/stream`: the full stream.mp3 URL (with `auth`) after the same auth checks. */
  streamUrl(taskId: string, query: Readonly<Record<string, unknown>>): Promise<{ url: string }>;
  /** GET `…/{id}/{contentIndex}/pseudo/stream.mp3`: 302 to the piece's finished audio, else STREAM_NOT_READY. */
  pseudoStream(
    taskId: string,
    contentIndex: string,
    query: Readonly<Record<string, unknown>>,
  ): Promise<StreamResponse>;
  /** The MP3 bytes of a content piece's session from byte 0, live (one-shot synthesis); no auth check. */
  contentBytes(task: StreamTaskView, contentIndex: number, signal: AbortSignal): Promise<Readable>;
  /**
   * The canonical PCM (44.1 kHz mono) of a content piece from its first sample, live (one-shot
   * synthesis in formats other than MP3); no auth check.
   */
  contentPcm(
    task: StreamTaskView,
    contentIndex: number,
    signal: AbortSignal,
  ): Promise<AsyncIterable<Int16Array>>;
  /** Pipelines started since the service was created (one per session build). */
  pipelineRuns(): number;
  /** Sessions relayed from other nodes since the service was created (scale-out). */
  relayRuns(): number;
  /** Live sessions on this node now (fault tests check none is left behind). */
  liveSessions(): number;
  /** Seconds of the task's audio its earliest live session here has had time to play; undefined: none here. */
  playedSeconds(taskId: string): number | undefined;
  /** Requests reading this node's live sessions now. */
  listeners(): number;
  /** Destroys every session (pipelines aborted, cache files deleted, timers cleared). */
  close(): Promise<void>;
}

const MP3 = 'audio/mpeg';
/** Only these statuses stream; any other is STREAM_NOT_READY. */
const STREAMABLE = new Set(['processing', 'generated']);

/** The registry key of a session: task, content (null = the whole task) and `i`. */
function sessionKey(taskId: string, contentIndex: number | null, i: string): string {
  return JSON.stringify([taskId, contentIndex, i]);
}

/** Whether `key` is a session key of this task and content, whatever its `i`. */
function sameAudioAs(taskId: string, contentIndex: number | null): (key: string) => boolean {
  const prefix = JSON.stringify([taskId, contentIndex]).slice(0, -1) + ',';
  return (key) => key.startsWith(prefix);
}

/**
 * The session of `key`'s bytes: those of an older session of the same audio (a player's other
 * `i`), read from its cache as it grows, or else its own pipeline's. Every build of a task's
 * stream is the same bytes, so a node encodes each task's stream once however many sessions read
 * it. When the older session goes first (evicted, reclaimed, failed), its own pipeline makes the
 * rest: encoded from the start again, the bytes already copied left out.
 */
async function* ownOrTwin(
  registry: SessionRegistry,
  key: string,
  sameBytes: (otherKey: string) => boolean,
  own: PipelineFactory,
  signal: AbortSignal,
): AsyncIterable<Uint8Array> {
  const twin = registry.olderTwin(key, sameBytes);
  let copied = 0;
  if (twin !== undefined) {
    try {
      for await (const chunk of twin.cache.createReadStream(0, null, signal) as AsyncIterable<Buffer>) {
        copied += chunk.length;
        yield chunk;
      }
      return;
    } catch {
      signal.throwIfAborted();
    }
  }
  yield* withoutFirst(own(signal), copied);
}

/** `bytes` without their first `skip` bytes. */
async function* withoutFirst(bytes: AsyncIterable<Uint8Array>, skip: number): AsyncIterable<Uint8Array> {
  let left = skip;
  for await (const chunk of bytes) {
    if (left >= chunk.length) {
      left -= chunk.length;
      continue;
    }
    yield left === 0 ? chunk : chunk.subarray(left);
    left = 0;
  }
}

/** Creates the stream service; call close() on shutdown. */
export function createStreamService(options: StreamServiceOptions): StreamService {
  return new DefaultStreamService(options);
}

/**
 * A 302 to finished audio. The request's `response-content-disposition` (already validated) goes
 * along, so a download named by the client keeps its name after the redirect.
 */
function redirect(location: string, query: Readonly<Record<string, unknown>> = {}): StreamResponse {
  const disposition = query['response-content-disposition'];
  if (typeof disposition !== 'string') return { status: 302, headers: { Location: location }, body: null };
  const url = new URL(location);
  url.searchParams.set('response-content-disposition', disposition);
  return { status: 302, headers: { Location: url.toString() }, body: null };
}

function notReady(task: StreamTaskView, what: string): AppError {
  return new AppError('STREAM_NOT_READY', `${what} is not ready to stream (task status ${task.status})`);
}

/** Cache-Control of an audio answer: nothing of a live session may be stored (its bytes and length are not final). */
function cacheControl(plan: ResponsePlan): string {
  const live = plan.kind === 'live' || (plan.kind === 'partial' && plan.total === '*');
  return live ? 'no-store' : 'private, no-cache';
}

class DefaultStreamService implements StreamService {
  private readonly files: GrowingFileFolder;
  private readonly deps: PipelineDeps;
  /** Created on first use (its directory is made then), so constructing the service does no I/O. */
  private registry: Promise<SessionRegistry> | undefined;
  private registryNow: SessionRegistry | undefined;
  private closed = false;
  private readonly stopListening: () => void;
  /** The listener pace of each session that has had a paced listener. */
  private readonly pacers = new WeakMap<StreamSession, ListenerPacer>();

  constructor(private readonly options: StreamServiceOptions) {
    this.files = options.cacheFiles;
    this.deps = { pieces: options.pieces, encoders: options.encoders };
    // A deleted task's audio must stop flowing on every node: its sessions here end. After a lapse
    // of the bus any task may have been deleted meanwhile, so every task with sessions is checked.
    this.stopListening =
      options.events?.onAnnouncement((taskId, kind) => {
        const tasks = taskId === null ? [...(this.registryNow?.taskIds() ?? [])] : [taskId];
        if (taskId === null || kind === 'deleted') for (const id of tasks) void this.endIfDeleted(id);
      }) ?? (() => undefined);
  }

  /** Ends `taskId`'s sessions here if the task no longer exists (an announcement may be spurious). */
  private async endIfDeleted(taskId: string): Promise<void> {
    const registry = this.registryNow;
    if (registry === undefined || !registry.hasTask(taskId)) return;
    try {
      if (!(await this.options.tasks.exists(taskId))) await registry.endTask(taskId);
    } catch {
      // The database did not answer: the sessions end with their readers or their idle time.
    }
  }

  private sessions(): Promise<SessionRegistry> {
    this.registry ??= this.files.ready().then(() => {
      this.registryNow = new SessionRegistry({
        files: this.files,
        idleReclaimMs: this.options.idleReclaimMs,
        ...this.options.bounds,
      });
      return this.registryNow;
    });
    return this.registry;
  }

  pipelineRuns(): number {
    return this.registryNow?.pipelineRuns ?? 0;
  }

  relayRuns(): number {
    return this.registryNow?.relayRuns ?? 0;
  }

  liveSessions(): number {
    return this.registryNow?.size ?? 0;
  }

  playedSeconds(taskId: string): number | undefined {
    return this.registryNow?.playedSeconds(taskId);
  }

  listeners(): number {
    return this.registryNow?.listeners ?? 0;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.stopListening();
    const registry = await this.registry?.catch(() => undefined);
    await registry?.close();
    await this.files.remove();
  }

  /**
   * 401 missing token → 404 unknown task → 403 wrong token. `live`: the view kept while the task's
   * own row is unchanged, for the full-task stream (a crowd joining a live session then costs no
   * database read each).
   */
  private async authorize(
    taskId: string,
    query: Readonly<Record<string, unknown>>,
    live = false,
  ): Promise<StreamTaskView> {
    const token = requireAuthToken(query.auth);
    const { tasks } = this.options;
    const task = await (live ? tasks.liveStreamView(taskId) : tasks.streamView(taskId));
    if (!secretsEqual(token, task.authToken)) {
      throw new AppError('AUTH_FORBIDDEN', 'the auth token is not valid for this task');
    }
    return task;
  }

  private piece(task: StreamTaskView, segment: string): StreamPieceView {
    const idx = parseContentIndex(segment);
    const piece = idx === null ? undefined : task.pieces.find((p) => p.idx === idx);
    if (piece === undefined)
      throw new AppError('RESOURCE_NOT_FOUND', `task ${task.id} has no content ${segment}`);
    return piece;
  }

  async streamUrl(taskId: string, query: Readonly<Record<string, unknown>>): Promise<{ url: string }> {
    const task = await this.authorize(taskId, query);
    return { url: this.options.tasks.streamUrl(task.id, task.authToken) };
  }

  async pseudoStream(
    taskId: string,
    contentIndex: string,
    query: Readonly<Record<string, unknown>>,
  ): Promise<StreamResponse> {
    contentDispositionFromQuery(query['response-content-disposition']); // validated before the redirect carries it
    const task = await this.authorize(taskId, query);
    const piece = this.piece(task, contentIndex);
    if (piece.audioUrl === null) throw notReady(task, `content ${String(piece.idx)}`);
    return redirect(piece.audioUrl, query);
  }

  async stream(request: StreamRequest): Promise<StreamResponse> {
    const { query } = request;
    const i = parseSessionId(query.i);
    const disposition = contentDispositionFromQuery(query['response-content-disposition']);
    const task = await this.authorize(request.taskId, query, request.contentIndex === undefined);

    let contentIndex: number | null = null;
    // A relay request (another node fanning this node's session out) is answered from the session
    // even when finished audio exists meanwhile: the relaying node decided, its readers get bytes.
    const relayed = this.isRelay(request);
    const finishedAudio = (url: string | null): url is string => url !== null && !relayed;
    if (request.contentIndex === undefined) {
      if (finishedAudio(task.audioUrl)) return redirect(task.audioUrl, query);
      if (!STREAMABLE.has(task.status)) throw notReady(task, 'the task');
    } else {
      const piece = this.piece(task, request.contentIndex);
      if (finishedAudio(piece.audioUrl)) return redirect(piece.audioUrl, query);
      if (!STREAMABLE.has(task.status)) throw notReady(task, `content ${String(piece.idx)}`);
      contentIndex = piece.idx;
    }
    request.signal.throwIfAborted();
    const key = sessionKey(task.id, contentIndex, i);
    // `If-None-Match: *` matches whatever build a request would start, so with
    // no session for the key the 304 is answered without starting a pipeline that nobody reads
    // (other tags are decided against the build's ETag below, which a relayed build shares).
    if (
      (await this.sessions()).peek(key) === undefined &&
      evaluatePreconditions(request, { etag: null }) === 'not-modified'
    ) {
      return { status: 304, headers: { 'Cache-Control': 'no-store' }, body: null };
    }
    // HEAD reads nothing: it never starts a pipeline or a relay. With no
    // session for its key it answers the live headers a GET would get, without the ETag of a
    // build that does not exist yet (RFC 9110 §9.3.2 lets HEAD omit what only the content fixes).
    const lease =
      request.method === 'HEAD'
        ? (await this.sessions()).openExisting(key)
        : await this.openSession(task, contentIndex, i, relayed);
    if (lease === undefined) {
      const headers: Record<string, string> = {
        'Content-Type': MP3,
        'Accept-Ranges': 'bytes',
        'Cache-Control': 'no-store',
        'Transfer-Encoding': 'chunked',
      };
      if (disposition !== undefined) headers['Content-Disposition'] = disposition;
      return { status: 200, headers, body: null };
    }
    const { session, release } = lease;
    try {
      const etag = await untilAborted(session.etag, request.signal);
      // Waits (GET with a closed range only) until the range exists or the session ends; a
      // pipeline failure before any byte of this response is thrown here and becomes JSON.
      const plan = await resolveRangePlan(
        {
          method: request.method,
          rangeHeader: request.rangeHeader,
          ifRangeHeader: request.ifRangeHeader,
          ifMatchHeader: request.ifMatchHeader,
          ifNoneMatchHeader: request.ifNoneMatchHeader,
          etag,
        },
        session.cache,
        request.signal,
      );
      // RFC 9110 §13.2.2: 412 and 304 come before If-Range and Range (the planner never waits for them).
      if (plan.kind === 'precondition-failed') throw preconditionFailed();
      if (plan.kind === 'not-modified') {
        release();
        // RFC 9110 §15.4.5: no body; the ETag and the Cache-Control a 200 of this session would carry.
        const cache = plan.finished ? 'private, no-cache' : 'no-store';
        return { status: 304, headers: { ...planHeaders(plan), 'Cache-Control': cache }, body: null };
      }
      if (plan.kind === 'unsatisfiable') throw rangeNotSatisfiable(plan);
      const headers: Record<string, string> = {
        'Content-Type': MP3,
        ...planHeaders(plan),
        'Cache-Control': cacheControl(plan),
      };
      if (disposition !== undefined) headers['Content-Disposition'] = disposition;
      if (request.method === 'HEAD') {
        // RFC 9112 §6.1: a HEAD response may carry the Transfer-Encoding the GET would use.
        if (plan.kind === 'live') headers['Transfer-Encoding'] = 'chunked';
        release();
        return { status: plan.status, headers, body: null };
      }
      const window = bodyWindow(plan);
      if (window === null) throw new Error('unreachable: a plan with a body has a window');
      // No abort signal here: the HTTP layer destroys the body when the client goes away (an
      // abort error would be reported as a failed response instead of a client that left).
      const pace = this.paceFor(session, task.status, plan.kind, request.rangeHeader, relayed);
      const body = session.cache.createReadStream(window.start, window.endExclusive, undefined, pace);
      // The reader holds the lease until it ends, fails or the client goes away.
      body.once('close', release);
      return { status: plan.status, headers, body };
    } catch (err) {
      release();
      // The owner node found the task finished meanwhile: pass its redirect on.
      if (err instanceof RelayRedirect) return redirect(err.location, query);
      throw err;
    }
  }

  /**
   * A content piece's MP3 from its first byte to its end, live: one-shot synthesis answers with
   * these bytes. When this node generates the task they are its piece's MP3 as it is encoded, read
   * directly (no session: nothing to share, cache or relay); otherwise they come through the
   * piece's session (`i` = ''), from whichever node generates the task. `task`: its stream view,
   * read once the task was claimed (which node generates it does not change while it runs).
   */
  async contentBytes(task: StreamTaskView, contentIndex: number, signal: AbortSignal): Promise<Readable> {
    if (this.generatedHere(task))
      return Readable.from(contentAudio(this.deps, task.id, contentIndex, signal), { objectMode: false });
    const { session, release } = await this.openSession(task, contentIndex, '', false);
    try {
      await untilAborted(session.etag, signal);
      const body = session.cache.createReadStream(0, null, signal);
      body.once('close', release);
      return body;
    } catch (err) {
      release();
      throw err;
    }
  }

  /**
   * A content piece's PCM from its first sample to its end, live. Where this node generates the
   * task, the piece's own PCM as generation writes it; elsewhere only its MP3 travels between
   * nodes, so the relayed MP3 is decoded back to PCM.
   */
  async contentPcm(
    task: StreamTaskView,
    contentIndex: number,
    signal: AbortSignal,
  ): Promise<AsyncIterable<Int16Array>> {
    if (this.generatedHere(task))
      return pcmChunks(await this.deps.pieces.openPiece(task.id, contentIndex, signal));
    return mp3ToPcm(await this.contentBytes(task, contentIndex, signal));
  }

  /**
   * A live listener's pace: the live answer (no Range) of a task still being generated. Undefined
   * for a reader served as fast as it reads: a request with a Range (it asked for bytes, not for a
   * listening), a finished task or session (a download, whatever the session still encodes), and a
   * relay (another node fans the session out to its own, paced listeners).
   */
  private paceFor(
    session: StreamSession,
    taskStatus: string,
    plan: ResponsePlan['kind'],
    rangeHeader: string | undefined,
    relayed: boolean,
  ): ReadPace | undefined {
    const settings = this.options.pace;
    const listening = taskStatus === 'processing' && plan === 'live' && rangeHeader === undefined;
    if (settings === undefined || !listening || relayed) return undefined;
    let pacer = this.pacers.get(session);
    if (pacer === undefined) {
      pacer = new ListenerPacer(settings);
      this.pacers.set(session, pacer);
    }
    return pacer.listener();
  }

  /** Whether another node of the cluster sent `request` (its relay proof holds). */
  private isRelay(request: StreamRequest): boolean {
    const secret = this.options.relaySecret;
    const relay = request.relay;
    return (
      secret !== undefined && relay !== undefined && verifyRelay(secret, relay.proof, relay.pathAndQuery)
    );
  }

  /** The session of (task, content, `i`) with a lease for one request, started if there is none. */
  private async openSession(
    task: StreamTaskView,
    contentIndex: number | null,
    i: string,
    relayed: boolean,
  ): Promise<SessionLease> {
    const registry = await this.sessions();
    if (this.closed) throw new AppError('SYSTEM_INTERNAL_ERROR', 'the stream service is shutting down');
    const key = sessionKey(task.id, contentIndex, i);
    let own: PipelineFactory;
    if (contentIndex === null) {
      const pieces = task.pieces.map(({ idx, interval }) => ({ idx, interval }));
      own = (signal) => fullTaskAudio(this.deps, task.id, pieces, signal);
    } else {
      own = (signal) => contentAudio(this.deps, task.id, contentIndex, signal);
    }
    const sameAudio = sameAudioAs(task.id, contentIndex);
    const pipeline: PipelineFactory = (signal) => ownOrTwin(registry, key, sameAudio, own, signal);
    const { source, kind } = this.sourceFor(key, task, { contentIndex, sessionId: i }, pipeline, relayed);
    return registry.open(key, source, kind, { taskId: task.id, accountId: task.accountId });
  }

  /** Whether this node generates `task` (always, on one node): its piece audio grows here. */
  private generatedHere(task: StreamTaskView): boolean {
    const cluster = this.options.cluster;
    return cluster === undefined || task.workerUrl === cluster.nodeUrl;
  }

  /**
   * Where a new build of `key` comes from. One node: this node's pipeline. Scale-out: the pipeline
   * runs on the node generating the task (it holds the growing piece audio), under the session's
   * ownership lease; every other node relays that build. A relay request is always answered from
   * this node's own session, never relayed again.
   */
  private sourceFor(
    key: string,
    task: StreamTaskView,
    target: Pick<RelayTarget, 'contentIndex' | 'sessionId'>,
    pipeline: PipelineFactory,
    relayed: boolean,
  ): { source: SessionSource; kind: 'pipeline' | 'relay' } {
    const cluster = this.options.cluster;
    if (cluster === undefined) return { source: pipelineSource(pipeline), kind: 'pipeline' };
    const generator = task.workerUrl;
    if (generator !== null && !this.generatedHere(task)) {
      if (relayed) {
        const error = ownerUnreachable(
          cluster.retryAfterSeconds,
          new Error(`task ${task.id} moved to ${generator}`),
        );
        return { source: () => Promise.reject(error), kind: 'pipeline' };
      }
      const relayTarget: RelayTarget = { taskId: task.id, ...target, auth: task.authToken };
      return { source: (signal) => cluster.relay.open(generator, relayTarget, signal), kind: 'relay' };
    }
    return { source: (signal) => this.ownedBuild(cluster, key, pipeline, signal), kind: 'pipeline' };
  }

  /**
   * A build of this node's pipeline under the session's ownership lease: exactly one node runs a
   * session's pipeline, and a node that loses the lease stops writing into the session at once.
   */
  private async ownedBuild(
    cluster: StreamCluster,
    key: string,
    pipeline: PipelineFactory,
    signal: AbortSignal,
  ): Promise<SessionBuild> {
    const lease = await cluster.ownership.acquire(key, cluster.nodeUrl);
    if ('heldBy' in lease) {
      throw ownerUnreachable(
        cluster.retryAfterSeconds,
        new Error(`session ${key} is held by ${lease.heldBy.holder} (token ${String(lease.heldBy.token)})`),
      );
    }
    const { owned } = lease;
    const guarded = AbortSignal.any([signal, owned.lost]);
    async function* bytes(): AsyncIterable<Uint8Array> {
      try {
        yield* pipeline(guarded);
      } finally {
        await owned.release().catch(() => undefined); // an expired lease is released by expiry
      }
    }
    return { etag: newSessionEtag(), bytes: bytes() };
  }
}
