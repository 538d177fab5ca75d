/**
 * Finished audio answered before Fastify routes the request. A node alone serving ranges of finished
 * audio spent most of each request in the framework around a few microseconds of work: routing,
 * hooks, the rate-limit plugin's promises, a reply object, a log line serialized and scrubbed field
 * by field. This path answers the one common case — a plain GET of `…/{id}/audio.mp3` or
 * `…/{id}/{n}/audio.mp3` with exactly `?auth=<token>`, whose task is remembered as finished with
 * that token and whose audio is held in memory, planned as a 200 or a 206 — with the same checks,
 * counters, headers, access line and metrics as the routes, decided once where they can be (the
 * line's fixed parts per path and client address, the blob's validators per blob).
 *
 * Every other request — another method, a header it does not decide on (Expect, a body, CORS, a
 * proxy's addresses), a task it does not remember, a wrong token, a 304/412/416 plan, a request the
 * rate limit refuses — goes to the routes untouched, which answer it (and count it) as always.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import pino from 'pino';
import type { BlobInfo, BlobStore } from '../storage/blob-store.js';
import { bodyWindow, planRange } from '../stream/range-plan.js';
import { answerHeaders, audioTarget, ROUTED_HEADERS } from './finished-audio.js';
import { addressKey, type InProcessRateLimit } from './rate-limit.js';
import { plannedRequestHeaders } from './reply-plan.js';
import type { RequestShortcut } from './server.js';

/** Where answered requests are counted (the service metrics, as their hooks count the routes'). */
export interface AnswerMeter {
  /** Counts one answered request as the hooks do (route = its route pattern). */
  answered(method: string, route: string, status: number, seconds: number, bytes: number): void;
  /** Counts requests of one method, route and status at once: their times and their bytes in all. */
  answeredMany(
    method: string,
    route: string,
    status: number,
    seconds: readonly number[],
    bytes: number,
  ): void;
}

/** What the shortcut reads; each part is the one the routes use. */
export interface FinishedAudioShortcutDeps {
  /** The task service's remembered audio key (no I/O), undefined when the routes must decide. */
  audioKey(taskId: string, idx: number | null, auth: string): string | undefined;
  blobs: Pick<BlobStore, 'held'>;
  /** The audio routes' rate limit, counted in the same windows. */
  rateLimit: InProcessRateLimit;
  /** The app's logger (access lines as the routes' logger writes them). */
  log: FastifyBaseLogger;
  metrics: AnswerMeter;
}

/** Validators of a held blob, rendered once per blob. */
interface BlobHeaders {
  lastModified: string;
}

/** True when the request has exactly one Host field line (Node keeps the first of several). */
function oneHost(req: IncomingMessage): boolean {
  const raw = req.rawHeaders;
  let hosts = 0;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i]!;
    if (name.length === 4 && name.toLowerCase() === 'host') hosts++;
  }
  return hosts === 1;
}

/** Creates the shortcut (give it to answerBeforeRouting). */
export function finishedAudioShortcut(deps: FinishedAudioShortcutDeps): RequestShortcut {
  const blobHeaders = new WeakMap<BlobInfo, BlobHeaders>();
  const counterKeys = new WeakMap<Socket, string>();
  const access = accessLines(deps.log);

  return (req, res) => {
    const started = performance.now();
    if (req.method !== 'GET' || req.httpVersion !== '1.1') return false;
    const url = req.url ?? '';
    const target = audioTarget(url);
    if (target === undefined) return false;
    const headers = req.headers;
    if (headers.host === undefined || !oneHost(req)) return false;
    for (const name of ROUTED_HEADERS) if (headers[name] !== undefined) return false;
    const { taskId, idx, auth, route } = target;
    const key = deps.audioKey(taskId, idx, auth);
    if (key === undefined) return false;
    const held = deps.blobs.held?.(key);
    if (held === undefined || held.info.size === 0) return false;
    const { info } = held;
    const plan = planRange({
      method: 'GET',
      ...plannedRequestHeaders(headers),
      etag: info.etag,
      lastModified: info.modifiedAt,
      produced: info.size,
      finalSize: info.size,
    });
    if (plan.kind !== 'full' && plan.kind !== 'partial') return false;
    const address = req.socket.remoteAddress;
    if (address === undefined) return false;
    // A connection keeps its address: its counter's key is made once (normalising is a regex).
    let counterKey = counterKeys.get(req.socket);
    if (counterKey === undefined) {
      counterKey = addressKey(address);
      counterKeys.set(req.socket, counterKey);
    }
    // Last: a request handed to the routes after this would be counted twice.
    const admitted = deps.rateLimit.admit(counterKey);
    if (admitted === undefined) return false;

    let validators = blobHeaders.get(info);
    if (validators === undefined) {
      validators = { lastModified: info.modifiedAt.toUTCString() };
      blobHeaders.set(info, validators);
    }
    const window = bodyWindow(plan)!;
    const requestId = randomUUID();
    const bytesBefore = req.socket.bytesWritten;
    const out = answerHeaders(plan, admitted, requestId, validators.lastModified);
    res.writeHead(plan.status, out);
    res.end(held.bytes.subarray(window.start, window.endExclusive ?? info.size));
    // The socket counts what it was given, sent or still queued: the figure 'finish' would read.
    const bytes = req.socket.bytesWritten - bytesBefore;
    res.once('finish', () => {
      const elapsedMs = performance.now() - started;
      access(url, address, requestId, plan.status, elapsedMs);
      deps.metrics.answered('GET', route, plan.status, elapsedMs / 1000, bytes);
    });
    return true;
  };
}

