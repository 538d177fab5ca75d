/**
 * What the benchmarks share: Debian reference tools installed on demand, the real server started
 * as a child process on a temporary DATA_DIR with one API key, its resource figures from /proc, and
 * the result table every benchmark prints (ours beside the reference, the ratio, PASS/FAIL).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { openSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { serverCommand } from './pinning.js';
import { scaleOutRequested, scaleOutServerEnv } from './scale-out.js';

/** Installs the Debian packages whose commands are missing (apt-get, as scripts/setup-debian.sh does). */
export function ensureDebianPackages(commandsByPackage: Record<string, string>): void {
  aptInstall(
    Object.entries(commandsByPackage)
      .filter(([, command]) => spawnSync('sh', ['-c', `command -v ${command}`]).status !== 0)
      .map(([pkg]) => pkg),
  );
}

/** Installs `packages` from Debian with apt-get (through sudo unless root); nothing when empty. */
export function aptInstall(packages: readonly string[]): void {
  if (packages.length === 0) return;
  console.log(`installing reference tools from Debian: ${packages.join(', ')}`);
  const sudo = process.getuid?.() === 0 ? [] : ['sudo'];
  const run = (args: string[]) => {
    const result = spawnSync(
      sudo[0] ?? args[0]!,
      [...sudo.slice(1), ...(sudo.length ? args : args.slice(1))],
      {
        stdio: 'inherit',
        env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
      },
    );
    if (result.status !== 0) throw new Error(`${args.join(' ')} failed`);
  };
  run(['apt-get', 'update', '-qq']);
  run(['apt-get', 'install', '-y', '-qq', '--no-install-recommends', ...packages]);
}

/** A free TCP port on the loopback interface. */
export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const address = probe.address();
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  if (address === null || typeof address !== 'object') throw new Error('no port');
  return address.port;
}

/** A running service under benchmark. */
export interface BenchServer {
  child: ChildProcess;
  pid: number;
  url: string;
  dataDir: string;
  /** An API key of the account "bench" (BOOTSTRAP_API_KEY). */
  key: string;
  /** The scale-out variables it runs with (empty when embedded): another node of its cluster takes the same. */
  scaleOutEnv: Record<string, string>;
  stop(): Promise<void>;
}

/**
 * Starts `node --import tsx src/main.ts` (with `SERVER_BUILD=dist`: the compiled `node dist/main.js`
 * that `npm start` runs, built beforehand; on SERVER_CPUS when set) on a temporary DATA_DIR (with SCALE_OUT=1 on the scale-out
 * adapters: bench/lib/scale-out.ts); resolves when /healthz answers.
 */
