/**
 * The finished-audio process: a child process that serves the connections of players fetching
 * finished audio, so that a node alone answers their ranges at the cost of a lean process rather
 * than of the service's (whose own HTTP machinery, heap and threads cost more per request than the
 * work itself; docs/benchmarks.md, Finished-audio Range serving).
 *
 * The service reads the first bytes of each new connection before its HTTP parser does. When they
 * are a complete plain GET of finished audio (the shortcut's case, finished-audio.ts), the
 * connection itself — its socket and the bytes read — is sent to the child, which answers that
 * request and the next ones on the connection with the same checks, headers, rate limit, access
 * lines and metrics. A request the child does not answer (another route, a token the service
 * refuses, audio it cannot send whole, a 304/412/416, a refused rate limit, a head split across
 * reads) sends the connection back, with every byte not yet answered, to the service's parser,
 * which goes on from there. The service stays the one authority: the child asks it which audio a
 * token opens (the routes' own lookup) and for the audio's bytes, counts requests against the
 * service's rate-limit windows, and sums its answers into the service's metrics.
 */
import type { ChildProcess } from 'node:child_process';
import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Readable } from 'node:stream';
import { buffer } from 'node:stream/consumers';
import { endChildProcess, forkModule, siblingModuleUrl } from '../common/worker-url.js';
import type { BlobStore } from '../storage/blob-store.js';
import { plainAudioHead } from './finished-audio.js';
import {
  accessLines,
  accessLineTemplates,
  infoEnabled,
  type AccessLineTemplates,
  type AnswerMeter,
  type LineTemplate,
} from './finished-audio.shortcut.js';
import { isBatchedJsonStdout } from './log-format.js';
import type { InProcessRateLimit, RateLimitAdmission } from './rate-limit.js';
import { readRequestHead } from './request-head.js';
import type { FastifyBaseLogger } from 'fastify';

/** A new connection's first bytes are awaited this long before the service's parser takes it as is. */
const FIRST_BYTES_MS = 1_000;

/** New connections held at most while the child starts (more go to the service's parser). */
const MAX_AWAITING = 1_024;

/** How long after a child that never came up another is started (meanwhile the service answers). */
const RESTART_AFTER_FAILED_START_MS = 60_000;

/** How long the child may take to end its connections when the service closes. */
const CLOSE_WAIT_MS = 2_000;

/** Largest audio the child is sent whole when the service does not hold it (the cache's own bound). */
const MAX_SENT_BLOB_BYTES = 16 * 1024 * 1024;

/** How long reading a blob for the child may take before the child is told it is not there. */
const BLOB_READ_MS = 10_000;

/** An answer of the child whose access line the service writes: url, address, request id, status, ms. */
export type AnsweredRow = [string, string, string, number, number];

/** Answers of one route and status, for the metrics: route, status, each one's seconds, bytes in all. */
export type CountedGroup = [string, number, number[], number];

/** The audio a lookup found: its key and its time to be trusted without asking again. */
export interface FoundAudio {
  key: string;
  trustMs: number;
}

/** A blob's bytes and validators as the child serves them. */
export interface ChildBlob {
  size: number;
  etag: string;
  modifiedAt: number;
  bytes: Uint8Array;
}

export type ToFinishedAudioProcess =
  | { t: 'conn'; pending: Uint8Array }
  | { t: 'found'; id: number; found: FoundAudio | null }
  | { t: 'blob'; id: number; blob: ChildBlob | null }
  | { t: 'admitted'; id: number; admitted: RateLimitAdmission | null }
  | { t: 'forget'; taskId: string | null }
  /** Whether the child writes its answers' access lines to the standard output it shares. */
  | { t: 'logging'; own: boolean }
  | { t: 'template'; id: number; template: LineTemplate | null }
  /** The service closes: end every connection once its answer in progress is out, then exit. */
  | { t: 'close' };

/**
 * Why the child sent a connection back: its next request is for another route (or not plain), a
 * head not yet whole, a token the service refused, audio it cannot send whole, a conditional or
 * unsatisfiable range (304/412/416), or a refused rate limit — each the service's to answer.
 */
export type HandBackReason = 'route' | 'incomplete' | 'refused' | 'audio' | 'conditional' | 'rate_limit';

