/**
 * The finished-audio process (finished-audio.process.ts): answers the requests of the connections
 * the service sends it, as the shortcut would (finished-audio.ts), and sends a connection back
 * with its unanswered bytes at the first request it does not answer. Ends with the service.
 */
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import pino from 'pino';
import { bodyWindow, planRange } from '../stream/range-plan.js';
import { answerHeaders, connectionOptions, plainAudioHead, plannedHeadFields } from './finished-audio.js';
import {
  unreadBytes,
  type AnsweredRow,
  type ChildBlob,
  type CountedGroup,
  type FoundAudio,
  type FromFinishedAudioProcess,
  type HandBackReason,
  type ToFinishedAudioProcess,
} from './finished-audio.process.js';
import type { LineTemplate } from './finished-audio.shortcut.js';
import { addressKey, type RateLimitAdmission } from './rate-limit.js';
import { plannedRequestHeaders } from './reply-plan.js';
import { JSON_BATCH_BYTES, JSON_FLUSH_MS } from './log-format.js';
import { readRequestHead } from './request-head.js';

/** The service's keep-alive time of an idle connection, given as this process's one argument. */
const KEEP_ALIVE_TIMEOUT_MS = Number(process.argv[2]) || 5_000;
/** Unanswered bytes a connection may hold before it is read no further until they are answered. */
const MAX_UNANSWERED_BYTES = 64 * 1024;
/** Lookups remembered at most (a token's audio), and bytes of audio held at most. */
const MAX_LOOKUPS = 10_000;
const MAX_HELD_BYTES = 256 * 1024 * 1024;
/** How often requests admitted here are counted in the service's rate-limit windows. */
const ADMIT_SYNC_MS = 200;
/** How often answers are sent for access lines and metrics, and lines written at the latest. */
const ANSWERED_FLUSH_MS = 100;
/** How long a question to the service may wait (a blob read there has 10 s) before the request goes back. */
const ASK_DEADLINE_MS = 15_000;

interface Held {
  blob: ChildBlob;
  bytes: Buffer;
  lastModified: string;
}

/** This process's view of one client's rate-limit window. */
interface Window {
  limit: number;
  remaining: number;
  resetAt: number;
  /** Admitted here and not yet counted by the service. */
  unsynced: number;
}

const lookups = new Map<string, { found: FoundAudio; until: number }>();
const held = new Map<string, Held>();
let heldBytes = 0;
const windows = new Map<string, Window>();
/** Access lines the service writes (this process has no template for their kind). */
let answered: AnsweredRow[] = [];
/** Answers to count in the service's metrics, by route and status. */
let counted = new Map<string, CountedGroup>();
/** Where this process writes access lines itself, when the service says it may. */
let lines: ReturnType<typeof pino.destination> | undefined;
/** The service's line templates by kind of line (null: the service writes that kind). */
const templates = new Map<string, LineTemplate | null>();
const MAX_TEMPLATES = 1_000;

let nextId = 1;
const waiting = new Map<number, (message: ToFinishedAudioProcess) => void>();
const connections = new Set<Connection>();
let closing = false;

/** Exits once the service closes and every connection has ended. */
function exitWhenDone(): void {
  if (closing && connections.size === 0) process.exit(0);
}

const send = (message: FromFinishedAudioProcess, socket?: Socket): void => {
  if (process.connected) process.send!(message, socket);
};

/** The service's reply to `message`; undefined when none came within ASK_DEADLINE_MS. */
function ask(
  message: FromFinishedAudioProcess & { id: number },
): Promise<ToFinishedAudioProcess | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      waiting.delete(message.id);
      resolve(undefined);
    }, ASK_DEADLINE_MS);
    waiting.set(message.id, (reply) => {
      clearTimeout(timer);
      resolve(reply);
    });
    send(message);
  });
}