export async function startServer(
  env: Record<string, string> = {},
  nodeArgs: string[] = [],
  /** Joins the cluster of this node (same database, Redis and bucket, same API key). */
  clusterOf?: BenchServer,
): Promise<BenchServer> {
  const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-bench-'));
  const port = await freePort();
  // SCALE_OUT=1: PostgreSQL, Redis and S3 (the test servers) instead of the embedded adapters.
  const scaleOut = clusterOf?.scaleOutEnv ?? (scaleOutRequested() ? await scaleOutServerEnv() : {});
  if (scaleOutRequested() && clusterOf === undefined)
    console.log('server on the scale-out adapters: PostgreSQL, Redis, S3 (s3rver)');
  const key = clusterOf?.key ?? `sk-${randomBytes(16).toString('hex')}`;
  const log = join(dataDir, 'server.log');
  const logFile = openSync(log, 'w');
  const entry = process.env.SERVER_BUILD === 'dist' ? ['dist/main.js'] : ['--import', 'tsx', 'src/main.ts'];
  // Under `taskset -c SERVER_CPUS` when the run is pinned (taskset execs node: the pid is node's).
  const [command, args] = serverCommand(process.execPath, [...nodeArgs, ...entry]);
  const child = spawn(command, args, {
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      NODE_URL: `http://127.0.0.1:${port}`,
      DATA_DIR: dataDir,
      BOOTSTRAP_API_KEY: key,
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn',
      ...scaleOut,
      ...env,
    },
    stdio: ['ignore', logFile, logFile],
  });
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null) {
      child.kill('SIGTERM');
      await Promise.race([new Promise((resolve) => child.once('exit', resolve)), sleep(10_000)]);
      if (child.exitCode === null) child.kill('SIGKILL');
    }
    if (process.env.KEEP_DATA !== '1') await rm(dataDir, { recursive: true, force: true });
  };
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited: ${readFileSync(log, 'utf8').slice(-2000)}`);
    if (Date.now() > deadline) {
      await stop();
      throw new Error('server did not start within 120 s');
    }
    try {
      const response = await fetch(`${url}/healthz`);
      if (response.ok) break;
    } catch {
      // not listening yet
    }
    await sleep(200);
  }
  return { child, pid: child.pid ?? 0, url, dataDir, key, scaleOutEnv: scaleOut, stop };
}

/** A JSON API call with `key` (default: the bench account's); throws on a non-2xx answer with its body. */
export async function api<T>(
  server: BenchServer,
  method: string,
  path: string,
  body?: unknown,
  key: string = server.key,
): Promise<T> {
  const response = await fetch(`${server.url}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${key}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
    },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text.slice(0, 300)}`);
  const parsed = JSON.parse(text) as { data?: T };
  return (parsed.data ?? parsed) as T;
}

/** Creates a voice and a task of `text`, waits until it is generated; its id and audio URL. */
export async function finishedTask(
  server: BenchServer,
  text: string,
): Promise<{ id: string; audioUrl: string }> {
  const voice = await api<{ id: string }>(server, 'POST', '/api/voice', { name: 'bench narrator' });
  const task = await api<{ id: string }>(server, 'POST', '/api/tts/generate', {
    contents: [{ text, voiceId: voice.id }],
  });
  const deadline = Date.now() + 300_000;
  for (;;) {
    const detail = await api<{ status: string; metadata: { audio?: string } }>(
      server,
      'GET',
      `/api/tts/generate/${task.id}`,
    );
    if (detail.status === 'generated') {
      const audioUrl = detail.metadata.audio;
      if (audioUrl === undefined) throw new Error('a generated task without an audio URL');
      return { id: task.id, audioUrl };
    }
    if (detail.status === 'failed') throw new Error(`task failed: ${JSON.stringify(detail)}`);
    if (Date.now() > deadline) throw new Error('task not generated within 300 s');
    await sleep(500);
  }
}

/** Resident memory of a process in MiB (/proc/<pid>/status). */
export function rssMiB(pid: number): number {
  const kb = /VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return kb === undefined ? Number.NaN : Number(kb) / 1024;
}

/** User+system CPU seconds of a process (/proc/<pid>/stat, clock ticks of 100 Hz). */
export function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** Pids of the processes `pid` started (their parent is `pid`), e.g. the service's child processes. */
export function childPids(pid: number): number[] {
  const found: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
      if (Number(fields[1]) === pid) found.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return found;
}

/** CPU seconds of a process and of the processes it started (those alive now). */
export function treeCpuSeconds(pid: number): { own: number; children: number } {
  let children = 0;
  for (const child of childPids(pid)) {
    try {
      children += cpuSeconds(child);
    } catch {
      // gone meanwhile
    }
  }
  return { own: cpuSeconds(pid), children };
}

/** One row of a benchmark's result table. */
export interface ResultRow {
  metric: string;
  ours: string;
  reference: string;
  ratio: string;
  target: string;
  pass: boolean;
}

/** Prints the table and returns the exit code: 1 when a target was missed. */
export function report(title: string, rows: ResultRow[]): number {
  const header: ResultRow = {
    metric: 'metric',
    ours: 'ours',
    reference: 'reference',
    ratio: 'ratio',
    target: 'target',
    pass: true,
  };
  const all = [header, ...rows];
  const width = (k: keyof Omit<ResultRow, 'pass'>) => Math.max(...all.map((r) => r[k].length));
  const line = (r: ResultRow, verdict: string) =>
    `| ${r.metric.padEnd(width('metric'))} | ${r.ours.padStart(width('ours'))} | ${r.reference.padStart(width('reference'))} | ${r.ratio.padStart(width('ratio'))} | ${r.target.padEnd(width('target'))} | ${verdict.padEnd(4)} |`;
  console.log(`\n${title}\n`);
  console.log(line(header, 'ok?'));
  console.log(
    `|${['metric', 'ours', 'reference', 'ratio', 'target'].map((k) => '-'.repeat(width(k as keyof Omit<ResultRow, 'pass'>) + 2)).join('|')}|------|`,
  );
  for (const row of rows) console.log(line(row, row.pass ? 'PASS' : 'FAIL'));
  return rows.every((r) => r.pass) ? 0 : 1;
}

/** Reads a JSON file. */
export async function readJson<T>(path: string): Promise<T> {
  return JSON.parse(await readFile(path, 'utf8')) as T;
}

/** The p-th percentile (nearest rank) of `values`, in any order; NaN when there are none. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? Number.NaN;
}

/** SERVER_ENV ("K=V,K=V"): extra variables for the server under benchmark. */
export function serverEnvFromProcess(): Record<string, string> {
  return Object.fromEntries(
    (process.env.SERVER_ENV ?? '')
      .split(',')
      .filter((pair) => pair.includes('='))
      .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
  );
}

/** SERVER_NODE_ARGS ("--cpu-prof --cpu-prof-dir=/tmp/prof"): extra node flags for the server under benchmark. */
export function serverNodeArgsFromProcess(): string[] {
  return (process.env.SERVER_NODE_ARGS ?? '').split(' ').filter((arg) => arg !== '');
}

/** Runs a benchmark's main and exits with its code (1 = a target missed), or 2 when it failed. */
export function runBench(main: () => Promise<number>): void {
  main().then(
    (code) => process.exit(code),
    (err: unknown) => {
      console.error(err);
      process.exit(2);
    },
  );
}