export type FromFinishedAudioProcess =
  /** Started: connections may be sent. */
  | { t: 'ready' }
  | { t: 'lookup'; id: number; taskId: string; idx: number | null; auth: string }
  | { t: 'blob'; id: number; key: string }
  /** `count` requests admitted under `clientKey` (already answered ones, or the one asking). */
  | { t: 'admit'; id: number; clientKey: string; count: number }
  | { t: 'template'; id: number; url: string; ip: string; status: number }
  | { t: 'answered'; rows: AnsweredRow[] }
  | { t: 'counted'; groups: CountedGroup[] }
  | { t: 'back'; pending: Uint8Array; reason: HandBackReason };

/** What the process reads of the service: the shortcut's dependencies and the routes' lookup. */
export interface FinishedAudioProcessDeps {
  audioKey(taskId: string, idx: number | null, auth: string): string | undefined;
  /** The routes' own lookup of a finished task's audio (remembered or read; undefined otherwise). */
  findAudioKey(taskId: string, idx: number | null, auth: string): Promise<string | undefined>;
  blobs: Pick<BlobStore, 'held' | 'stat' | 'read'>;
  rateLimit: InProcessRateLimit;
  log: FastifyBaseLogger;
  metrics: AnswerMeter;
}

const CHILD_URL = siblingModuleUrl(import.meta.url, 'finished-audio.child');

/** The service's side of the finished-audio process (one per node, started with the server). */
export class FinishedAudioProcess {
  private child: ChildProcess | undefined;
  private ready = false;
  private closed = false;
  private deps: FinishedAudioProcessDeps | undefined;
  private toParser: ((socket: Socket) => void) | undefined;
  private access: ReturnType<typeof accessLines> | undefined;
  private templates: AccessLineTemplates | undefined;
  /** When a child that failed to come up may be started again. */
  private restartAt = 0;
  /** New connections held until the child is up. */
  private readonly awaiting = new Set<() => void>();
  /** Connections sent to the child, and sent back by it (in all and by reason). */
  handedOff = 0;
  handedBack = 0;
  readonly handedBackFor = new Map<HandBackReason, number>();
  /** Access lines of the child's answers written here (the rest it writes itself). */
  linesWrittenHere = 0;

  constructor(
    /** How long the child may trust what a token opens without asking (the service's own time). */
    private readonly trustMs: number,
    /** The server's keep-alive time of an idle connection. */
    private readonly keepAliveMs: number,
  ) {}

  /**
   * Takes the new connections of `server` (the app's server, its routes registered) before its
   * parser: those that start with a finished-audio request go to the child.
   */
  attach(server: Server, deps: FinishedAudioProcessDeps): void {
    this.deps = deps;
    this.access = accessLines(deps.log);
    this.templates = accessLineTemplates(deps.log);
    const parserListeners = server.listeners('connection') as Array<(socket: Socket) => void>;
    server.removeAllListeners('connection');
    this.toParser = (socket) => {
      for (const listener of parserListeners) listener.call(server, socket);
    };
    server.on('connection', (socket: Socket) => this.firstBytes(socket));
  }

  /** The child's process id while it runs. */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Whether the child is up and takes connections. */
  get running(): boolean {
    return this.ready && !this.closed;
  }

  /** Connections sent to the child (`sent`) and sent back, by reason (`back_<reason>`). */
  connectionCounts(): ReadonlyMap<string, number> {
    const counts = new Map<string, number>([['sent', this.handedOff]]);
    for (const [reason, count] of this.handedBackFor) counts.set(`back_${reason}`, count);
    return counts;
  }

  /** Forgets what the child trusts of `taskId` (every task when null): deleted, or a new token. */
  forget(taskId: string | null): void {
    this.send({ t: 'forget', taskId });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.releaseAwaiting();
    const child = this.child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    await endChildProcess(child, () => this.send({ t: 'close' }), CLOSE_WAIT_MS);
  }

  /** Reads the connection's first bytes, then gives it to the child or to the service's parser. */
  private firstBytes(socket: Socket): void {
    if (this.closed) return this.toParser!(socket);
    const done = () => {
      clearTimeout(timer);
      socket.off('data', onData);
      socket.off('error', onGone);
      socket.off('close', onGone);
    };
    const onData = (chunk: Buffer) => {
      socket.pause();
      done();
      if (!this.forChild(chunk)) this.parse(socket, chunk);
      else if (this.started()) this.handOff(socket, chunk);
      else if (this.child !== undefined) this.awaitChild(socket, chunk);
      else this.parse(socket, chunk);
    };
    const onGone = () => {
      done();
      socket.destroy();
    };
    const timer = setTimeout(() => {
      done();
      this.toParser!(socket);
    }, FIRST_BYTES_MS);
    socket.on('data', onData);
    socket.on('error', onGone);
    socket.on('close', onGone);
  }

