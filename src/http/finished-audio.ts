/**
 * The common finished-audio request, shared by the two paths that answer it before the routes: the
 * shortcut in the service's process (finished-audio.shortcut.ts) and the finished-audio process
 * (finished-audio.process.ts) — which URLs, which request fields and which answer headers.
 */
import type { FullPlan, PartialPlan } from '../stream/range-plan.js';
import { planHeaders } from '../stream/range-plan.js';
import type { RateLimitAdmission } from './rate-limit.js';
import type { RequestHead } from './request-head.js';

/** Sent with every answer (as the server's onRequest hook sends it on the routes' answers). */
const REQUEST_ID_FIELD = 'x-service-app-request-id';

/** As the audio routes answer finished audio. */
const CACHE_CONTROL = 'private, max-age=86400';

/** The route patterns the answers are counted under, as Fastify names them. */
export const TASK_ROUTE = '/api/tts/generate/:id/audio.mp3';
export const CONTENT_ROUTE = '/api/tts/generate/:id/:contentIndex/audio.mp3';

/**
 * The URLs this path answers: a task id of letters, digits and dashes, an optional content index
 * of at most six digits (as the route accepts) and one `auth` parameter of token characters — no
 * percent-encoding, no other parameter (a download name, a repeated `auth`: the routes decide).
 */
const AUDIO_URL =
  /^\/api\/tts\/generate\/([0-9A-Za-z-]{1,64})\/(?:(\d{1,6})\/)?audio\.mp3\?auth=([0-9A-Za-z_-]{1,128})$/;

/** Request fields whose presence hands the request to the routes (framing, bodies, expectations). */
export const ROUTED_HEADERS = ['transfer-encoding', 'content-length', 'content-encoding', 'expect'] as const;

/** What a plain finished-audio URL names. */
export interface AudioTarget {
  taskId: string;
  /** The content's index, null for the task's merged audio. */
  idx: number | null;
  auth: string;
  /** The route pattern its answers are counted under. */
  route: string;
}

/** The task, content and token of a URL this path answers; undefined for every other URL. */
export function audioTarget(url: string): AudioTarget | undefined {
  const match = AUDIO_URL.exec(url);
  if (match === null) return undefined;
  const [, taskId = '', index, auth = ''] = match;
  return index === undefined
    ? { taskId, idx: null, auth, route: TASK_ROUTE }
    : { taskId, idx: Number(index), auth, route: CONTENT_ROUTE };
}

/**
 * The answer's header fields, as a flat list of names and values in the routes' order: the
 * server's, the rate limit's, the plan's and the blob's.
 */
export function answerHeaders(
  plan: FullPlan | PartialPlan,
  admitted: RateLimitAdmission,
  requestId: string,
  lastModified: string,
): string[] {
  const out: string[] = [
    REQUEST_ID_FIELD,
    requestId,
    'x-content-type-options',
    'nosniff',
    'x-ratelimit-limit',
    String(admitted.limit),
    'x-ratelimit-remaining',
    String(admitted.remaining),
    'x-ratelimit-reset',
    String(admitted.resetSeconds),
  ];
  for (const [name, value] of Object.entries(planHeaders(plan))) out.push(name.toLowerCase(), value);
  out.push('content-type', 'audio/mpeg', 'last-modified', lastModified, 'cache-control', CACHE_CONTROL);
  return out;
}

/** The range planner's request fields (each must come at most once in a head read raw). */
const PLANNED_FIELDS = [
  'range',
  'if-range',
  'if-match',
  'if-none-match',
  'if-modified-since',
  'if-unmodified-since',
];

/**
 * The target of a raw request head this path answers as the shortcut would: a GET of HTTP/1.1
 * with one Host, no framing or expectation fields, no upgrade, at most one of each field the range
 * planner reads, and `Connection` only to keep the connection or close it. Undefined otherwise.
 */
export function plainAudioHead(head: RequestHead): AudioTarget | undefined {
  if (head.method !== 'GET' || head.version !== '1.1') return undefined;
  const { fields } = head;
  if (fields.get('host')?.length !== 1 || fields.has('upgrade')) return undefined;
  for (const name of ROUTED_HEADERS) if (fields.has(name)) return undefined;
  for (const name of PLANNED_FIELDS) if ((fields.get(name)?.length ?? 0) > 1) return undefined;
  if (connectionOptions(head) === undefined) return undefined;
  return audioTarget(head.target);
}

/**
 * Whether the client asked to close the connection after this answer; undefined when its
 * `Connection` field names anything but `keep-alive` and `close`.
 */
export function connectionOptions(head: RequestHead): { close: boolean } | undefined {
  let close = false;
  for (const value of head.fields.get('connection') ?? []) {
    for (const option of value.split(',')) {
      const name = option.trim().toLowerCase();
      if (name === 'close') close = true;
      else if (name !== 'keep-alive' && name !== '') return undefined;
    }
  }
  return { close };
}

/** The range planner's request fields of a raw head (one value each, see plainAudioHead). */
export function plannedHeadFields(head: RequestHead): Record<string, string | undefined> {
  const out: Record<string, string | undefined> = {};
  for (const name of PLANNED_FIELDS) out[name] = head.fields.get(name)?.[0];
  return out;
}
