// Fuzzing: a seeded few thousand cases on every CI run. In process (inject):
// generate/preview/splitter/voice/admin bodies with one or two mutations, broken framing, odd
// Content-Types and credentials; audio and stream requests with fuzzed ids, contentIndex, auth, i,
// response-content-disposition and Range/If-* headers; resource routes under odd methods. Over raw
// sockets: request lines, header bytes and body framing. Every response must hold the invariants of
// test/fuzz/invariants.ts; afterwards nothing stored is garbage and the process still answers,
// without having grown. The long run with the same generators is bench/fuzz.ts.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { FuzzContext } from './fuzz/arbitraries.js';
import { checkStoredData, createFuzzContext, FUZZ_ENV, memoryAfterGc } from './fuzz/context.js';
import { FuzzTally } from './fuzz/invariants.js';
import { runInjectCases, runRawCases } from './fuzz/run.js';
import { startTestApp, type TestApp } from './helpers/test-app.js';

/** Fixed seed: CI runs the same cases every time (change it only on purpose). */
const SEED = 20_110_011;
const INJECT_CASES = 2500;
const RAW_CASES = 600;

const MiB = 1024 * 1024;

describe('fuzzing: seeded cases hold every response invariant', () => {
  let t: TestApp;
  let ctx: FuzzContext;
  let port = 0;
  let before0: { rss: number; heapUsed: number };
  const injected = new FuzzTally();
  const raw = new FuzzTally();

  before(async () => {
    t = await startTestApp({ listen: true, env: FUZZ_ENV });
    port = Number(new URL(t.baseUrl).port);
    ctx = await createFuzzContext(t.app, { key: t.key, accountId: t.accountId }, await t.newAccount());
    // Warm up every route and lazy module once, so the baseline is the steady state, not start-up.
    await runInjectCases(t.app, ctx, { seed: SEED - 1, numRuns: 300, tally: new FuzzTally() });
    before0 = memoryAfterGc();
  });
  after(async () => t.close());

  const assertNoViolations = (family: string, tally: FuzzTally) => {
    const shown = tally.violations.slice(0, 10).map((v) => FuzzTally.describe(v));
    assert.equal(
      tally.violations.length,
      0,
      `${family}: ${tally.violations.length} violations\n${shown.join('\n')}`,
    );
  };
  const summary = (tally: FuzzTally) =>
    `${tally.cases} cases, ${tally.serverErrors} 5xx; ${[...tally.statuses.entries()]
      .sort((a, b) => a[0] - b[0])
      .map(([status, n]) => `${status}×${n}`)
      .join(' ')}`;

  it(`in process: ${INJECT_CASES} cases (bodies, audio/stream, resources)`, async (test) => {
    await runInjectCases(t.app, ctx, { seed: SEED, numRuns: INJECT_CASES, tally: injected });
    test.diagnostic(summary(injected));
    assertNoViolations('inject', injected);
    assert.equal(injected.cases, INJECT_CASES);
    // The families reached what they aim at: validation refusals, successes and audio answers.
    for (const status of [200, 302, 400, 401, 404, 413, 415])
      assert.ok((injected.statuses.get(status) ?? 0) > 0, `no ${status} seen`);
    assert.ok((injected.statuses.get(206) ?? 0) + (injected.statuses.get(304) ?? 0) > 0, 'no 206/304 seen');
  });

  it(`raw sockets: ${RAW_CASES} request lines, header bytes and framings`, async (test) => {
    await runRawCases(port, ctx, { seed: SEED, numRuns: RAW_CASES, tally: raw, parallel: 8 });
    test.diagnostic(`${summary(raw)}; ${raw.unanswered} closed without an answer`);
    assertNoViolations('raw', raw);
    assert.equal(raw.cases, RAW_CASES);
    for (const status of [200, 400, 431]) assert.ok((raw.statuses.get(status) ?? 0) > 0, `no ${status} seen`);
  });

  it('regression (fuzz find): a repeated auth on the finished-audio routes is 401, not 500', async () => {
    for (const path of ['audio.mp3', '0/audio.mp3']) {
      for (const method of ['GET', 'HEAD'] as const) {
        const res = await t.app.http.inject({
          method,
          url: `/api/tts/generate/${ctx.taskId}/${path}?auth=${ctx.authToken}&auth=${ctx.authToken}`,
        });
        assert.equal(res.statusCode, 401, `${method} ${path}: ${res.body}`);
        if (method === 'GET') assert.equal(res.json<{ code: string }>().code, 'AUTH_UNAUTHORIZED');
      }
    }
  });

  it('afterwards: nothing invalid was stored, the process answers and has not grown', async () => {
    const stored = await checkStoredData(t.app, ctx);
    assert.deepEqual(stored.problems, []);
    assert.ok(stored.read > 0);
    const now = memoryAfterGc();
    // Bounds (see docs/reliability.md "Fuzzing"): the JS heap after a GC is the leak signal; RSS
    // also holds PGlite's WebAssembly memory, which grows with the rows the fuzz stored and never
    // shrinks, and the allocator's free pages, so it gets a looser bound.
    assert.ok(
      now.heapUsed - before0.heapUsed < 64 * MiB,
      `heap grew ${(now.heapUsed - before0.heapUsed) / MiB} MiB`,
    );
    assert.ok(now.rss - before0.rss < 256 * MiB, `RSS grew ${(now.rss - before0.rss) / MiB} MiB`);
  });
});
