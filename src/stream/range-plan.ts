/**
 * Decides how to answer a GET/HEAD for a stream session that may still be growing (decisions §5,
 * RFC 9110 §13.1.5 If-Range, §14 Range/Content-Range). Pure: the caller supplies the session state
 * and gets back a description of the response; `resolveRangePlan` re-plans while a closed range
 * waits for its last byte.
 */
import rangeParser from 'range-parser';
import { AppError } from '../errors/app-error.js';

/** What the planner needs to know about the request and the session right now. */
export interface RangePlanInput {
  method: 'GET' | 'HEAD';
  rangeHeader?: string | undefined;
  ifRangeHeader?: string | undefined;
  /** Strong, quoted entity tag of the current session build, e.g. `"abc"`. */
  etag: string;
  /** Bytes available to readers now. */
  produced: number;
  /** Total size once the session finished; null while it is still growing. */
  finalSize: number | null;
}

/** 200 chunked from byte 0, following the session until it ends (unfinished session). */
export interface LivePlan {
  kind: 'live';
  status: 200;
  etag: string;
}
/** 200 with Content-Length: the whole finished session. */
export interface FullPlan {
  kind: 'full';
  status: 200;
  etag: string;
  size: number;
}
/** 206 for bytes `start..end` (inclusive); `total` is `'*'` while the session is unfinished. */
export interface PartialPlan {
  kind: 'partial';
  status: 206;
  etag: string;
  start: number;
  end: number;
  total: number | '*';
}
/** 416 with `Content-Range: bytes *\/size` (finished session, range starts at or beyond its end). */
export interface UnsatisfiablePlan {
  kind: 'unsatisfiable';
  status: 416;
  etag: string;
  size: number;
}
/** Not an answer yet: wait until `needUntil` bytes exist or the session ends, then plan again. */
export interface WaitPlan {
  kind: 'wait';
  etag: string;
  needUntil: number;
}

/** A plan that can be written as a response (everything but `wait`). */
export type ResponsePlan = LivePlan | FullPlan | PartialPlan | UnsatisfiablePlan;
/** Result of `planRange`: a response, or a request to wait and re-plan. */
export type RangePlan = ResponsePlan | WaitPlan;

/** One syntactically valid byte-range-spec (RFC 9110 §14.1.2). */
type RangeSpec = { kind: 'int'; first: number; last: number | null } | { kind: 'suffix'; length: number };

// RFC 9110 §8.8.3: entity-tag = [ weak ] opaque-tag; etagc = %x21 / %x23-7E / obs-text.
const STRONG_ETAG = /^"[\x21\x23-\x7e\x80-\xff]*"$/;
// RFC 9110 §5.6.2 token, used for range-unit.
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const INT_RANGE = /^(\d+)-(\d*)$/;
const SUFFIX_RANGE = /^-(\d+)$/;

/** Digits to a position; absurd values are clamped so they stay exact integers (they mean "beyond any end"). */
function toPos(digits: string): number {
  return Math.min(Number(digits), Number.MAX_SAFE_INTEGER);
}

/**
 * Parses `Range` strictly per RFC 9110 §14.1–14.2. Returns null when the header must be ignored:
 * a unit other than `bytes` (§14.2: "MUST ignore"), or an invalid ranges-specifier (§14.2: "MAY
 * ignore"; range-parser would instead drop `5-3` silently and answer 416).
 */
function parseRangeSpecs(header: string): RangeSpec[] | null {
  const value = header.trim();
  const eq = value.indexOf('=');
  if (eq <= 0) return null;
  const unit = value.slice(0, eq);
  // §14.1: range units are compared case-insensitively.
  if (!TOKEN.test(unit) || unit.toLowerCase() !== 'bytes') return null;
  const specs: RangeSpec[] = [];
  // §5.6.1: a list may carry OWS and empty elements, which recipients ignore.
  for (const raw of value.slice(eq + 1).split(',')) {
    const item = raw.replace(/^[ \t]+|[ \t]+$/g, '');
    if (item === '') continue;
    const int = INT_RANGE.exec(item);
    if (int !== null) {
      const first = toPos(int[1] ?? '');
      const last = int[2] === '' || int[2] === undefined ? null : toPos(int[2]);
      // §14.1.1: a range-spec whose last-pos is less than its first-pos is invalid.
      if (last !== null && last < first) return null;
      specs.push({ kind: 'int', first, last });
      continue;
    }
    const suffix = SUFFIX_RANGE.exec(item);
    if (suffix !== null) {
      specs.push({ kind: 'suffix', length: toPos(suffix[1] ?? '') });
      continue;
    }
    return null;
  }
  return specs.length === 0 ? null : specs;
}

