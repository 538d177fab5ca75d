/**
 * Live-readers benchmark: `npx tsx bench/live-readers.bench.ts [--readers 2000] [--rate 40000]
 * [--seconds 10] [--history 5,120] [--tail-bytes 2097152]`.
 * One FsGrowingFile is fed at `rate` bytes/s (40 KB/s = 320 kbps MP3) in 100 ms chunks after
 * `history` seconds were already produced; then `readers` readers join at once at byte 0 (as a
 * live 200 does) and follow the session in-process for `seconds`. Printed per history and per
 * mode — file only or shared tail, each with per-reader file descriptors and reads (the paths
 * before shared reads) or one shared descriptor and shared blocks (the default) — first-byte
 * latency p50/p99/max, catch-up time to the joining point, peak open descriptors, file reads,
 * heap/RSS before/peak/after and CPU. Every reader's bytes are checked against what was appended.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { readdirSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep, setImmediate as nextTurn } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import v8 from 'node:v8';
import vm from 'node:vm';
import {
  DEFAULT_TAIL_BYTES,
  FsGrowingFile,
  type FsGrowingFileOptions,
} from '../src/storage/growing-file.fs.js';

const MiB = 1024 * 1024;
const TICK_MS = 100;

const { values: args } = parseArgs({
  options: {
    readers: { type: 'string', default: '2000' },
    rate: { type: 'string', default: '40000' },
    seconds: { type: 'string', default: '10' },
    history: { type: 'string', default: '5,120' },
    'tail-bytes': { type: 'string', default: String(DEFAULT_TAIL_BYTES) },
    /** Internal: `<mode index>:<history>` runs that one scenario and prints its result as JSON. */
    scenario: { type: 'string' },
  },
});
const readerCount = Number(args.readers);
const rate = Number(args.rate);
const seconds = Number(args.seconds);
const histories = args.history.split(',').map(Number);
const tailBytes = Number(args['tail-bytes']);

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** Memory after a full GC and the sweep of dead ArrayBuffer backing stores. */
async function settledMemory(): Promise<NodeJS.MemoryUsage> {
  gc();
  await nextTurn();
  gc();
  return process.memoryUsage();
}

