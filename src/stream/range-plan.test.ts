import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  bodyWindow,
  contentLength,
  contentRangeHeader,
  evaluatePreconditions,
  parseHttpDate,
  planHeaders,
  planRange,
  preconditionFailed,
  rangeNotSatisfiable,
  resolveRangePlan,
  type GrowingResource,
  type RangePlan,
  type RangePlanInput,
  type ResponsePlan,
} from './range-plan.js';

const ETAG = '"s1-abc"';
const DATE = 'Wed, 21 Oct 2015 07:28:00 GMT';

const live: RangePlan = { kind: 'live', status: 200, etag: ETAG };
const full = (size: number): RangePlan => ({ kind: 'full', status: 200, etag: ETAG, size });
const partial = (start: number, end: number, total: number | '*'): RangePlan => ({
  kind: 'partial',
  status: 206,
  etag: ETAG,
  start,
  end,
  total,
});
const wait = (needUntil: number): RangePlan => ({ kind: 'wait', etag: ETAG, needUntil });
const unsatisfiable = (size: number): RangePlan => ({ kind: 'unsatisfiable', status: 416, etag: ETAG, size });

type Req = Partial<Pick<RangePlanInput, 'method' | 'rangeHeader' | 'ifRangeHeader'>>;
/** Unfinished session with 1000 bytes produced. */
const U = { produced: 1000, finalSize: null };
/** Finished session of 1000 bytes. */
const F = { produced: 1000, finalSize: 1000 };
/** Finished empty session. */
const E = { produced: 0, finalSize: 0 };
/** Unfinished session with nothing produced yet. */
const U0 = { produced: 0, finalSize: null };

type Row = [
  name: string,
  state: { produced: number; finalSize: number | null },
  req: Req,
  expected: RangePlan,
];

const MALFORMED = [
  'bytes=abc',
  'bytes=5-3',
  'bytes=',
  'bytes',
  '=0-1',
  'bytes=0-1-2',
  'bytes=--1',
  'bytes=1',
  'bytes=0x10-20',
  'bytes=+1-2',
  'bytes=1.5-2',
  'bytes=0-1,x',
  'bytes =0-1',
  'bytes=0 -1',
  '',
];