/** Serialises specs for range-parser; suffixes longer than the representation mean all of it (§14.1.2). */
function toRangeParserHeader(specs: readonly RangeSpec[], size: number): string {
  const parts = specs.map((s) =>
    s.kind === 'suffix'
      ? `-${String(Math.min(s.length, size))}`
      : `${String(s.first)}-${s.last === null ? '' : String(s.last)}`,
  );
  return `bytes=${parts.join(',')}`;
}

/**
 * RFC 9110 §13.1.5: Range is honoured only if If-Range is absent or is an entity tag that strongly
 * matches the current one. A weak tag never matches; an HTTP-date cannot match because we send no
 * Last-Modified (a date is only usable against a strong Last-Modified).
 */
function ifRangeAllowsRange(ifRange: string | undefined, etag: string): boolean {
  if (ifRange === undefined) return true;
  return ifRange.trim() === etag;
}

/**
 * Plans the response for one GET/HEAD of a possibly-growing session (decisions §5, RFC 9110 §14).
 * Unfinished: 200 live unless a single closed range `a-b` is asked, which waits for byte b (`wait`)
 * and then becomes a 206 `bytes a-b/*`. Finished: 200 with length, 206 for the first satisfiable
 * range (never multipart), or 416. HEAD gets the GET answer's status and headers, but a closed
 * range not yet produced gets the live 200 instead of a wait.
 */
export function planRange(input: RangePlanInput): RangePlan {
  const { etag, produced, finalSize } = input;
  if (!STRONG_ETAG.test(etag))
    throw new TypeError(`planRange: etag must be a strong quoted entity tag, got ${etag}`);
  if (!Number.isSafeInteger(produced) || produced < 0)
    throw new TypeError('planRange: produced must be a byte count');
  if (finalSize !== null && (!Number.isSafeInteger(finalSize) || finalSize < 0)) {
    throw new TypeError('planRange: finalSize must be a byte count or null');
  }

  const whole: ResponsePlan =
    finalSize === null
      ? { kind: 'live', status: 200, etag }
      : { kind: 'full', status: 200, etag, size: finalSize };

  // HEAD is planned exactly as a GET (RFC 9110 §9.3.2: "the same header fields … as it would have
  // sent if the request method had been GET"; §14.2 defines range handling for GET, whose answer
  // HEAD mirrors), except that it never waits: see the `wait` case below.
  if (input.rangeHeader === undefined) return whole;
  const specs = parseRangeSpecs(input.rangeHeader);
  if (specs === null) return whole;
  if (!ifRangeAllowsRange(input.ifRangeHeader, etag)) return whole;

  if (finalSize === null) {
    // An unbounded range of a live session cannot be stated honestly in a 206 (a `bytes 0-e/*`
    // answer makes Chromium treat the first bytes as the whole file): only one closed range is
    // answered with 206; open, suffix and multiple ranges get the live 200.
    const [only] = specs;
    if (specs.length !== 1 || only === undefined || only.kind !== 'int' || only.last === null) return whole;
    const needUntil = only.last + 1;
    // A HEAD does not follow the stream: it answers at once with what a GET that did not wait
    // would get, the live 200 headers.
    if (produced < needUntil) return input.method === 'HEAD' ? whole : { kind: 'wait', etag, needUntil };
    return { kind: 'partial', status: 206, etag, start: only.first, end: only.last, total: '*' };
  }

  const parsed = rangeParser(finalSize, toRangeParserHeader(specs, finalSize), { combine: true });
  // -1: no satisfiable range (§14.1.1; every range of an empty representation is unsatisfiable).
  if (parsed === -1) return { kind: 'unsatisfiable', status: 416, etag, size: finalSize };
  if (parsed === -2) return whole; // cannot happen for the normalised header; ignoring is the safe answer
  // Decisions §5: never multipart — answer the first satisfiable (combined) range alone.
  const first = parsed[0];
  if (first === undefined) return { kind: 'unsatisfiable', status: 416, etag, size: finalSize };
  return { kind: 'partial', status: 206, etag, start: first.start, end: first.end, total: finalSize };
}

