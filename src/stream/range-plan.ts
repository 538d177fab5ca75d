/**
 * Decides how to answer a GET/HEAD for a stream session that may still be growing or for finished
 * audio (RFC 9110 §13 conditional requests, §14 Range/Content-Range). Pure: the
 * caller supplies the request's header fields and the resource's state and gets back a description
 * of the response, decided in the order of RFC 9110 §13.2.2 (as `@fastify/send` does): If-Match /
 * If-Unmodified-Since → 412, If-None-Match / If-Modified-Since → 304, If-Range, then 416 or 206.
 * `resolveRangePlan` re-plans while a closed range waits for its last byte.
 */
import rangeParser from 'range-parser';
import { AppError } from '../errors/app-error.js';

/**
 * The precondition header fields of a request (RFC 9110 §13.1), as received; a repeated list field
 * is joined with ", " (what Node does). Absent = undefined.
 */
export interface ConditionalHeaders {
  ifMatchHeader?: string | undefined;
  ifNoneMatchHeader?: string | undefined;
  ifModifiedSinceHeader?: string | undefined;
  ifUnmodifiedSinceHeader?: string | undefined;
}

/** What the planner needs to know about the request and the session right now. */
export interface RangePlanInput extends ConditionalHeaders {
  method: 'GET' | 'HEAD';
  rangeHeader?: string | undefined;
  ifRangeHeader?: string | undefined;
  /** Strong, quoted entity tag of the current session build, e.g. `"abc"`. */
  etag: string;
  /** Last-Modified of the representation when the response sends one (finished blobs); live sessions have none. */
  lastModified?: Date | undefined;
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
/** 304 Not Modified (If-None-Match or If-Modified-Since matched): no body; `finished` picks Cache-Control. */
export interface NotModifiedPlan {
  kind: 'not-modified';
  status: 304;
  etag: string;
  finished: boolean;
}
/** 412 Precondition Failed (If-Match or If-Unmodified-Since did not hold): a JSON error. */
export interface PreconditionFailedPlan {
  kind: 'precondition-failed';
  status: 412;
  etag: string;
}
/** Not an answer yet: wait until `needUntil` bytes exist or the session ends, then plan again. */
export interface WaitPlan {
  kind: 'wait';
  etag: string;
  needUntil: number;
}

/** A plan that can be written as a response (everything but `wait`). */
export type ResponsePlan =
  LivePlan | FullPlan | PartialPlan | UnsatisfiablePlan | NotModifiedPlan | PreconditionFailedPlan;
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
 * a unit other than `bytes` (RFC 9110 §14.2: "MUST ignore"), or an invalid ranges-specifier (RFC 9110 §14.2: "MAY
 * ignore"; range-parser would instead drop `5-3` silently and answer 416).
 */
function parseRangeSpecs(header: string): RangeSpec[] | null {
  const value = header.trim();
  const eq = value.indexOf('=');
  if (eq <= 0) return null;
  const unit = value.slice(0, eq);
  // RFC 9110 §14.1: range units are compared case-insensitively.
  if (!TOKEN.test(unit) || unit.toLowerCase() !== 'bytes') return null;
  const specs: RangeSpec[] = [];
  // RFC 9110 §5.6.1: a list may carry OWS and empty elements, which recipients ignore.
  for (const raw of value.slice(eq + 1).split(',')) {
    const item = raw.replace(/^[ \t]+|[ \t]+$/g, '');
    if (item === '') continue;
    const int = INT_RANGE.exec(item);
    if (int !== null) {
      const first = toPos(int[1] ?? '');
      const last = int[2] === '' || int[2] === undefined ? null : toPos(int[2]);
      // RFC 9110 §14.1.1: a range-spec whose last-pos is less than its first-pos is invalid.
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

/** Serialises specs for range-parser; suffixes longer than the representation mean all of it (RFC 9110 §14.1.2). */
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

/** A parsed If-Match / If-None-Match value (RFC 9110 §13.1.1–13.1.2). */
type EtagCondition =
  { kind: 'any' } | { kind: 'tags'; tags: { weak: boolean; opaque: string }[] } | { kind: 'unparsable' };

const OWS = /[ \t]/;

/**
 * Parses `"*" / #entity-tag` strictly. An opaque-tag may contain commas (etagc includes %x2C), so
 * the list is tokenised, not split. Empty list elements are skipped (RFC 9110 §5.6.1); anything else that is
 * not an entity-tag (an unquoted tag, `*` inside a list, a lowercase `w/`) makes the whole value
 * unparsable, and the caller decides what that means for its field.
 */
function parseEtagCondition(header: string): EtagCondition {
  const value = header.replace(/^[ \t]+|[ \t]+$/g, '');
  if (value === '*') return { kind: 'any' };
  const tags: { weak: boolean; opaque: string }[] = [];
  let i = 0;
  while (i < value.length) {
    const c = value.charAt(i);
    if (c === ',' || OWS.test(c)) {
      i++;
      continue;
    }
    // RFC 9110 §8.8.3: weak = %s"W/" (case-sensitive).
    const weak = value.startsWith('W/', i);
    if (weak) i += 2;
    if (value.charAt(i) !== '"') return { kind: 'unparsable' };
    const close = value.indexOf('"', i + 1);
    if (close < 0) return { kind: 'unparsable' };
    const opaque = value.slice(i, close + 1);
    if (!STRONG_ETAG.test(opaque)) return { kind: 'unparsable' };
    tags.push({ weak, opaque });
    i = close + 1;
    while (i < value.length && OWS.test(value.charAt(i))) i++;
    if (i < value.length && value.charAt(i) !== ',') return { kind: 'unparsable' };
  }
  return tags.length === 0 ? { kind: 'unparsable' } : { kind: 'tags', tags };
}

const DAY = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const LONG_DAY = '(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday)';
const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
const MONTH = `(${MONTHS.join('|')})`;
const TIME = '(\\d{2}):(\\d{2}):(\\d{2})';
// RFC 9110 §5.6.7: IMF-fixdate, and the obsolete rfc850-date and asctime-date a recipient must accept.
const IMF_FIXDATE = new RegExp(`^${DAY}, (\\d{2}) ${MONTH} (\\d{4}) ${TIME} GMT$`);
const RFC850_DATE = new RegExp(`^${LONG_DAY}, (\\d{2})-${MONTH}-(\\d{2}) ${TIME} GMT$`);
const ASCTIME_DATE = new RegExp(`^${DAY} ${MONTH} ([ \\d]\\d) ${TIME} (\\d{4})$`);

/** Milliseconds since the epoch of an HTTP-date (RFC 9110 §5.6.7), or null when it is not one. */
export function parseHttpDate(value: string, now: Date = new Date()): number | null {
  const text = value.replace(/^[ \t]+|[ \t]+$/g, '');
  // Fields in the order year, month name, day, hour, minute, second.
  let fields: (string | undefined)[];
  let m: RegExpExecArray | null;
  if ((m = IMF_FIXDATE.exec(text)) !== null) fields = [m[3], m[2], m[1], m[4], m[5], m[6]];
  else if ((m = ASCTIME_DATE.exec(text)) !== null) fields = [m[6], m[1], m[2], m[3], m[4], m[5]];
  else if ((m = RFC850_DATE.exec(text)) !== null) {
    // RFC 9110 §5.6.7: a two-digit year that would be more than 50 years in the future is the most recent
    // past year with those digits.
    const thisYear = now.getUTCFullYear();
    let year = Math.floor(thisYear / 100) * 100 + Number(m[3]);
    if (year > thisYear + 50) year -= 100;
    fields = [String(year), m[2], m[1], m[4], m[5], m[6]];
  } else return null;
  const [year, day, hour, minute, second] = [0, 2, 3, 4, 5].map((i) => Number((fields[i] ?? '').trim())) as [
    number,
    number,
    number,
    number,
    number,
  ];
  const month = MONTHS.indexOf(fields[1] ?? '');
  const ms = Date.UTC(year, month, day, hour, minute, second);
  const parsed = new Date(ms);
  // Impossible dates (31 Feb, 24:00:00, second 60) would roll over, and Date.UTC maps years 0–99
  // to 1900–1999: none of those is the date the client wrote.
  const exact =
    parsed.getUTCFullYear() === year &&
    parsed.getUTCMonth() === month &&
    parsed.getUTCDate() === day &&
    parsed.getUTCHours() === hour &&
    parsed.getUTCMinutes() === minute &&
    parsed.getUTCSeconds() === second;
  return exact ? ms : null;
}

/** The representation a precondition is evaluated against. */
export interface PreconditionTarget {
  /**
   * Its strong entity tag, or null when a representation exists but its tag is not fixed yet (a
   * stream session not built: the build a GET would start gets a new tag that no client holds).
   */
  etag: string | null;
  /** Last-Modified when the response would send one; undefined = none (date conditions are ignored). */
  lastModified?: Date | undefined;
}

/** What the preconditions decide: go on (If-Range, Range), 412, or 304. */
export type PreconditionOutcome = 'pass' | 'precondition-failed' | 'not-modified';

/** Whole seconds: HTTP-dates have one-second resolution (RFC 9110 §5.6.7), Last-Modified is sent truncated. */
function seconds(ms: number): number {
  return Math.floor(ms / 1000);
}

/**
 * Evaluates the preconditions of a GET/HEAD in the order of RFC 9110 §13.2.2 (the caller only does
 * so when the answer without them would be 2xx: 401/403/404/302 come first, RFC 9110 §13.2.1):
 * 1. If-Match: `*` holds for any representation; otherwise a **strong** match is needed (a weak
 *    tag never matches, RFC 9110 §13.1.1); false → 412. An unparsable value holds for nothing → 412.
 * 2. Without If-Match, If-Unmodified-Since: modified after the date → 412 (ignored when the value is
 *    not an HTTP-date or the representation has no Last-Modified).
 * 3. If-None-Match: **weak** comparison, `*` matches any representation; a match → 304 for GET/HEAD.
 *    An unparsable value matches nothing (the full answer is always safe).
 * 4. Without If-None-Match, If-Modified-Since: not modified since the date → 304 (same ignore rules).
 */
export function evaluatePreconditions(
  headers: ConditionalHeaders,
  target: PreconditionTarget,
): PreconditionOutcome {
  const { ifMatchHeader, ifNoneMatchHeader, ifModifiedSinceHeader, ifUnmodifiedSinceHeader } = headers;
  const lastModified = target.lastModified === undefined ? null : seconds(target.lastModified.getTime());
  if (ifMatchHeader !== undefined) {
    const condition = parseEtagCondition(ifMatchHeader);
    const holds =
      condition.kind === 'any' ||
      (condition.kind === 'tags' &&
        target.etag !== null &&
        condition.tags.some((t) => !t.weak && t.opaque === target.etag));
    if (!holds) return 'precondition-failed';
  } else if (ifUnmodifiedSinceHeader !== undefined && lastModified !== null) {
    const date = parseHttpDate(ifUnmodifiedSinceHeader);
    if (date !== null && lastModified > seconds(date)) return 'precondition-failed';
  }
  if (ifNoneMatchHeader !== undefined) {
    const condition = parseEtagCondition(ifNoneMatchHeader);
    const matches =
      condition.kind === 'any' ||
      (condition.kind === 'tags' &&
        target.etag !== null &&
        condition.tags.some((t) => t.opaque === target.etag));
    if (matches) return 'not-modified';
  } else if (ifModifiedSinceHeader !== undefined && lastModified !== null) {
    const date = parseHttpDate(ifModifiedSinceHeader);
    if (date !== null && lastModified <= seconds(date)) return 'not-modified';
  }
  return 'pass';
}

/**
 * Plans the response for one GET/HEAD of a possibly-growing session (RFC 9110 §13, §14).
 * Preconditions first (`evaluatePreconditions`: 412, 304), then If-Range and Range. Unfinished: 200 live unless a single closed range `a-b` is asked, which waits for byte b (`wait`)
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

  // RFC 9110 §13.2.2 steps 1–4 before If-Range and Range (step 5): a 412 or 304 never waits.
  switch (evaluatePreconditions(input, { etag, lastModified: input.lastModified })) {
    case 'precondition-failed':
      return { kind: 'precondition-failed', status: 412, etag };
    case 'not-modified':
      return { kind: 'not-modified', status: 304, etag, finished: finalSize !== null };
    case 'pass':
      break;
  }

  const whole: ResponsePlan =
    finalSize === null
      ? { kind: 'live', status: 200, etag }
      : { kind: 'full', status: 200, etag, size: finalSize };

  // HEAD is planned exactly as a GET (RFC 9110 §9.3.2: "the same header fields … as it would have
  // sent if the request method had been GET"; RFC 9110 §14.2 defines range handling for GET, whose answer
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
  // -1: no satisfiable range (RFC 9110 §14.1.1; every range of an empty representation is unsatisfiable).
  if (parsed === -1) return { kind: 'unsatisfiable', status: 416, etag, size: finalSize };
  if (parsed === -2) return whole; // cannot happen for the normalised header; ignoring is the safe answer
  // Never multipart — answer the first satisfiable (combined) range alone.
  const first = parsed[0];
  if (first === undefined) return { kind: 'unsatisfiable', status: 416, etag, size: finalSize };
  return { kind: 'partial', status: 206, etag, start: first.start, end: first.end, total: finalSize };
}

/** The session state `resolveRangePlan` waits on; a GrowingFile satisfies it. */
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

/** The `Content-Range` value of a plan (RFC 9110 §14.4), or undefined for 200, 304 and 412 answers. */
export function contentRangeHeader(plan: ResponsePlan): string | undefined {
  switch (plan.kind) {
    case 'partial':
      return `bytes ${String(plan.start)}-${String(plan.end)}/${String(plan.total)}`;
    case 'unsatisfiable':
      // RFC 9110 §14.4: unsatisfied-range = "*/" complete-length
      return `bytes */${String(plan.size)}`;
    case 'live':
    case 'full':
    case 'not-modified':
    case 'precondition-failed':
      return undefined;
  }
}

/** Content-Length of a plan's body; undefined for the live stream (chunked), 304 (no body), 412 and 416 (error bodies). */
export function contentLength(plan: ResponsePlan): number | undefined {
  switch (plan.kind) {
    case 'full':
      return plan.size;
    case 'partial':
      return plan.end - plan.start + 1;
    case 'live':
    case 'unsatisfiable':
    case 'not-modified':
    case 'precondition-failed':
      return undefined;
  }
}

/**
 * Range-related response headers of a plan: Accept-Ranges, ETag, Content-Length, Content-Range. A
 * 304 carries the ETag alone (RFC 9110 §15.4.5: the validators, not the representation's
 * metadata; the caller adds Cache-Control); a 412 is an error body and carries none.
 */
export function planHeaders(plan: ResponsePlan): Record<string, string> {
  if (plan.kind === 'not-modified') return { ETag: plan.etag };
  if (plan.kind === 'precondition-failed') return {};
  const headers: Record<string, string> = { 'Accept-Ranges': 'bytes', ETag: plan.etag };
  const length = contentLength(plan);
  if (length !== undefined) headers['Content-Length'] = String(length);
  const range = contentRangeHeader(plan);
  if (range !== undefined) headers['Content-Range'] = range;
  return headers;
}

/** The cache window a plan's body reads: `[start, endExclusive)`, null end = follow the live session; null for 304, 412, 416. */
export function bodyWindow(plan: ResponsePlan): { start: number; endExclusive: number | null } | null {
  switch (plan.kind) {
    case 'live':
      return { start: 0, endExclusive: null };
    case 'full':
      return { start: 0, endExclusive: plan.size };
    case 'partial':
      return { start: plan.start, endExclusive: plan.end + 1 };
    case 'unsatisfiable':
    case 'not-modified':
    case 'precondition-failed':
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

/** The 412 error of a failed If-Match / If-Unmodified-Since (RFC 9110 §13.1.1, §13.1.4), rendered as the spec's error body. */
export function preconditionFailed(): AppError {
  return new AppError(
    'PRECONDITION_FAILED',
    'precondition failed: the audio does not match If-Match or was modified after If-Unmodified-Since',
  );
}