/** Fixed parts of one kind of access line, around its time, request id and response time. */
export interface LineTemplate {
  head: string;
  afterTime: string;
  afterId: string;
  tail: string;
}

const TIME_MARK = ',"time":"\u0001time\u0001"';
const ID_MARK = '\u0002id\u0002';
const MS_MARK = 987654321.125;
/** Line templates kept at most (kinds of line: paths × client addresses × statuses). */
const MAX_TEMPLATES = 1_000;

/** `text` split around its one occurrence of `mark`; undefined when it has none or several. */
function splitOnce(text: string | undefined, mark: string): [string, string] | undefined {
  const parts = text?.split(mark);
  return parts?.length === 2 ? [parts[0]!, parts[1]!] : undefined;
}

/**
 * Writes the routes' access line (`request completed`, the redacted URL, the client address,
 * status and response time, under the request id) for an answer of the shortcut. The line is the
 * logger's own: its serializers, redaction and line scrubber make a template once per kind of
 * line, into which only the time, a UUID and a number are put per request — values the scrubber
 * leaves alone, between JSON delimiters no credential pattern spans. A destination that wants each
 * line's metadata (a multistream) gets every line through the logger instead.
 */
export function accessLines(
  log: FastifyBaseLogger,
): (url: string, ip: string, reqId: string, status: number, ms: number) => void {
  const info = infoEnabled(log);
  const slow = (url: string, ip: string, reqId: string, status: number, ms: number) =>
    log.info(
      { reqId, req: { method: 'GET', url, ip }, res: { statusCode: status }, responseTime: ms },
      'request completed',
    );
  const templates = accessLineTemplates(log);
  if (templates === undefined)
    return (...args) => {
      if (info()) slow(...args);
    };
  const { stream, time } = templates;
  return (url, ip, reqId, status, ms) => {
    if (!info()) return;
    const parts = templates.template(url, ip, status);
    if (parts === null) {
      slow(url, ip, reqId, status, ms);
      return;
    }
    stream.write(`${parts.head}${time()}${parts.afterTime}${reqId}${parts.afterId}${ms}${parts.tail}`);
  };
}

/** Whether the logger writes info lines now (Fastify's logger with logging off does nothing). */
export function infoEnabled(log: FastifyBaseLogger): () => boolean {
  // Fastify's logger is pino's (its type leaves out the level check).
  const levelCheck = (log as unknown as Partial<pino.Logger>).isLevelEnabled;
  return () => levelCheck?.call(log, 'info') ?? true;
}

/** The logger's access-line templates and where its lines go. */
export interface AccessLineTemplates {
  /** The template of a kind of line (null: that kind goes through the logger). */
  template(url: string, ip: string, status: number): LineTemplate | null;
  stream: { write(line: string): unknown };
  /** The logger's time field. */
  time: () => string;
  /** Whether that field is pino's epoch milliseconds (`,"time":<ms>`), which another process can write. */
  epochTime: boolean;
}

/**
 * Templates of the routes' access lines made by `log` itself (see accessLines); undefined when its
 * destination wants each line's metadata or it is not pino's.
 */
export function accessLineTemplates(log: FastifyBaseLogger): AccessLineTemplates | undefined {
  const logger = log as unknown as Record<symbol, unknown>;
  const { asJsonSym, timeSym, streamSym, hooksSym, needsMetadataGsym } = pino.symbols;
  const stream = logger[streamSym] as { write(line: string): unknown; [key: symbol]: unknown } | undefined;
  const asJson = logger[asJsonSym] as
    ((obj: object, msg: string, level: number, time: string) => string) | undefined;
  const time = logger[timeSym] as (() => string) | undefined;
  const scrub = (logger[hooksSym] as { streamWrite?: (line: string) => string } | undefined)?.streamWrite;
  if (
    stream === undefined ||
    stream[needsMetadataGsym] === true ||
    asJson === undefined ||
    time === undefined
  )
    return undefined;

  const templates = new Map<string, LineTemplate | null>();
  const template = (url: string, ip: string, status: number): LineTemplate | null => {
    // Only the token's value differs between requests of one path: its redacted form is the same.
    const path = url.slice(0, url.indexOf('?'));
    const kind = `${status} ${ip} ${path}`;
    let found = templates.get(kind);
    if (found !== undefined) return found;
    const entry = {
      reqId: ID_MARK,
      req: { method: 'GET', url, ip },
      res: { statusCode: status },
      responseTime: MS_MARK,
    };
    const line = asJson.call(log, entry, 'request completed', 30, TIME_MARK);
    const scrubbed = scrub === undefined ? line : scrub(line);
    // The marks must each appear once, where the logger put them; else every line of this kind
    // goes through the logger.
    const [head, rest] = splitOnce(scrubbed, TIME_MARK) ?? [];
    const [afterTime, rest2] = splitOnce(rest, JSON.stringify(ID_MARK).slice(1, -1)) ?? [];
    const [afterId, tail] = splitOnce(rest2, `:${MS_MARK}`) ?? [];
    found =
      head === undefined || afterTime === undefined || afterId === undefined || tail === undefined
        ? null
        : { head, afterTime, afterId: `${afterId}:`, tail };
    if (templates.size >= MAX_TEMPLATES) templates.clear();
    templates.set(kind, found);
    return found;
  };

  return { template, stream, time, epochTime: time === pino.stdTimeFunctions.epochTime };
}