const rows: Row[] = [
  // ---- unfinished: everything but one closed range is the live 200
  ['U no Range', U, {}, live],
  ['U open from 0', U, { rangeHeader: 'bytes=0-' }, live],
  ['U open from middle (reconnect)', U, { rangeHeader: 'bytes=500-' }, live],
  ['U open beyond produced', U, { rangeHeader: 'bytes=5000-' }, live],
  ['U suffix', U, { rangeHeader: 'bytes=-100' }, live],
  ['U suffix zero', U, { rangeHeader: 'bytes=-0' }, live],
  ['U closed, available', U, { rangeHeader: 'bytes=0-99' }, partial(0, 99, '*')],
  ['U closed single byte', U, { rangeHeader: 'bytes=0-0' }, partial(0, 0, '*')],
  ['U closed ending at last produced byte', U, { rangeHeader: 'bytes=100-999' }, partial(100, 999, '*')],
  ['U closed one byte past produced', U, { rangeHeader: 'bytes=100-1000' }, wait(1001)],
  ['U closed entirely beyond produced', U, { rangeHeader: 'bytes=5000-5999' }, wait(6000)],
  ['U0 closed, nothing produced', U0, { rangeHeader: 'bytes=0-0' }, wait(1)],
  ['U0 no Range', U0, {}, live],
  ['U multi ranges', U, { rangeHeader: 'bytes=0-9,20-29' }, live],
  ['U multi overlapping ranges', U, { rangeHeader: 'bytes=0-9,5-19' }, live],
  ['U closed + open', U, { rangeHeader: 'bytes=0-9,500-' }, live],
  ['U non-bytes unit', U, { rangeHeader: 'items=0-9' }, live],
  ['U unit is case-insensitive', U, { rangeHeader: 'Bytes=0-9' }, partial(0, 9, '*')],
  ['U OWS and empty list elements', U, { rangeHeader: 'bytes= 0-9 , ' }, partial(0, 9, '*')],
  ['U If-Range strong match', U, { rangeHeader: 'bytes=0-9', ifRangeHeader: ETAG }, partial(0, 9, '*')],
  [
    'U If-Range match with OWS',
    U,
    { rangeHeader: 'bytes=0-9', ifRangeHeader: ` ${ETAG} ` },
    partial(0, 9, '*'),
  ],
  [
    'U If-Range match, closed range waits',
    U,
    { rangeHeader: 'bytes=0-1999', ifRangeHeader: ETAG },
    wait(2000),
  ],
  ['U If-Range mismatch', U, { rangeHeader: 'bytes=0-9', ifRangeHeader: '"other"' }, live],
  ['U If-Range weak tag', U, { rangeHeader: 'bytes=0-9', ifRangeHeader: `W/${ETAG}` }, live],
  ['U If-Range date', U, { rangeHeader: 'bytes=0-9', ifRangeHeader: DATE }, live],
  ['U If-Range unquoted tag', U, { rangeHeader: 'bytes=0-9', ifRangeHeader: 's1-abc' }, live],
  ['U If-Range without Range', U, { ifRangeHeader: ETAG }, live],
  ['U HEAD no Range', U, { method: 'HEAD' }, live],
  [
    'U HEAD closed range available (same answer as GET)',
    U,
    { method: 'HEAD', rangeHeader: 'bytes=0-9' },
    partial(0, 9, '*'),
  ],
  ['U HEAD open range', U, { method: 'HEAD', rangeHeader: 'bytes=10-' }, live],
  ['U HEAD If-Range mismatch', U, { method: 'HEAD', rangeHeader: 'bytes=0-9', ifRangeHeader: '"x"' }, live],
  [
    'U HEAD closed range beyond produced never waits',
    U,
    { method: 'HEAD', rangeHeader: 'bytes=0-5000' },
    live,
  ],
  ...MALFORMED.map((h): Row => [`U malformed ${JSON.stringify(h)}`, U, { rangeHeader: h }, live]),

  // ---- finished: 200 with length, 206 for the first satisfiable range, 416
  ['F no Range', F, {}, full(1000)],
  ['F open from 0', F, { rangeHeader: 'bytes=0-' }, partial(0, 999, 1000)],
  ['F open from middle', F, { rangeHeader: 'bytes=500-' }, partial(500, 999, 1000)],
  ['F open at last byte', F, { rangeHeader: 'bytes=999-' }, partial(999, 999, 1000)],
  ['F open at size (start == size)', F, { rangeHeader: 'bytes=1000-' }, unsatisfiable(1000)],
  ['F open beyond size', F, { rangeHeader: 'bytes=1001-' }, unsatisfiable(1000)],
  ['F closed', F, { rangeHeader: 'bytes=0-99' }, partial(0, 99, 1000)],
  ['F closed whole', F, { rangeHeader: 'bytes=0-999' }, partial(0, 999, 1000)],
  ['F closed, end clamped', F, { rangeHeader: 'bytes=900-5000' }, partial(900, 999, 1000)],
  ['F closed starting at size', F, { rangeHeader: 'bytes=1000-2000' }, unsatisfiable(1000)],
  ['F suffix', F, { rangeHeader: 'bytes=-100' }, partial(900, 999, 1000)],
  ['F suffix == size', F, { rangeHeader: 'bytes=-1000' }, partial(0, 999, 1000)],
  [
    'F suffix longer than size is all of it (RFC 9110 §14.1.2)',
    F,
    { rangeHeader: 'bytes=-5000' },
    partial(0, 999, 1000),
  ],
  ['F suffix zero', F, { rangeHeader: 'bytes=-0' }, unsatisfiable(1000)],
  ['F multi: first range alone', F, { rangeHeader: 'bytes=0-9,20-29' }, partial(0, 9, 1000)],
  ['F multi: first in request order', F, { rangeHeader: 'bytes=20-29,0-9' }, partial(20, 29, 1000)],
  ['F multi: overlapping combined', F, { rangeHeader: 'bytes=0-9,5-19' }, partial(0, 19, 1000)],
  ['F multi: first satisfiable', F, { rangeHeader: 'bytes=2000-3000,10-19' }, partial(10, 19, 1000)],
  ['F multi: none satisfiable', F, { rangeHeader: 'bytes=2000-,3000-' }, unsatisfiable(1000)],
  ['F multi with suffix', F, { rangeHeader: 'bytes=-10,0-4' }, partial(990, 999, 1000)],
  ['F huge first-pos', F, { rangeHeader: 'bytes=99999999999999999999999-' }, unsatisfiable(1000)],
  ['F huge last-pos clamped', F, { rangeHeader: 'bytes=0-99999999999999999999999' }, partial(0, 999, 1000)],
  ['F huge suffix', F, { rangeHeader: 'bytes=-99999999999999999999999' }, partial(0, 999, 1000)],
  ['F non-bytes unit', F, { rangeHeader: 'items=0-9' }, full(1000)],
  ['F unit case-insensitive', F, { rangeHeader: 'BYTES=0-9' }, partial(0, 9, 1000)],
  ['F If-Range strong match', F, { rangeHeader: 'bytes=0-9', ifRangeHeader: ETAG }, partial(0, 9, 1000)],
  ['F If-Range mismatch', F, { rangeHeader: 'bytes=0-9', ifRangeHeader: '"s0-old"' }, full(1000)],
  ['F If-Range weak tag', F, { rangeHeader: 'bytes=0-9', ifRangeHeader: `W/${ETAG}` }, full(1000)],
  ['F If-Range date', F, { rangeHeader: 'bytes=0-9', ifRangeHeader: DATE }, full(1000)],
  ['F If-Range mismatch beats 416', F, { rangeHeader: 'bytes=5000-', ifRangeHeader: '"x"' }, full(1000)],
  ['F If-Range match, 416', F, { rangeHeader: 'bytes=5000-', ifRangeHeader: ETAG }, unsatisfiable(1000)],
  ['F If-Range without Range', F, { ifRangeHeader: '"x"' }, full(1000)],
  ['F HEAD no Range', F, { method: 'HEAD' }, full(1000)],
  ['F HEAD with Range (same as GET)', F, { method: 'HEAD', rangeHeader: 'bytes=0-9' }, partial(0, 9, 1000)],
  [
    'F HEAD with unsatisfiable Range (same as GET)',
    F,
    { method: 'HEAD', rangeHeader: 'bytes=5000-' },
    unsatisfiable(1000),
  ],
  [
    'F HEAD If-Range mismatch',
    F,
    { method: 'HEAD', rangeHeader: 'bytes=0-9', ifRangeHeader: '"x"' },
    full(1000),
  ],
  ...MALFORMED.map((h): Row => [`F malformed ${JSON.stringify(h)}`, F, { rangeHeader: h }, full(1000)]),

  // ---- finished and empty: every range is unsatisfiable
  ['E no Range', E, {}, full(0)],
  ['E open', E, { rangeHeader: 'bytes=0-' }, unsatisfiable(0)],
  ['E closed', E, { rangeHeader: 'bytes=0-0' }, unsatisfiable(0)],
  ['E suffix', E, { rangeHeader: 'bytes=-5' }, unsatisfiable(0)],
  ['E suffix zero', E, { rangeHeader: 'bytes=-0' }, unsatisfiable(0)],
  ['E HEAD with Range', E, { method: 'HEAD', rangeHeader: 'bytes=0-' }, unsatisfiable(0)],

  // ---- re-planning after a wait: the session ended before the closed range's last byte
  [
    'closed range, session ended inside it',
    { produced: 1050, finalSize: 1050 },
    { rangeHeader: 'bytes=900-1099' },
    partial(900, 1049, 1050),
  ],
  [
    'closed range, session ended before it',
    { produced: 800, finalSize: 800 },
    { rangeHeader: 'bytes=900-1099' },
    unsatisfiable(800),
  ],
];