process.on('message', (message: ToFinishedAudioProcess, socket?: Socket) => {
  switch (message.t) {
    case 'conn':
      if (socket === undefined) return;
      if (closing) socket.destroy();
      else new Connection(socket, Buffer.from(message.pending)).next();
      return;
    case 'close':
      closing = true;
      for (const connection of connections) connection.end();
      exitWhenDone();
      return;
    case 'logging':
      if (message.own)
        lines = pino.destination({
          dest: 1,
          sync: true,
          minLength: JSON_BATCH_BYTES,
          periodicFlush: JSON_FLUSH_MS,
        });
      return;
    case 'forget':
      if (message.taskId === null) lookups.clear();
      else for (const key of lookups.keys()) if (key.startsWith(`${message.taskId}/`)) lookups.delete(key);
      return;
    case 'found':
    case 'blob':
    case 'admitted':
    case 'template': {
      const resolve = waiting.get(message.id);
      waiting.delete(message.id);
      resolve?.(message);
    }
  }
});
// The service is gone: so are its connections.
process.on('disconnect', () => process.exit(0));

async function audioFor(taskId: string, idx: number | null, auth: string): Promise<string | undefined> {
  const name = `${taskId}/${idx ?? ''}/${auth}`;
  const known = lookups.get(name);
  if (known !== undefined && known.until > Date.now()) return known.found.key;
  const reply = await ask({ t: 'lookup', id: nextId++, taskId, idx, auth });
  if (reply?.t !== 'found' || reply.found === null) return undefined;
  if (lookups.size >= MAX_LOOKUPS) lookups.clear();
  lookups.set(name, { found: reply.found, until: Date.now() + reply.found.trustMs });
  return reply.found.key;
}

async function heldBlob(key: string): Promise<Held | undefined> {
  const known = held.get(key);
  if (known !== undefined) {
    // Most recently used last: the oldest go first when the bytes are over their bound.
    held.delete(key);
    held.set(key, known);
    return known;
  }
  const reply = await ask({ t: 'blob', id: nextId++, key });
  if (reply?.t !== 'blob' || reply.blob === null || reply.blob.size === 0) return undefined;
  const { blob } = reply;
  const bytes = Buffer.from(blob.bytes.buffer, blob.bytes.byteOffset, blob.bytes.byteLength);
  const entry = { blob, bytes, lastModified: new Date(blob.modifiedAt).toUTCString() };
  held.set(key, entry);
  heldBytes += bytes.length;
  for (const [oldKey, old] of held) {
    if (heldBytes <= MAX_HELD_BYTES || oldKey === key) break;
    held.delete(oldKey);
    heldBytes -= old.bytes.length;
  }
  return entry;
}

/** Admits one request under `key`: asks the service for a new window, else counts here. */
async function admit(key: string): Promise<RateLimitAdmission | undefined> {
  const now = Date.now();
  const window = windows.get(key);
  if (window !== undefined && window.resetAt > now) {
    if (window.remaining <= 0) return undefined;
    window.remaining--;
    window.unsynced++;
    return {
      limit: window.limit,
      remaining: window.remaining,
      resetSeconds: Math.ceil((window.resetAt - now) / 1000),
    };
  }
  const reply = await ask({ t: 'admit', id: nextId++, clientKey: key, count: 1 });
  if (reply?.t !== 'admitted' || reply.admitted === null) return undefined;
  const { admitted } = reply;
  windows.set(key, {
    limit: admitted.limit,
    remaining: admitted.remaining,
    resetAt: Date.now() + admitted.resetSeconds * 1000,
    unsynced: 0,
  });
  return admitted;
}

/** Counts the requests admitted here in the service's windows, and takes its counts back. */
function syncWindows(): void {
  const now = Date.now();
  for (const [key, window] of windows) {
    if (window.resetAt <= now && window.unsynced === 0) {
      windows.delete(key);
      continue;
    }
    if (window.unsynced === 0) continue;
    const count = window.unsynced;
    window.unsynced = 0;
    void ask({ t: 'admit', id: nextId++, clientKey: key, count }).then((reply) => {
      if (reply?.t !== 'admitted') return;
      // What was admitted here since the count left is still to be counted there.
      if (reply.admitted === null) window.remaining = 0;
      else window.remaining = Math.max(0, reply.admitted.remaining - window.unsynced);
    });
  }
}
setInterval(syncWindows, ADMIT_SYNC_MS).unref();

