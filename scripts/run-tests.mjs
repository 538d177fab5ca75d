#!/usr/bin/env node
// Runs every *.test.ts under src/, test/ and bench/ (the benchmarks' own helpers) with Node's test
// runner (tsx loader), after starting the real servers of the scale-out tests
// (scripts/test-servers.sh: PostgreSQL, Redis, s3rver) and passing their addresses as
// TEST_DATABASE_URL, TEST_REDIS_URL and TEST_S3_ENDPOINT.
// Node 20's --test takes no globs, so the files are listed here. Pass paths/substrings to filter.
import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { spawnSync } from 'node:child_process';

function walk(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...walk(p));
    else if (name.endsWith('.test.ts')) out.push(p);
  }
  return out;
}

const filters = process.argv.slice(2);
const files = ['src', 'test', 'bench']
  .flatMap((d) => walk(d))
  .filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)))
  .sort();
if (files.length === 0) {
  console.error('no test files matched');
  process.exit(1);
}
const servers = spawnSync('bash', ['scripts/test-servers.sh'], {
  stdio: ['ignore', 'pipe', 'inherit'],
  encoding: 'utf8',
});
if (servers.status !== 0) {
  console.error('could not start the test servers (scripts/test-servers.sh)');
  process.exit(1);
}
// The AWS SDK's notice that its 2027 releases need Node 22 would otherwise fill every test's output.
const env = { AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true', ...process.env };
for (const line of servers.stdout.split('\n')) {
  const match = /^(TEST_[A-Z0-9_]+)=(.*)$/.exec(line);
  if (match) env[match[1]] ??= match[2];
}
const concurrency = process.env.TEST_CONCURRENCY ?? '2';
// A hung test fails after TEST_TIMEOUT_MS; a test file that never exits (a handle left open)
// fails the whole run after RUN_TIMEOUT_MS instead of holding CI until its own limit.
const testTimeoutMs = process.env.TEST_TIMEOUT_MS ?? String(10 * 60_000);
const runTimeoutMs = Number(process.env.RUN_TIMEOUT_MS ?? 55 * 60_000);
const result = spawnSync(
  process.execPath,
  [
    '--import',
    'tsx',
    '--test',
    `--test-concurrency=${concurrency}`,
    `--test-timeout=${testTimeoutMs}`,
    '--test-reporter=spec',
    ...files,
  ],
  { stdio: 'inherit', env, timeout: runTimeoutMs, killSignal: 'SIGKILL' },
);
if (result.error !== undefined) {
  console.error(`the test run did not finish within ${String(runTimeoutMs)} ms: ${result.error.message}`);
  console.error('a test file kept its process alive after its tests (an open handle) or hung');
  process.exit(1);
}
process.exit(result.status ?? 1);