void describe('planRange', () => {
  for (const [name, state, req, expected] of rows) {
    void test(name, () => {
      assert.deepEqual(planRange({ method: 'GET', etag: ETAG, ...state, ...req }), expected);
    });
  }

  void test('rejects a weak or unquoted ETag (programming error)', () => {
    assert.throws(() => planRange({ method: 'GET', etag: 'W/"x"', ...U }), TypeError);
    assert.throws(() => planRange({ method: 'GET', etag: 'x', ...U }), TypeError);
    assert.throws(() => planRange({ method: 'GET', etag: ETAG, produced: -1, finalSize: null }), TypeError);
    assert.throws(() => planRange({ method: 'GET', etag: ETAG, produced: 0, finalSize: 1.5 }), TypeError);
  });
});

void describe('response headers of a plan', () => {
  const cases: [
    ResponsePlan,
    Record<string, string>,
    { start: number; endExclusive: number | null } | null,
  ][] = [
    [
      { kind: 'live', status: 200, etag: ETAG },
      { 'Accept-Ranges': 'bytes', ETag: ETAG },
      { start: 0, endExclusive: null },
    ],
    [
      { kind: 'full', status: 200, etag: ETAG, size: 1000 },
      { 'Accept-Ranges': 'bytes', ETag: ETAG, 'Content-Length': '1000' },
      { start: 0, endExclusive: 1000 },
    ],
    [
      { kind: 'full', status: 200, etag: ETAG, size: 0 },
      { 'Accept-Ranges': 'bytes', ETag: ETAG, 'Content-Length': '0' },
      { start: 0, endExclusive: 0 },
    ],
    [
      { kind: 'partial', status: 206, etag: ETAG, start: 10, end: 19, total: '*' },
      { 'Accept-Ranges': 'bytes', ETag: ETAG, 'Content-Length': '10', 'Content-Range': 'bytes 10-19/*' },
      { start: 10, endExclusive: 20 },
    ],
    [
      { kind: 'partial', status: 206, etag: ETAG, start: 900, end: 999, total: 1000 },
      {
        'Accept-Ranges': 'bytes',
        ETag: ETAG,
        'Content-Length': '100',
        'Content-Range': 'bytes 900-999/1000',
      },
      { start: 900, endExclusive: 1000 },
    ],
    [
      { kind: 'unsatisfiable', status: 416, etag: ETAG, size: 1000 },
      { 'Accept-Ranges': 'bytes', ETag: ETAG, 'Content-Range': 'bytes */1000' },
      null,
    ],
  ];
  for (const [plan, headers, window] of cases) {
    void test(`${plan.kind} ${JSON.stringify(plan)}`, () => {
      assert.deepEqual(planHeaders(plan), headers);
      assert.equal(contentRangeHeader(plan), headers['Content-Range']);
      assert.equal(
        contentLength(plan),
        headers['Content-Length'] === undefined ? undefined : Number(headers['Content-Length']),
      );
      assert.deepEqual(bodyWindow(plan), window);
    });
  }

  void test('rangeNotSatisfiable is a 416 AppError carrying Content-Range', () => {
    const err = rangeNotSatisfiable({ kind: 'unsatisfiable', status: 416, etag: ETAG, size: 42 });
    assert.equal(err.code, 'RANGE_NOT_SATISFIABLE');
    assert.equal(err.status, 416);
    assert.equal(err.headers['Content-Range'], 'bytes */42');
  });
});