setInterval(() => {
  if (answered.length > 0) send({ t: 'answered', rows: answered });
  answered = [];
  if (counted.size > 0) send({ t: 'counted', groups: [...counted.values()] });
  counted = new Map();
}, ANSWERED_FLUSH_MS).unref();

/** Counts an answer in the metrics and writes its access line (or has the service write it). */
function record(row: AnsweredRow, route: string, bytes: number): void {
  const [url, ip, reqId, status, ms] = row;
  const group = `${route} ${status}`;
  const known = counted.get(group);
  if (known === undefined) counted.set(group, [route, status, [ms / 1000], bytes]);
  else {
    known[2].push(ms / 1000);
    known[3] += bytes;
  }
  if (lines === undefined) {
    answered.push(row);
    return;
  }
  const kind = `${status} ${ip} ${url.slice(0, url.indexOf('?'))}`;
  const parts = templates.get(kind);
  if (parts === undefined || parts === null) {
    answered.push(row);
    // Asked once per kind; meanwhile the service writes that kind's lines.
    if (parts === undefined) {
      if (templates.size >= MAX_TEMPLATES) templates.clear();
      templates.set(kind, null);
      void ask({ t: 'template', id: nextId++, url, ip, status }).then((reply) => {
        if (reply?.t === 'template') templates.set(kind, reply.template);
      });
    }
    return;
  }
  // pino's epoch time, as the service's logger writes it (the service checked that it does).
  lines.write(
    `${parts.head},"time":${Date.now()}${parts.afterTime}${reqId}${parts.afterId}${ms}${parts.tail}`,
  );
}

process.once('exit', () => {
  try {
    lines?.flushSync();
  } catch {
    // standard output is gone
  }
});

/** The Date field of this second (as Node's server caches it). */
let dateSecond = 0;
let dateField = '';
function date(): string {
  const now = Date.now();
  const second = Math.floor(now / 1000);
  if (second !== dateSecond) {
    dateSecond = second;
    dateField = new Date(now).toUTCString();
  }
  return dateField;
}

const KEEP_ALIVE_FIELDS = `Connection: keep-alive\r\nKeep-Alive: timeout=${Math.floor(KEEP_ALIVE_TIMEOUT_MS / 1000)}\r\n\r\n`;
const CLOSE_FIELDS = 'Connection: close\r\n\r\n';

/** One connection sent by the service: answers its requests in order until one is not for here. */
class Connection {
  private offset = 0;
  private busy = false;
  private gone = false;
  private returning = false;
  private readonly address: string;
  private readonly key: string;

  constructor(
    private readonly socket: Socket,
    private buffer: Buffer,
  ) {
    connections.add(this);
    this.address = socket.remoteAddress ?? '';
    this.key = addressKey(this.address);
    socket.on('data', this.onData);
    socket.on('error', this.onGone);
    socket.on('close', this.onGone);
    socket.on('timeout', () => socket.destroy());
    socket.on('drain', () => this.next());
  }

  private readonly onData = (chunk: Buffer): void => {
    this.buffer =
      this.offset === this.buffer.length ? chunk : Buffer.concat([this.buffer.subarray(this.offset), chunk]);
    this.offset = 0;
    if (this.buffer.length > MAX_UNANSWERED_BYTES) this.socket.pause();
    this.next();
  };

  private readonly onGone = (): void => {
    this.gone = true;
    this.socket.destroy();
    connections.delete(this);
    exitWhenDone();
  };

  /** Ends the connection: now when idle, else once the answer in progress is out. */
  end(): void {
    if (!this.busy) this.onGone();
  }