  /**
   * Whether `chunk` starts with a finished-audio request for the child. What its token opens is
   * the child's to ask (a refusal sends the connection back): the service's own memory of the
   * task and of its bytes lapses while the child serves them, and must not decide where a new
   * connection goes.
   */
  private forChild(chunk: Buffer): boolean {
    const read = readRequestHead(chunk);
    return !this.closed && read.kind === 'head' && plainAudioHead(read.head) !== undefined;
  }

  /**
   * Holds a connection for the child until it is up (it starts with the first one: a service that
   * serves no finished audio never runs it), else gives it to the parser after FIRST_BYTES_MS.
   * A connection given to the parser stays with the service for its life, as a player's
   * kept-alive one would.
   */
  private awaitChild(socket: Socket, read: Buffer): void {
    if (this.awaiting.size >= MAX_AWAITING) return this.parse(socket, read);
    const failed = () => socket.destroy();
    const waiting = () => {
      clearTimeout(timer);
      this.awaiting.delete(waiting);
      socket.off('close', waiting);
      socket.off('error', failed);
      if (socket.destroyed) return;
      if (this.ready && !this.closed) this.handOff(socket, read);
      else this.parse(socket, read);
    };
    const timer = setTimeout(waiting, FIRST_BYTES_MS);
    socket.once('close', waiting);
    socket.on('error', failed);
    this.awaiting.add(waiting);
  }

  /** Sends every connection held for the child to it (once up) or to the parser (it failed or closed). */
  private releaseAwaiting(): void {
    for (const waiting of [...this.awaiting]) waiting();
  }

  /** The audio under `key` whole, held or read; undefined when empty, missing or too large to send. */
  private async wholeBlob(key: string): Promise<ChildBlob | undefined> {
    const { blobs } = this.deps!;
    const held = blobs.held?.(key);
    const info = held?.info ?? (await blobs.stat(key));
    if (info === undefined || info.size === 0 || info.size > MAX_SENT_BLOB_BYTES) return undefined;
    const bytes = held?.bytes ?? (await readWhole(blobs.read(key), BLOB_READ_MS));
    if (bytes.byteLength !== info.size) return undefined;
    return { size: info.size, etag: info.etag, modifiedAt: info.modifiedAt.getTime(), bytes };
  }

  /** The service's parser takes the connection, `read` first. */
  private parse(socket: Socket, read: Buffer): void {
    if (read.length > 0) socket.unshift(read);
    this.toParser!(socket);
    process.nextTick(() => socket.resume());
  }

  private handOff(socket: Socket, read: Buffer): void {
    const pending = unreadBytes(socket, read);
    if (pending === undefined) return;
    const child = this.child;
    if (child?.connected !== true) return this.parse(socket, pending);
    this.handedOff++;
    detachFromServer(socket);
    child.send({ t: 'conn', pending } satisfies ToFinishedAudioProcess, socket, (err) => {
      if (err) socket.destroy();
    });
  }

  /** Whether the child is up; starts it when it is not running (first use, or it exited). */
  private started(): boolean {
    if (this.closed) return false;
    if (this.child !== undefined) return this.ready;
    if (Date.now() < this.restartAt) return false;
    const child = forkModule(CHILD_URL, [String(this.keepAliveMs)], 0, {
      stdout: 'inherit',
      stderr: 'inherit',
      serialization: 'advanced',
    });
    this.child = child;
    child.on('message', (message: FromFinishedAudioProcess, socket?: Socket) =>
      this.receive(message, socket),
    );
    const gone = (why: string) => {
      if (this.child !== child) return;
      // A child that never came up is not started again at once: each try would hold connections.
      if (!this.ready) this.restartAt = Date.now() + RESTART_AFTER_FAILED_START_MS;
      this.ready = false;
      this.child = undefined;
      this.releaseAwaiting();
      if (!this.closed) this.deps?.log.error(`the finished-audio process ${why}`);
    };
    child.on('error', (err) => {
      this.deps?.log.error({ err }, 'the finished-audio process failed');
      if (child.pid === undefined) gone('could not be started');
    });
    child.once('exit', (code, signal) => gone(`exited (${signal ?? `code ${code ?? '?'}`})`));
    child.unref();
    child.channel?.unref();
    return false;
  }