function openFds(): number {
  return readdirSync('/proc/self/fd').length;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

const mib = (bytes: number): string => `${(bytes / MiB).toFixed(1)}`;
const ms = (value: number): string => (Number.isNaN(value) ? '—' : `${value.toFixed(value < 10 ? 2 : 0)}`);

interface Result {
  mode: string;
  historySeconds: number;
  firstByte: number[];
  catchUp: number[];
  failed: number;
  wrongBytes: number;
  peakFds: number;
  baseFds: number;
  fileReads: number;
  before: NodeJS.MemoryUsage;
  peak: { rss: number; heapUsed: number; arrayBuffers: number };
  after: NodeJS.MemoryUsage;
  cpuSeconds: number;
}

async function runScenario(
  mode: string,
  options: FsGrowingFileOptions,
  historySeconds: number,
): Promise<Result> {
  const dir = await mkdtemp(join(tmpdir(), 'live-readers-'));
  // The session's bytes, generated up front so producing costs the same in both modes.
  const total = Math.ceil((historySeconds + seconds + 2) * rate);
  const content = randomBytes(total);
  const before = await settledMemory();
  const baseFds = openFds();
  const cache = new FsGrowingFile({ dir, name: 'session.mp3' }, options);
  const chunkSize = Math.round((rate * TICK_MS) / 1000);

  // The session has been running for `historySeconds` already.
  let produced = 0;
  const historyBytes = Math.round(historySeconds * rate);
  while (produced < historyBytes) {
    const size = Math.min(chunkSize, historyBytes - produced);
    await cache.append(content.subarray(produced, produced + size));
    produced += size;
  }

  let live = true;
  const feeder = (async () => {
    const started = performance.now();
    let ticks = 0;
    while (live && produced + chunkSize <= total) {
      await cache.append(content.subarray(produced, produced + chunkSize));
      produced += chunkSize;
      ticks++;
      const due = started + ticks * TICK_MS - performance.now();
      if (due > 0) await sleep(due);
    }
  })();

  const peak = { rss: 0, heapUsed: 0, arrayBuffers: 0 };
  let peakFds = baseFds;
  const sample = (): void => {
    const m = process.memoryUsage();
    peak.rss = Math.max(peak.rss, m.rss);
    peak.heapUsed = Math.max(peak.heapUsed, m.heapUsed);
    peak.arrayBuffers = Math.max(peak.arrayBuffers, m.arrayBuffers);
    peakFds = Math.max(peakFds, openFds());
  };
  const sampler = setInterval(sample, 50);

  const cpuBefore = process.cpuUsage();
  const firstByte: number[] = [];
  const catchUp: number[] = [];
  let failed = 0;
  let wrongBytes = 0;
  const ends: Promise<void>[] = [];
  const joinedAt = produced;
  for (let i = 0; i < readerCount; i++) {
    const created = performance.now();
    const reader = cache.createReadStream(0, null);
    let received = 0;
    let caughtUp = false;
    reader.on('data', (chunk: Buffer) => {
      if (received === 0) firstByte.push(performance.now() - created);
      // Spot-check each chunk against the appended bytes (first and last byte).
      if (chunk[0] !== content[received] || chunk[chunk.length - 1] !== content[received + chunk.length - 1])
        wrongBytes++;
      received += chunk.length;
      if (!caughtUp && received >= joinedAt) {
        caughtUp = true;
        catchUp.push(performance.now() - created);
      }
    });
    ends.push(
      once(reader, 'end').then(
        () => {
          if (received !== cache.size) wrongBytes++;
        },
        () => {
          failed++;
        },
      ),
    );
  }

  await sleep(seconds * 1000);
  sample();
  live = false;
  await feeder;
  await cache.finish();
  await Promise.all(ends);
  const cpu = process.cpuUsage(cpuBefore);
  clearInterval(sampler);
  const fileReads = cache.fileReadCount;
  await cache.destroy();
  await rm(dir, { recursive: true, force: true });
  const after = await settledMemory();
  return {
    mode,
    historySeconds,
    firstByte: firstByte.sort((a, b) => a - b),
    catchUp: catchUp.sort((a, b) => a - b),
    failed,
    wrongBytes,
    peakFds,
    baseFds,
    fileReads,
    before,
    peak,
    after,
    cpuSeconds: (cpu.user + cpu.system) / 1e6,
  };
}

const tailLabel = `tail ${mib(tailBytes)} MiB`;
const modes: [string, FsGrowingFileOptions][] = [
  ['file only, per-reader fds (oldest path)', { tailBytes: 0, fileReads: 'per-reader' }],
  ['file only, shared fd + blocks', { tailBytes: 0, fileReads: 'shared' }],
  [`${tailLabel}, per-reader fds (080316b)`, { tailBytes, fileReads: 'per-reader' }],
  [`${tailLabel}, shared fd + blocks (default)`, { tailBytes, fileReads: 'shared' }],
];

if (args.scenario !== undefined) {
  const [modeIndex, historySeconds] = args.scenario.split(':').map(Number);
  const [mode, options] = modes[modeIndex ?? -1] ?? [];
  if (mode === undefined || options === undefined) throw new Error(`no mode ${String(modeIndex)}`);
  console.log(JSON.stringify(await runScenario(mode, options, historySeconds ?? 0)));
} else {
  // Each scenario in a fresh process, so RSS and heap start from the same place.
  const results: Result[] = [];
  for (const historySeconds of histories) {
    for (const [modeIndex, [mode]] of modes.entries()) {
      const child = spawnSync(
        process.execPath,
        [
          ...process.execArgv,
          process.argv[1] ?? '',
          ...process.argv.slice(2),
          '--scenario',
          `${String(modeIndex)}:${String(historySeconds)}`,
        ],
        { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 * MiB },
      );
      if (child.status !== 0) throw new Error(`scenario ${mode}, ${String(historySeconds)} s failed`);
      results.push(JSON.parse(child.stdout.trim().split('\n').at(-1) ?? '') as Result);
      console.error(`done: ${mode}, history ${String(historySeconds)} s`);
    }
  }
  printTable(results);
}

function printTable(results: Result[]): void {
  console.log(
    `\n${String(readerCount)} readers joining at byte 0 of one session fed at ${String(rate)} B/s, followed for ${String(seconds)} s; Node ${process.version}\n`,
  );
  console.log(
    '| history | mode | first byte p50 / p99 / max (ms) | caught up p50 / p99 (ms) | peak fds (+base) | file reads | heap MiB before / peak / after | RSS MiB before / peak / after | CPU s | failed / wrong |',
  );
  console.log('|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results) {
    const fb = r.firstByte;
    const cu = r.catchUp;
    console.log(
      `| ${String(r.historySeconds)} s (${mib(r.historySeconds * rate)} MiB) | ${r.mode} | ${ms(percentile(fb, 50))} / ${ms(percentile(fb, 99))} / ${ms(fb.at(-1) ?? NaN)} | ${ms(percentile(cu, 50))} / ${ms(percentile(cu, 99))} | ${String(r.peakFds - r.baseFds)} (+${String(r.baseFds)}) | ${String(r.fileReads)} | ${mib(r.before.heapUsed)} / ${mib(r.peak.heapUsed)} / ${mib(r.after.heapUsed)} | ${mib(r.before.rss)} / ${mib(r.peak.rss)} / ${mib(r.after.rss)} | ${r.cpuSeconds.toFixed(2)} | ${String(r.failed)} / ${String(r.wrongBytes)} |`,
    );
  }
}
