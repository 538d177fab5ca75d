/**
 * Idle memory: `npm run bench:memory` (env: SETTLE_SECONDS, 70 — past the synthesis
 * threads' idle minute; SESSIONS, 1000; SERVER_BUILD, `dist` — the compiled service `npm start`
 * runs, built first — or `src` for the service under tsx).
 *  1. Starts the service on a new DATA_DIR, reads its resident memory once it answers and again
 *     after SETTLE_SECONDS idle; then restarts it on the same data and does the same. The reference
 *     in the same run: a bare `node` process (the runtime's own floor). Target: ≤ 250 MB idle.
 *  2. Heap per finished idle session: a task of 200 contents is generated with no stream opened
 *     (the baseline), then a second one while SESSIONS clients each open a content stream of its
 *     second half with a `i` of their own (one stream session each) and read it to its
 *     end; once that task is generated the sessions are finished and idle, kept for their reclaim
 *     time. The service's
 *     heap after a full collection (a bench-only preload, `--expose-gc`, asked by SIGUSR2), with
 *     those sessions alive against the baseline, per session. Target: ≤ 64 KiB.
 * Exits 1 when a target is missed.
 */
import { spawn, spawnSync } from 'node:child_process';
import { mkdtemp, readFile, rm, unlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { metricValue, story } from './lib/live-session.js';
import { scaleOutRequested } from './lib/scale-out.js';
import { api, report, rssMiB, runBench, startServer, type BenchServer } from './lib/server.js';

const SETTLE_SECONDS = Number(process.env.SETTLE_SECONDS ?? 70);
const SESSIONS = Number(process.env.SESSIONS ?? 1000);
const TARGET_MIB = 250 / 1.048576; // 250 MB
const SESSION_HEAP_TARGET_KIB = 64;
/** Contents per task in the sessions phase (the default MAX_CONTENTS): a title and a sentence each, ~7 s of speech. */
const CONTENTS = 200;

/**
 * Preloaded into the service (main thread only) for the sessions phase: on SIGUSR2, a full
 * collection, then process.memoryUsage() into DATA_DIR/heap.json.
 */
const HEAP_PROBE = `import { isMainThread } from 'node:worker_threads';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
if (isMainThread && typeof globalThis.gc === 'function' && /main\\.[jt]s$/.test(process.argv[1] ?? '')) {
  process.on('SIGUSR2', () => {
    globalThis.gc();
    globalThis.gc();
    writeFileSync(join(process.env.DATA_DIR ?? '.', 'heap.json'), JSON.stringify(process.memoryUsage()));
  });
}
`;

async function bareNodeRss(): Promise<number> {
  const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
  await sleep(1000);
  const rss = rssMiB(child.pid ?? 0);
  child.kill();
  return rss;
}

async function idleRss(dataDir?: string): Promise<{ started: number; settled: number; dataDir: string }> {
  const server = await startServer({
    LOG_LEVEL: 'warn',
    ...(dataDir !== undefined && { DATA_DIR: dataDir }),
  });
  try {
    await sleep(2000);
    const started = rssMiB(server.pid);
    await sleep(SETTLE_SECONDS * 1000);
    return { started, settled: rssMiB(server.pid), dataDir: server.dataDir };
  } finally {
    // Keep the data for the restart: stop without removing it.
    process.env.KEEP_DATA = '1';
    await server.stop();
    delete process.env.KEEP_DATA;
  }
}

/** The service's memory right after a full collection (the preloaded probe). */
async function memoryAfterGc(server: BenchServer): Promise<NodeJS.MemoryUsage> {
  const file = join(server.dataDir, 'heap.json');
  await unlink(file).catch(() => undefined);
  process.kill(server.pid, 'SIGUSR2');
  for (let waited = 0; waited < 30_000; waited += 100) {
    await sleep(100);
    try {
      return JSON.parse(await readFile(file, 'utf8')) as NodeJS.MemoryUsage;
    } catch {
      // not written yet
    }
  }
  throw new Error('the heap probe did not answer (SIGUSR2)');
}

/** A task of CONTENTS contents (~7 s of speech each); its id and full-task stream URL. */
async function manyContentsTask(server: BenchServer, voiceId: string, n: number) {
  const contents = Array.from({ length: CONTENTS }, (_, idx) => ({
    text: story(3, n * CONTENTS + idx),
    voiceId,
  }));
  const task = await api<{ id: string }>(server, 'POST', '/api/tts/generate', { contents });
  const { streamUrl } = await api<{ streamUrl: string }>(
    server,
    'GET',
    `/api/tts/generate/${task.id}?stream=true`,
  );
  return { id: task.id, streamUrl };
}

async function generated(server: BenchServer, id: string): Promise<void> {
  for (const deadline = Date.now() + 600_000; Date.now() < deadline; await sleep(250)) {
    const { status } = await api<{ status: string }>(server, 'GET', `/api/tts/generate/${id}`);
    if (status === 'generated') return;
    if (status === 'failed') throw new Error(`task ${id} failed`);
  }
  throw new Error(`task ${id} not generated within 600 s`);
}

/** Reads one content stream with its own `i` to its end (retrying while the task is still queued); its status. */
async function readSession(url: string): Promise<number> {
  for (;;) {
    const response = await fetch(url, { redirect: 'manual' });
    await response.arrayBuffer();
    if (response.status !== 400) return response.status;
    await sleep(100); // STREAM_NOT_READY: not taken up yet
  }
}

interface SessionHeap {
  sessions: number;
  statuses: Map<number, number>;
  /** How long the task without streams took to generate, and the task with SESSIONS streams waiting on it. */
  baselineSeconds: number;
  measuredSeconds: number;
  heapPerSessionKiB: number;
  externalPerSessionKiB: number;
  rssPerSessionKiB: number;
}

/** Phase 2 (module comment): heap per finished idle session. */
async function idleSessionHeap(): Promise<SessionHeap> {
  const probeDir = await mkdtemp(join(tmpdir(), 'voicegen-heap-probe-'));
  const probe = join(probeDir, 'heap-probe.mjs');
  await writeFile(probe, HEAP_PROBE);
  const limit = String(SESSIONS * 2);
  const server = await startServer(
    {
      LOG_LEVEL: 'warn',
      STREAM_MAX_SESSIONS_PER_TASK: limit,
      STREAM_MAX_SESSIONS_PER_ACCOUNT: limit,
      STREAM_RATE_LIMIT_MAX: '1000000',
      RATE_LIMIT_MAX: '1000000',
    },
    ['--expose-gc', '--import', probe],
  );
  try {
    const voice = await api<{ id: string }>(server, 'POST', '/api/voice', { name: 'bench narrator' });
    // The baseline: a task like the measured one, generated, no session opened.
    let started = performance.now();
    const baseline = await manyContentsTask(server, voice.id, 0);
    await generated(server, baseline.id);
    const baselineSeconds = (performance.now() - started) / 1000;
    await sleep(2000);
    const before = await memoryAfterGc(server);
    started = performance.now();
    const measured = await manyContentsTask(server, voice.id, 1);
    const statuses = new Map<number, number>();
    await Promise.all(
      Array.from({ length: SESSIONS }, async (_, n) => {
        const url = new URL(
          measured.streamUrl.replace(/\/stream\.mp3/, `/${CONTENTS / 2 + (n % (CONTENTS / 2))}/stream.mp3`),
        );
        // Contents of the task's second half: still to come when every request has arrived.
        url.searchParams.set('i', `idle-${n}`);
        const status = await readSession(url.toString());
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      }),
    );
    await generated(server, measured.id);
    const measuredSeconds = (performance.now() - started) / 1000;
    await sleep(2000);
    const after = await memoryAfterGc(server);
    const sessions = await metricValue(server, 'voicegen_stream_sessions');
    const perSession = (bytes: number) => bytes / Math.max(1, sessions) / 1024;
    return {
      sessions,
      statuses,
      baselineSeconds,
      measuredSeconds,
      heapPerSessionKiB: perSession(after.heapUsed - before.heapUsed),
      externalPerSessionKiB: perSession(after.external - before.external),
      rssPerSessionKiB: perSession(after.rss - before.rss),
    };
  } finally {
    await server.stop();
    await rm(probeDir, { recursive: true, force: true });
  }
}

async function main(): Promise<number> {
  process.env.SERVER_BUILD ??= 'dist';
  const compiled = process.env.SERVER_BUILD === 'dist';
  if (compiled && spawnSync('npm', ['run', 'build'], { stdio: 'inherit' }).status !== 0)
    throw new Error('npm run build failed');
  const floor = await bareNodeRss();
  const first = await idleRss();
  const restart = await idleRss(first.dataDir);
  await rm(first.dataDir, { recursive: true, force: true });
  const idle = await idleSessionHeap();
  const kib = (value: number) => `${value.toFixed(1)} KiB`;
  console.log(
    `${idle.sessions} idle sessions (answers: ${[...idle.statuses].map(([status, count]) => `${count} × ${status}`).join(', ')}): ` +
      `per session heap ${kib(idle.heapPerSessionKiB)}, external ${kib(idle.externalPerSessionKiB)}, RSS ${kib(idle.rssPerSessionKiB)}; ` +
      `task generated in ${idle.measuredSeconds.toFixed(1)} s with the streams, ${idle.baselineSeconds.toFixed(1)} s without`,
  );
  const fmt = (mib: number) => `${mib.toFixed(0)} MiB`;
  console.log(
    `bare node ${fmt(floor)}; first start: ${fmt(first.started)} → ${fmt(first.settled)} after ${SETTLE_SECONDS} s; ` +
      `restart: ${fmt(restart.started)} → ${fmt(restart.settled)}`,
  );
  return report(
    `Idle resident memory (${compiled ? 'compiled service, node dist/main.js' : 'service under tsx'}, ${scaleOutRequested() ? 'scale-out adapters: a fresh database per start' : 'embedded defaults'})`,
    [
      {
        metric: `first start, idle ${SETTLE_SECONDS} s`,
        ours: fmt(first.settled),
        reference: `bare node ${fmt(floor)}`,
        ratio: `${(first.settled / floor).toFixed(1)}×`,
        target: '≤ 250 MB',
        pass: first.settled <= TARGET_MIB,
      },
      {
        metric: `restart on the same data, idle ${SETTLE_SECONDS} s`,
        ours: fmt(restart.settled),
        reference: `bare node ${fmt(floor)}`,
        ratio: `${(restart.settled / floor).toFixed(1)}×`,
        target: '≤ 250 MB',
        pass: restart.settled <= TARGET_MIB,
      },
      {
        metric: `heap per finished idle session, ${idle.sessions} alive`,
        ours: kib(idle.heapPerSessionKiB),
        reference: `external ${kib(idle.externalPerSessionKiB)}, RSS ${kib(idle.rssPerSessionKiB)}`,
        ratio: '—',
        target: `≤ ${SESSION_HEAP_TARGET_KIB} KiB, ${SESSIONS} alive`,
        pass: idle.sessions >= SESSIONS && idle.heapPerSessionKiB <= SESSION_HEAP_TARGET_KIB,
      },
    ],
  );
}

runBench(main);