  private send(message: ToFinishedAudioProcess): void {
    const child = this.child;
    if (child?.connected === true) child.send(message);
  }

  private receive(message: FromFinishedAudioProcess, socket?: Socket): void {
    const deps = this.deps!;
    switch (message.t) {
      case 'ready': {
        this.ready = true;
        // The child writes its lines itself where they are the service's own: JSON lines on the
        // standard output both share, each batch one write short of a pipe's atomic size.
        const templates = this.templates;
        const own =
          templates !== undefined &&
          templates.epochTime &&
          isBatchedJsonStdout(templates.stream) &&
          infoEnabled(deps.log)();
        this.send({ t: 'logging', own });
        this.releaseAwaiting();
        return;
      }
      case 'template':
        this.send({
          t: 'template',
          id: message.id,
          template: this.templates?.template(message.url, message.ip, message.status) ?? null,
        });
        return;
      case 'lookup':
        void deps.findAudioKey(message.taskId, message.idx, message.auth).then(
          (key) => {
            const found = key === undefined ? null : { key, trustMs: this.trustMs };
            this.send({ t: 'found', id: message.id, found });
          },
          () => this.send({ t: 'found', id: message.id, found: null }),
        );
        return;
      case 'blob':
        void this.wholeBlob(message.key).then(
          (blob) => this.send({ t: 'blob', id: message.id, blob: blob ?? null }),
          () => this.send({ t: 'blob', id: message.id, blob: null }),
        );
        return;
      case 'admit': {
        let admitted: RateLimitAdmission | undefined;
        for (let i = 0; i < message.count; i++) {
          admitted = deps.rateLimit.admit(message.clientKey);
          if (admitted === undefined) break;
        }
        this.send({ t: 'admitted', id: message.id, admitted: admitted ?? null });
        return;
      }
      case 'answered':
        this.linesWrittenHere += message.rows.length;
        for (const [url, ip, reqId, status, ms] of message.rows) this.access!(url, ip, reqId, status, ms);
        return;
      case 'counted':
        for (const [route, status, seconds, bytes] of message.groups)
          deps.metrics.answeredMany('GET', route, status, seconds, bytes);
        return;
      case 'back':
        this.handedBack++;
        this.handedBackFor.set(message.reason, (this.handedBackFor.get(message.reason) ?? 0) + 1);
        if (socket !== undefined) this.parse(socket, Buffer.from(message.pending));
        return;
    }
  }
}

/**
 * Takes a connection out of its server's count before it is sent to the child. Node would
 * otherwise have the server ask the child, when it closes, whether every connection it was sent
 * has ended — and once the child has exited, that server's close never completes. The connection
 * is the child's: the server neither waits for it nor closes it.
 */
function detachFromServer(socket: Socket): void {
  const attached = socket as unknown as { server?: { _connections?: number } | null };
  const server = attached.server;
  if (server === undefined || server === null) return;
  attached.server = null;
  if (typeof server._connections === 'number') server._connections--;
}

/** Every byte of `source`, or a rejection once `ms` have passed (the stream is then destroyed). */
async function readWhole(source: Readable, ms: number): Promise<Buffer> {
  const timer = setTimeout(() => source.destroy(new Error(`the blob was not read within ${ms} ms`)), ms);
  try {
    return await buffer(source);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Stops reading `socket` and returns `read` with every byte read since; undefined when the
 * socket cannot be handed on (already closed).
 */
export function unreadBytes(socket: Socket, read: Buffer): Buffer | undefined {
  const handle = (socket as unknown as { _handle?: { readStop?(): number } | null })._handle;
  if (handle?.readStop === undefined || socket.destroyed) return undefined;
  socket.pause();
  handle.readStop();
  const chunks = [read];
  for (let more: Buffer | null; (more = socket.read() as Buffer | null) !== null;) chunks.push(more);
  return chunks.length === 1 ? read : Buffer.concat(chunks);
}
