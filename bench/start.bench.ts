/**
 * Start-up and CLI latency of the compiled build: `npm run bench:start` (env: RUNS, 3).
 *  1. `npm start` → the first 200 of /healthz, on a new DATA_DIR (the first run: the embedded
 *     database is created) and again on that same DATA_DIR (every later start). Target: ≤ 3 s.
 *  2. `voicegen --help` (`node bin/voicegen.js --help`, and `npx voicegen --help`, which adds npm's
 *     own start) until it exits. Target: ≤ 1 s.
 *  3. `voicegen synth "Hello there." -o …` in-process (no server) until it exits. Target: ≤ 3 s.
 * Each is timed from the spawn of the command, as a person typing it would wait. Needs a fresh build
 * (`npm run build`; `npm ci` makes one). Prints every run and the median; exits 1 when a median
 * misses its target.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildProblem } from '../scripts/build-stamp.mjs';
import { freePort } from '../test/helpers/free-port.js';

const RUNS = Number(process.env.RUNS ?? 3);
const root = join(import.meta.dirname, '..');

/** The environment of a user's shell, without anything pointing at another server or data. */
function cleanEnv(extra: Record<string, string>): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of Object.keys(env)) {
    if (
      /^(DATABASE_URL|ADMIN_TOKEN|VOICEGEN_URL|VOICEGEN_KEY|REDIS_URL|S3_.*|NODE_URL|PUBLIC_URL)$/.test(name)
    )
      delete env[name];
  }
  return { ...env, ...extra };
}

/** Seconds from spawning `npm start` until /healthz answers 200; the service is stopped after. */
async function startToHealthy(dataDir: string): Promise<number> {
  const port = await freePort();
  const started = performance.now();
  const child = spawn('npm', ['start'], {
    cwd: root,
    env: cleanEnv({ DATA_DIR: dataDir, PORT: String(port), LOG_LEVEL: 'warn' }),
    stdio: ['ignore', 'ignore', 'inherit'],
    detached: true,
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    for (;;) {
      if (child.exitCode !== null) throw new Error(`npm start exited with ${child.exitCode}`);
      if (performance.now() - started > 120_000) throw new Error('no healthy /healthz within 120 s');
      const ok = await fetch(`http://127.0.0.1:${port}/healthz`).then(
        (res) => res.status === 200,
        () => false,
      );
      if (ok) return (performance.now() - started) / 1000;
      await sleep(10);
    }
  } finally {
    // npm, its shell and the service: the whole process group.
    if (child.pid !== undefined) process.kill(-child.pid, 'SIGTERM');
    await exited;
  }
}

/** Seconds a command takes from spawn to exit (it must exit 0). */
function timed(command: string, args: string[], env: Record<string, string> = {}): number {
  const started = performance.now();
  const result = spawnSync(command, args, { cwd: root, env: cleanEnv(env), encoding: 'utf8' });
  const seconds = (performance.now() - started) / 1000;
  if (result.status !== 0)
    throw new Error(`${command} ${args.join(' ')}: exit ${result.status}\n${result.stderr}`);
  return seconds;
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[mid] ?? 0) : ((sorted[mid - 1] ?? 0) + (sorted[mid] ?? 0)) / 2;
}

async function main(): Promise<void> {
  const problem = buildProblem(root);
  if (problem !== undefined) {
    console.error(problem);
    process.exit(1);
  }
  const work = await mkdtemp(join(tmpdir(), 'voicegen-bench-start-'));
  const rows: { what: string; runs: number[]; target: number }[] = [];
  try {
    const first: number[] = [];
    const again: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const dataDir = join(work, `data-${i}`);
      first.push(await startToHealthy(dataDir));
      again.push(await startToHealthy(dataDir));
    }
    rows.push({ what: '`npm start` → /healthz 200, new DATA_DIR', runs: first, target: 3 });
    rows.push({ what: '`npm start` → /healthz 200, existing DATA_DIR', runs: again, target: 3 });
    const help: number[] = [];
    const npxHelp: number[] = [];
    const synth: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      help.push(timed(process.execPath, ['bin/voicegen.js', '--help']));
      npxHelp.push(timed('npx', ['voicegen', '--help']));
      synth.push(
        timed(
          process.execPath,
          ['bin/voicegen.js', 'synth', 'Hello there.', '-o', join(work, `hello-${i}.mp3`)],
          {
            DATA_DIR: join(work, 'unused'),
          },
        ),
      );
    }
    rows.push({ what: '`node bin/voicegen.js --help`', runs: help, target: 1 });
    rows.push({ what: '`npx voicegen --help`', runs: npxHelp, target: 1 });
    rows.push({ what: '`voicegen synth "Hello there." -o hello.mp3`', runs: synth, target: 3 });
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  let missed = false;
  console.log(`| what | median (s) | runs (s) | target |\n|---|---|---|---|`);
  for (const row of rows) {
    const m = median(row.runs);
    missed ||= m > row.target;
    console.log(
      `| ${row.what} | ${m.toFixed(2)} | ${row.runs.map((r) => r.toFixed(2)).join(', ')} | ≤ ${row.target} s${m > row.target ? ' (missed)' : ''} |`,
    );
  }
  process.exit(missed ? 1 : 0);
}

await main();