/** An in-memory GrowingResource whose waitFor is woken by `grow`/`end`/`crash` (no timers). */
class FakeResource implements GrowingResource {
  produced = 0;
  size: number | null = null;
  error: Error | null = null;
  waits = 0;
  private wakers: (() => void)[] = [];
  waitFor(byteCount: number, signal?: AbortSignal): Promise<void> {
    this.waits++;
    return new Promise((resolve, reject) => {
      const check = (): void => {
        if (this.produced >= byteCount || this.size !== null || this.error !== null) resolve();
        else this.wakers.push(check);
      };
      signal?.addEventListener('abort', () => reject(new Error('aborted')), { once: true });
      check();
    });
  }
  private wake(): void {
    const w = this.wakers;
    this.wakers = [];
    for (const f of w) f();
  }
  grow(n: number): void {
    this.produced += n;
    this.wake();
  }
  end(): void {
    this.size = this.produced;
    this.wake();
  }
  crash(err: Error): void {
    this.error = err;
    this.wake();
  }
}

void describe('resolveRangePlan', () => {
  const req = { method: 'GET' as const, etag: ETAG };

  void test('waits for the last byte of a closed range, then answers 206 bytes a-b/*', async () => {
    const r = new FakeResource();
    const p = resolveRangePlan({ ...req, rangeHeader: 'bytes=100-199' }, r);
    r.grow(150);
    r.grow(50);
    assert.deepEqual(await p, partial(100, 199, '*'));
    assert.ok(r.waits >= 1);
  });

  void test('session ending inside the range clamps to the final size', async () => {
    const r = new FakeResource();
    const p = resolveRangePlan({ ...req, rangeHeader: 'bytes=100-199' }, r);
    r.grow(120);
    r.end();
    assert.deepEqual(await p, partial(100, 119, 120));
  });

  void test('session ending before the range gives 416', async () => {
    const r = new FakeResource();
    const p = resolveRangePlan({ ...req, rangeHeader: 'bytes=100-199' }, r);
    r.grow(50);
    r.end();
    assert.deepEqual(await p, unsatisfiable(50));
  });

  void test('a failure while waiting is thrown (nothing sent yet)', async () => {
    const r = new FakeResource();
    const p = resolveRangePlan({ ...req, rangeHeader: 'bytes=100-199' }, r);
    r.crash(new Error('engine crashed'));
    await assert.rejects(p, /engine crashed/);
  });

  void test('abort while waiting rejects', async () => {
    const r = new FakeResource();
    const ac = new AbortController();
    const p = resolveRangePlan({ ...req, rangeHeader: 'bytes=100-199' }, r, ac.signal);
    ac.abort();
    await assert.rejects(p);
  });

  void test('live and HEAD answers never wait', async () => {
    const r = new FakeResource();
    assert.deepEqual(await resolveRangePlan({ ...req, rangeHeader: 'bytes=0-' }, r), live);
    assert.deepEqual(await resolveRangePlan({ ...req, method: 'HEAD', rangeHeader: 'bytes=0-99' }, r), live);
    assert.deepEqual(
      await resolveRangePlan({ ...req, method: 'HEAD', rangeHeader: 'bytes=5000-5999' }, r),
      live,
    );
    assert.equal(r.waits, 0);
  });
});