  /** Answers the buffered requests; waits, idle, for more; or sends the connection back. */
  next(): void {
    if (this.gone || this.busy || this.returning) return;
    if (closing) {
      this.socket.end(() => this.onGone());
      return;
    }
    if (this.socket.writableNeedDrain) return; // 'drain' goes on
    if (this.offset === this.buffer.length) {
      // Idle: the service's keep-alive time applies.
      this.socket.setTimeout(KEEP_ALIVE_TIMEOUT_MS);
      this.socket.resume();
      return;
    }
    this.socket.setTimeout(0);
    this.busy = true;
    this.answer().then(
      (answered) => {
        this.busy = false;
        if (answered === true) this.next();
        else this.sendBack(answered);
      },
      () => this.socket.destroy(),
    );
  }

  /** Answers the next request; else says why it is not for this process. */
  private async answer(): Promise<true | HandBackReason> {
    const started = performance.now();
    const read = readRequestHead(this.buffer, this.offset);
    if (read.kind !== 'head') return read.kind === 'incomplete' ? 'incomplete' : 'route';
    const { head } = read;
    const target = plainAudioHead(head);
    if (target === undefined) return 'route';
    const key = await audioFor(target.taskId, target.idx, target.auth);
    if (key === undefined) return 'refused';
    const audio = await heldBlob(key);
    if (audio === undefined || this.gone) return 'audio';
    const { blob } = audio;
    const plan = planRange({
      method: 'GET',
      ...plannedRequestHeaders(plannedHeadFields(head)),
      etag: blob.etag,
      lastModified: new Date(blob.modifiedAt),
      produced: blob.size,
      finalSize: blob.size,
    });
    if (plan.kind !== 'full' && plan.kind !== 'partial') return 'conditional';
    // Last: a request sent back after this would be counted twice.
    const admitted = await admit(this.key);
    if (admitted === undefined || this.gone) return 'rate_limit';

    this.offset += head.length;
    const close = connectionOptions(head)!.close;
    const requestId = randomUUID();
    const fields = answerHeaders(plan, admitted, requestId, audio.lastModified);
    let text = `HTTP/1.1 ${plan.status} ${STATUS_CODES[plan.status]}\r\n`;
    for (let i = 0; i < fields.length; i += 2) text += `${fields[i]}: ${fields[i + 1]}\r\n`;
    text += `Date: ${date()}\r\n${close ? CLOSE_FIELDS : KEEP_ALIVE_FIELDS}`;
    const window = bodyWindow(plan)!;
    const body = audio.bytes.subarray(window.start, window.endExclusive ?? blob.size);
    const socket = this.socket;
    socket.cork();
    socket.write(text, 'latin1');
    socket.write(body);
    socket.uncork();
    if (socket.writableNeedDrain) socket.pause();
    record(
      [head.target, this.address, requestId, plan.status, performance.now() - started],
      target.route,
      Buffer.byteLength(text, 'latin1') + body.length,
    );
    if (close) {
      this.gone = true;
      socket.end();
    }
    return true;
  }

  /** Sends the connection back to the service with every byte not answered, once all answers are out. */
  private sendBack(reason: HandBackReason): void {
    if (this.gone) return;
    this.returning = true;
    if (this.socket.writableLength > 0) {
      this.socket.once('drain', () => this.sendBack(reason));
      return;
    }
    this.gone = true;
    const socket = this.socket;
    socket.setTimeout(0);
    socket.removeAllListeners('data');
    socket.removeAllListeners('drain');
    socket.removeAllListeners('timeout');
    const pending = unreadBytes(socket, this.buffer.subarray(this.offset));
    socket.removeAllListeners('error');
    socket.removeAllListeners('close');
    connections.delete(this);
    if (pending !== undefined) send({ t: 'back', pending, reason }, socket);
    exitWhenDone();
  }
}

send({ t: 'ready' });
