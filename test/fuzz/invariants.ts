/**
 * The invariants every response of the fuzz suite must hold, shared
 * by the CI test (test/fuzz.http.test.ts) and the long run (bench/fuzz.ts). Each check returns the
 * violations it found instead of throwing, so the long run can count them and go on.
 */
import { ERROR_CATALOGUE, describeCode, type ErrorCode } from '../../src/errors/app-error.js';

/** One fuzzed request, as sent through `inject` or written to a socket. */
export interface FuzzRequest {
  method: string;
  /** Request target: path and query. */
  url: string;
  headers: Record<string, string>;
  payload?: string | Buffer;
  /** What generated it (family and mutation), for reports. */
  label: string;
}

/** A response as either transport saw it; header names in lower case. */
export interface FuzzResponse {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
const REQUEST_ID = 'x-service-app-request-id';
const SPEC_KEYS = new Set(['status', 'code', 'message', 'requestId']);

/** Success statuses the routes answer (200 JSON/audio, 206 ranges, 302 to finished audio, 304 conditional). */
const SUCCESS_STATUSES = new Set([200, 204, 206, 302, 304]);

/**
 * 5xx codes that input alone may produce: 503 when a bound is reached (always with Retry-After).
 * TTS_GENERATE_FAILED, TTS_SPLITTER_METADATA_INVALID and SYSTEM_INTERNAL_ERROR (500) are never the
 * answer to a request's content: nothing invalid is stored, and engines do not fail on valid input.
 */
const INPUT_5XX = new Set<ErrorCode>([
  'STORAGE_UNAVAILABLE',
  'NO_WORKER_AVAILABLE',
  'STREAM_CAPACITY_EXHAUSTED',
]);

/** True for a code of the one error catalogue. */
export function isCatalogueCode(code: unknown): code is ErrorCode {
  return typeof code === 'string' && Object.hasOwn(ERROR_CATALOGUE, code);
}

function header(res: FuzzResponse, name: string): string | undefined {
  const value = res.headers[name];
  return Array.isArray(value) ? value.join(', ') : value;
}

/** The error code of a response whose body is a spec error body, else undefined. */
export function errorCodeOf(res: FuzzResponse): string | undefined {
  if (res.status < 400 || res.body.length === 0) return undefined;
  try {
    const body = JSON.parse(res.body.toString('utf8')) as { code?: unknown };
    return typeof body.code === 'string' ? body.code : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Checks one response against the suite's invariants: documented status (no 5xx from input but the 503s
 * with Retry-After), the request-id header on every response, error bodies `{status, code, message,
 * requestId}` with exactly the spec keys, `status` = HTTP status, a catalogue code with the catalogue's
 * status, `requestId` on reportable codes only and equal to the header, and JSON success bodies that parse.
 */
export function checkResponse(request: FuzzRequest, res: FuzzResponse): string[] {
  const problems: string[] = [];
  const requestId = header(res, REQUEST_ID);
  if (requestId === undefined || !UUID.test(requestId))
    problems.push(`no request-id header (${String(requestId)})`);
  const isCatalogueStatus = Object.values(ERROR_CATALOGUE).some((info) => info.status === res.status);
  if (!SUCCESS_STATUSES.has(res.status) && !isCatalogueStatus)
    problems.push(`undocumented status ${res.status}`);
  if (res.status === 429 || res.status === 503) {
    if (header(res, 'retry-after') === undefined) problems.push(`${res.status} without Retry-After`);
  }
  const contentType = header(res, 'content-type') ?? '';
  const bodyless = request.method.toUpperCase() === 'HEAD' || res.status === 304 || res.status === 204;
  if (res.status >= 400) {
    if (bodyless) {
      if (res.status >= 500) problems.push(`5xx ${res.status} on HEAD`);
      return problems;
    }
    problems.push(...checkErrorBody(res, requestId, contentType));
    return problems;
  }
  if (!bodyless && /^application\/json/i.test(contentType)) {
    try {
      const body = JSON.parse(res.body.toString('utf8')) as { status?: unknown };
      if (
        typeof body === 'object' &&
        body !== null &&
        body.status !== undefined &&
        body.status !== res.status
      )
        problems.push(`success body status ${JSON.stringify(body.status)} on HTTP ${res.status}`);
    } catch {
      problems.push(`success body is not JSON: ${res.body.subarray(0, 80).toString('utf8')}`);
    }
  }
  return problems;
}

function checkErrorBody(res: FuzzResponse, requestId: string | undefined, contentType: string): string[] {
  const problems: string[] = [];
  if (!/^application\/json/i.test(contentType)) problems.push(`error content-type ${contentType}`);
  let body: Record<string, unknown>;
  try {
    body = JSON.parse(res.body.toString('utf8')) as Record<string, unknown>;
  } catch {
    return [...problems, `error body is not JSON: ${res.body.subarray(0, 80).toString('utf8')}`];
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    return [...problems, 'error body not an object'];
  const extra = Object.keys(body).filter((k) => !SPEC_KEYS.has(k));
  if (extra.length > 0) problems.push(`error body has non-spec keys ${extra.join(',')}`);
  if (body.status !== res.status) problems.push(`body status ${String(body.status)} on HTTP ${res.status}`);
  if (typeof body.message !== 'string') problems.push('error body without a message');
  if (!isCatalogueCode(body.code)) return [...problems, `code ${String(body.code)} not in the catalogue`];
  const info = describeCode(body.code);
  if (info.status !== res.status)
    problems.push(`${body.code} is ${info.status} in the catalogue, sent ${res.status}`);
  if (res.status >= 500 && !INPUT_5XX.has(body.code))
    problems.push(`5xx from input: ${body.code} ${String(body.message)}`);
  if (info.reportable) {
    if (body.requestId !== requestId)
      problems.push(`requestId ${String(body.requestId)} ≠ header ${String(requestId)}`);
  } else if ('requestId' in body) {
    problems.push(`requestId on non-reportable ${body.code}`);
  }
  return problems;
}

/** Counts of what a fuzz run saw, for the CI summary and the long run's report. */
export class FuzzTally {
  cases = 0;
  /** Responses with a 5xx status. */
  serverErrors = 0;
  /** Raw-socket cases the server closed without answering (truncated or unparsable framing). */
  unanswered = 0;
  readonly statuses = new Map<number, number>();
  readonly codes = new Map<string, number>();
  readonly violations: { request: FuzzRequest; response: FuzzResponse | undefined; problems: string[] }[] =
    [];

  /** Records one case and its problems (none when it held every invariant). */
  record(request: FuzzRequest, res: FuzzResponse | undefined, problems: string[]): void {
    this.cases++;
    if (res === undefined) this.unanswered++;
    else {
      this.statuses.set(res.status, (this.statuses.get(res.status) ?? 0) + 1);
      if (res.status >= 500) this.serverErrors++;
      const code = errorCodeOf(res) ?? (res.status < 400 ? `(${res.status})` : '(no code)');
      this.codes.set(code, (this.codes.get(code) ?? 0) + 1);
    }
    if (problems.length > 0) this.violations.push({ request, response: res, problems });
  }

  /** A short description of a violation: the request, the status and the first bytes of the body. */
  static describe(v: FuzzTally['violations'][number]): string {
    const { request, response } = v;
    const payload =
      request.payload === undefined
        ? ''
        : ` body=${JSON.stringify(request.payload.toString().slice(0, 200))}`;
    const answer =
      response === undefined
        ? 'no answer'
        : `${response.status} ${response.body.subarray(0, 200).toString('utf8')}`;
    return `[${request.label}] ${request.method} ${JSON.stringify(request.url.slice(0, 200))} headers=${JSON.stringify(request.headers).slice(0, 300)}${payload} → ${answer}: ${v.problems.join('; ')}`;
  }

  /** Histogram lines `code count`, most frequent first. */
  histogram(): string[] {
    return [...this.codes.entries()].sort((a, b) => b[1] - a[1]).map(([code, n]) => `${code} ${n}`);
  }
}