// ---- Conditional requests (RFC 9110 §13.2.2): 412 → 304 → If-Range → 416 → 206.

const notModified = (finished: boolean): RangePlan => ({
  kind: 'not-modified',
  status: 304,
  etag: ETAG,
  finished,
});
const failed: RangePlan = { kind: 'precondition-failed', status: 412, etag: ETAG };

/** If-Match values and whether each holds for ETAG (strong comparison; `*` holds; unparsable fails). */
const IF_MATCH: [label: string, value: string | undefined, holds: boolean][] = [
  ['absent', undefined, true],
  ['match', ETAG, true],
  ['match in a list', `"a", ${ETAG}`, true],
  ['star', '*', true],
  ['mismatch', '"other"', false],
  ['weak same tag (never matches If-Match)', `W/${ETAG}`, false],
  ['unparsable', 's1-abc', false],
];
/** If-None-Match values and whether each matches ETAG (weak comparison; `*` matches; unparsable does not). */
const IF_NONE_MATCH: [label: string, value: string | undefined, matches: boolean][] = [
  ['absent', undefined, false],
  ['match', ETAG, true],
  ['weak same tag (weak comparison)', `W/${ETAG}`, true],
  ['match in a list', `W/"a", ${ETAG}`, true],
  ['star', '*', true],
  ['mismatch', '"other"', false],
  ['unparsable', `${ETAG}, *`, false],
];
/** Range situations and the plan each gives once the preconditions pass, per session state. */
const RANGES: [label: string, req: Req, unfinished: RangePlan, finished: RangePlan][] = [
  ['no Range', {}, live, full(1000)],
  ['satisfiable closed Range', { rangeHeader: 'bytes=0-9' }, partial(0, 9, '*'), partial(0, 9, 1000)],
  ['closed Range beyond produced', { rangeHeader: 'bytes=5000-5999' }, wait(6000), unsatisfiable(1000)],
  ['open Range beyond the end', { rangeHeader: 'bytes=5000-' }, live, unsatisfiable(1000)],
  ['If-Range mismatch + Range', { rangeHeader: 'bytes=0-9', ifRangeHeader: '"other"' }, live, full(1000)],
  [
    'If-Range match + Range',
    { rangeHeader: 'bytes=0-9', ifRangeHeader: ETAG },
    partial(0, 9, '*'),
    partial(0, 9, 1000),
  ],
];