/** The session state `resolveRangePlan` waits on; a SessionCache satisfies it. */
export interface GrowingResource {
  readonly produced: number;
  /** Final size once finished, else null. */
  readonly size: number | null;
  /** The failure that ended the session, if any. */
  readonly error: Error | null;
  /** Resolves once `produced >= byteCount` or the resource finished or failed. */
  waitFor(byteCount: number, signal?: AbortSignal): Promise<void>;
}

/**
 * Plans, and while the plan is `wait` waits on the resource and plans again with its new state.
 * Throws the resource's failure (nothing has been sent yet, so it can still become a JSON error)
 * or the abort reason. HEAD never waits (only GET ranges produce `wait`).
 */
export async function resolveRangePlan(
  request: Omit<RangePlanInput, 'produced' | 'finalSize'>,
  resource: GrowingResource,
  signal?: AbortSignal,
): Promise<ResponsePlan> {
  for (;;) {
    signal?.throwIfAborted();
    if (resource.error !== null) throw resource.error;
    const plan = planRange({ ...request, produced: resource.produced, finalSize: resource.size });
    if (plan.kind !== 'wait') return plan;
    await resource.waitFor(plan.needUntil, signal);
  }
}

/** The `Content-Range` value of a plan (RFC 9110 §14.4), or undefined for 200 answers. */
export function contentRangeHeader(plan: ResponsePlan): string | undefined {
  switch (plan.kind) {
    case 'partial':
      return `bytes ${String(plan.start)}-${String(plan.end)}/${String(plan.total)}`;
    case 'unsatisfiable':
      // §14.4: unsatisfied-range = "*/" complete-length
      return `bytes */${String(plan.size)}`;
    case 'live':
    case 'full':
      return undefined;
  }
}

/** Content-Length of a plan's body; undefined for the live stream (chunked) and for 416 (error body). */
export function contentLength(plan: ResponsePlan): number | undefined {
  switch (plan.kind) {
    case 'full':
      return plan.size;
    case 'partial':
      return plan.end - plan.start + 1;
    case 'live':
    case 'unsatisfiable':
      return undefined;
  }
}

/** Range-related response headers of a plan: Accept-Ranges, ETag, Content-Length, Content-Range. */
export function planHeaders(plan: ResponsePlan): Record<string, string> {
  const headers: Record<string, string> = { 'Accept-Ranges': 'bytes', ETag: plan.etag };
  const length = contentLength(plan);
  if (length !== undefined) headers['Content-Length'] = String(length);
  const range = contentRangeHeader(plan);
  if (range !== undefined) headers['Content-Range'] = range;
  return headers;
}

/** The cache window a plan's body reads: `[start, endExclusive)`, null end = follow the live session; null for 416. */
export function bodyWindow(plan: ResponsePlan): { start: number; endExclusive: number | null } | null {
  switch (plan.kind) {
    case 'live':
      return { start: 0, endExclusive: null };
    case 'full':
      return { start: 0, endExclusive: plan.size };
    case 'partial':
      return { start: plan.start, endExclusive: plan.end + 1 };
    case 'unsatisfiable':
      return null;
  }
}

/** The 416 error for an unsatisfiable plan, carrying `Content-Range: bytes *\/size` for the error handler. */
export function rangeNotSatisfiable(plan: UnsatisfiablePlan): AppError {
  return new AppError(
    'RANGE_NOT_SATISFIABLE',
    `range not satisfiable: the audio is ${String(plan.size)} bytes long`,
    {
      headers: planHeaders(plan),
    },
  );
}
