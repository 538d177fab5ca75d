/**
 * The long fuzz run: the CI suite's generators and invariants
 * (test/fuzz/) at ≥ 100k cases. `npx tsx bench/fuzz.ts [--cases 100000] [--raw-share 0.1]
 * [--seed 20110011] [--parallel 8] [--show 20]`. Starts an embedded app on a temporary DATA_DIR
 * with the fuzz settings, creates the fixtures, runs the in-process and raw-socket cases, checks
 * that nothing stored is garbage, and prints cases run, 5xx seen, violations, the histogram of
 * codes, RSS and heap after a GC before/after, and the duration. Exits 1 on any violation.
 */
import { parseArgs } from 'node:util';
import { checkStoredData, createFuzzContext, FUZZ_ENV, memoryAfterGc } from '../test/fuzz/context.js';
import { FuzzTally } from '../test/fuzz/invariants.js';
import { runInjectCases, runRawCases } from '../test/fuzz/run.js';
import { startTestApp } from '../test/helpers/test-app.js';

const { values } = parseArgs({
  options: {
    cases: { type: 'string', default: '100000' },
    'raw-share': { type: 'string', default: '0.1' },
    seed: { type: 'string', default: '20110011' },
    parallel: { type: 'string', default: '8' },
    show: { type: 'string', default: '20' },
  },
});
const total = Number(values.cases);
const rawCases = Math.round(total * Number(values['raw-share']));
const injectCases = total - rawCases;
const seed = Number(values.seed);
const MiB = 1024 * 1024;
const mib = (bytes: number) => `${(bytes / MiB).toFixed(1)} MiB`;

const t = await startTestApp({ listen: true, env: FUZZ_ENV });
try {
  const ctx = await createFuzzContext(t.app, { key: t.key, accountId: t.accountId }, await t.newAccount());
  const port = Number(new URL(t.baseUrl).port);
  // Warm-up (not counted): every route and lazy module once, so "before" is the steady state.
  await runInjectCases(t.app, ctx, { seed: seed - 1, numRuns: 300, tally: new FuzzTally() });
  const before = memoryAfterGc();
  const started = Date.now();
  const progress = (family: string) => (done: number) =>
    console.log(
      `  ${family}: ${done} cases, ${((Date.now() - started) / 1000).toFixed(0)} s, RSS ${mib(process.memoryUsage().rss)}`,
    );
  const injected = new FuzzTally();
  await runInjectCases(t.app, ctx, {
    seed,
    numRuns: injectCases,
    tally: injected,
    onProgress: progress('inject'),
  });
  const raw = new FuzzTally();
  await runRawCases(port, ctx, {
    seed,
    numRuns: rawCases,
    tally: raw,
    parallel: Number(values.parallel),
    onProgress: progress('raw'),
  });
  const seconds = (Date.now() - started) / 1000;
  const stored = await checkStoredData(t.app, ctx);
  const after = memoryAfterGc();

  console.log(`\nfuzz run: seed ${seed}, ${seconds.toFixed(1)} s`);
  for (const [name, tally] of [
    ['in process (inject)', injected],
    ['raw sockets', raw],
  ] as const) {
    console.log(
      `${name}: ${tally.cases} cases, ${tally.serverErrors} 5xx, ${tally.violations.length} violations` +
        (tally === raw ? `, ${tally.unanswered} closed without an answer` : ''),
    );
    console.log(
      `  statuses: ${[...tally.statuses.entries()]
        .sort((a, b) => a[0] - b[0])
        .map(([s, n]) => `${s}×${n}`)
        .join(' ')}`,
    );
    console.log(`  codes: ${tally.histogram().join(', ')}`);
    for (const v of tally.violations.slice(0, Number(values.show)))
      console.log(`  ✖ ${FuzzTally.describe(v)}`);
  }
  console.log(`stored data: ${stored.read} items read back, ${stored.problems.length} problems`);
  for (const p of stored.problems.slice(0, Number(values.show))) console.log(`  ✖ ${p}`);
  console.log(
    `memory after GC: RSS ${mib(before.rss)} → ${mib(after.rss)} (${mib(after.rss - before.rss)}), heap ${mib(before.heapUsed)} → ${mib(after.heapUsed)} (${mib(after.heapUsed - before.heapUsed)})`,
  );
  process.exitCode = injected.violations.length + raw.violations.length + stored.problems.length > 0 ? 1 : 0;
} finally {
  await t.close();
}