void describe('planRange: preconditions before If-Range and Range (every combination)', () => {
  for (const [stateName, state] of [
    ['unfinished', U],
    ['finished', F],
  ] as const) {
    for (const method of ['GET', 'HEAD'] as const) {
      void test(`${stateName} ${method}`, () => {
        for (const [imLabel, ifMatchHeader, holds] of IF_MATCH) {
          for (const [inmLabel, ifNoneMatchHeader, matches] of IF_NONE_MATCH) {
            for (const [rangeLabel, req, unfinished, finished] of RANGES) {
              let expected: RangePlan = state.finalSize === null ? unfinished : finished;
              // HEAD never waits: a closed range not yet produced gets the live 200 headers.
              if (method === 'HEAD' && expected.kind === 'wait') expected = live;
              if (matches) expected = notModified(state.finalSize !== null);
              if (!holds) expected = failed;
              const plan = planRange({
                method,
                etag: ETAG,
                ...state,
                ...req,
                ifMatchHeader,
                ifNoneMatchHeader,
              });
              assert.deepEqual(
                plan,
                expected,
                `If-Match ${imLabel}, If-None-Match ${inmLabel}, ${rangeLabel}`,
              );
            }
          }
        }
      });
    }
  }
});

const MODIFIED = new Date(Date.UTC(2024, 4, 10, 12, 0, 0, 700)); // sent as "Fri, 10 May 2024 12:00:00 GMT"
const AT = 'Fri, 10 May 2024 12:00:00 GMT';
const BEFORE = 'Fri, 10 May 2024 11:59:59 GMT';
const AFTER = 'Fri, 10 May 2024 12:00:01 GMT';

void describe('planRange: date preconditions (finished audio with Last-Modified)', () => {
  const base = { method: 'GET' as const, etag: ETAG, ...F, lastModified: MODIFIED };
  const cases: [name: string, req: Partial<RangePlanInput>, expected: RangePlan][] = [
    [
      'If-Unmodified-Since at Last-Modified (sub-second ignored)',
      { ifUnmodifiedSinceHeader: AT },
      full(1000),
    ],
    ['If-Unmodified-Since after', { ifUnmodifiedSinceHeader: AFTER }, full(1000)],
    ['If-Unmodified-Since before → 412', { ifUnmodifiedSinceHeader: BEFORE }, failed],
    ['If-Unmodified-Since not a date → ignored', { ifUnmodifiedSinceHeader: 'yesterday' }, full(1000)],
    [
      'If-Match wins over If-Unmodified-Since',
      { ifMatchHeader: ETAG, ifUnmodifiedSinceHeader: BEFORE },
      full(1000),
    ],
    ['If-Modified-Since at Last-Modified → 304', { ifModifiedSinceHeader: AT }, notModified(true)],
    ['If-Modified-Since after → 304', { ifModifiedSinceHeader: AFTER }, notModified(true)],
    ['If-Modified-Since before → 200', { ifModifiedSinceHeader: BEFORE }, full(1000)],
    ['If-Modified-Since not a date → ignored', { ifModifiedSinceHeader: '0' }, full(1000)],
    [
      'If-None-Match mismatch wins over If-Modified-Since',
      { ifNoneMatchHeader: '"x"', ifModifiedSinceHeader: AT },
      full(1000),
    ],
    [
      'If-None-Match match with an old If-Modified-Since',
      { ifNoneMatchHeader: ETAG, ifModifiedSinceHeader: BEFORE },
      notModified(true),
    ],
    ['412 before 304', { ifUnmodifiedSinceHeader: BEFORE, ifModifiedSinceHeader: AT }, failed],
    ['304 before 416', { ifModifiedSinceHeader: AT, rangeHeader: 'bytes=5000-' }, notModified(true)],
    [
      'If-Modified-Since before + Range → 206',
      { ifModifiedSinceHeader: BEFORE, rangeHeader: 'bytes=0-9' },
      partial(0, 9, 1000),
    ],
  ];
  for (const [name, req, expected] of cases) {
    void test(name, () => assert.deepEqual(planRange({ ...base, ...req }), expected));
  }
  void test('without Last-Modified (live sessions) date conditions are ignored', () => {
    const live0 = { method: 'GET' as const, etag: ETAG, ...U };
    assert.deepEqual(planRange({ ...live0, ifModifiedSinceHeader: AFTER }), live);
    assert.deepEqual(planRange({ ...live0, ifUnmodifiedSinceHeader: BEFORE }), live);
  });
});

void describe('evaluatePreconditions: entity-tag lists', () => {
  const cases: [header: string, matchesForIfNoneMatch: boolean, holdsForIfMatch: boolean][] = [
    [ETAG, true, true],
    [` ${ETAG} `, true, true],
    [`"a",${ETAG}`, true, true],
    [`"a" , , ${ETAG} ,`, true, true],
    [`"a,b", ${ETAG}`, true, true], // a comma inside an opaque-tag is not a separator
    ['"s1-abc", "x"', true, true],
    [`W/${ETAG}`, true, false],
    [`W/"a", W/${ETAG}`, true, false],
    ['*', true, true],
    [' * ', true, true],
    ['"other"', false, false],
    ['""', false, false],
    [`w/${ETAG}`, false, false], // W/ is case-sensitive: unparsable
    [`${ETAG}, *`, false, false], // * only alone
    ['s1-abc', false, false], // unquoted
    [`${ETAG} "x"`, false, false], // missing comma
    [`"s1-abc`, false, false], // unterminated
    ['', false, false],
    [',', false, false],
    ['"a\x01"', false, false], // control character in an opaque-tag
  ];
  for (const [header, matches, holds] of cases) {
    void test(JSON.stringify(header), () => {
      assert.equal(
        evaluatePreconditions({ ifNoneMatchHeader: header }, { etag: ETAG }),
        matches ? 'not-modified' : 'pass',
      );
      assert.equal(
        evaluatePreconditions({ ifMatchHeader: header }, { etag: ETAG }),
        holds ? 'pass' : 'precondition-failed',
      );
    });
  }

  void test('a representation whose tag is not fixed yet: only * matches', () => {
    const unbuilt = { etag: null };
    assert.equal(evaluatePreconditions({ ifMatchHeader: '*' }, unbuilt), 'pass');
    assert.equal(evaluatePreconditions({ ifMatchHeader: ETAG }, unbuilt), 'precondition-failed');
    assert.equal(evaluatePreconditions({ ifNoneMatchHeader: '*' }, unbuilt), 'not-modified');
    assert.equal(evaluatePreconditions({ ifNoneMatchHeader: ETAG }, unbuilt), 'pass');
    assert.equal(evaluatePreconditions({}, unbuilt), 'pass');
  });
});

void describe('parseHttpDate (RFC 9110 §5.6.7)', () => {
  const now = new Date(Date.UTC(2025, 0, 1));
  const expected = Date.UTC(1994, 10, 6, 8, 49, 37);
  const cases: [string, number | null][] = [
    ['Sun, 06 Nov 1994 08:49:37 GMT', expected], // IMF-fixdate
    ['Sunday, 06-Nov-94 08:49:37 GMT', expected], // obsolete RFC 850
    ['Sun Nov  6 08:49:37 1994', expected], // ANSI C asctime()
    ['Saturday, 06-Nov-60 08:49:37 GMT', Date.UTC(2060, 10, 6, 8, 49, 37)], // within 50 years ahead
    ['Thursday, 06-Nov-80 08:49:37 GMT', Date.UTC(1980, 10, 6, 8, 49, 37)], // more than 50 ahead → past
    [' Sun, 06 Nov 1994 08:49:37 GMT ', expected],
    ['Sun, 06 Nov 1994 08:49:37 UTC', null],
    ['Sun, 6 Nov 1994 08:49:37 GMT', null],
    ['Sun, 31 Feb 1994 08:49:37 GMT', null],
    ['Sun, 06 Nov 1994 24:00:00 GMT', null],
    ['Sun, 06 Nov 1994 08:49:60 GMT', null],
    ['Sun, 06 Nov 0094 08:49:37 GMT', null],
    ['sun, 06 nov 1994 08:49:37 gmt', null],
    ['1994-11-06T08:49:37Z', null],
    ['784111777', null],
    ['', null],
  ];
  for (const [value, ms] of cases) {
    void test(JSON.stringify(value), () => assert.equal(parseHttpDate(value, now), ms));
  }
});

void describe('304 and 412 plans', () => {
  void test('headers, length, window', () => {
    const nm = { kind: 'not-modified', status: 304, etag: ETAG, finished: true } as const;
    assert.deepEqual(planHeaders(nm), { ETag: ETAG });
    assert.equal(contentLength(nm), undefined);
    assert.equal(contentRangeHeader(nm), undefined);
    assert.equal(bodyWindow(nm), null);
    const pf = { kind: 'precondition-failed', status: 412, etag: ETAG } as const;
    assert.deepEqual(planHeaders(pf), {});
    assert.equal(bodyWindow(pf), null);
  });

  void test('preconditionFailed is a 412 AppError', () => {
    const err = preconditionFailed();
    assert.equal(err.code, 'PRECONDITION_FAILED');
    assert.equal(err.status, 412);
    assert.equal(err.reportable, false);
  });

  void test('resolveRangePlan answers 304/412 without waiting for a closed range', async () => {
    const r = new FakeResource();
    const req = { method: 'GET' as const, etag: ETAG, rangeHeader: 'bytes=100-199' };
    assert.deepEqual(await resolveRangePlan({ ...req, ifNoneMatchHeader: ETAG }, r), notModified(false));
    assert.deepEqual(await resolveRangePlan({ ...req, ifMatchHeader: '"x"' }, r), failed);
    assert.equal(r.waits, 0);
    // If-Match holds: the closed range waits as without it.
    const p = resolveRangePlan({ ...req, ifMatchHeader: ETAG }, r);
    r.grow(200);
    assert.deepEqual(await p, partial(100, 199, '*'));
  });
});
