/**
 * Bursts of live tasks: `npm run bench:live-tasks` (env: TASKS, the first burst's size, default the
 * target; SECONDS, 30 of speech per task; ROUNDS, 3 bursts at most; SERVER_ENV; SERVER_NODE_ARGS,
 * e.g. `--cpu-prof`; SERVER_CPUS / CLIENT_CPUS, default 1 and 0; VERBOSE=1, every listener's first
 * byte, underruns and least slack (the five closest to running dry, by task); WARM_BURSTS, 0, bursts
 * of WARM_TASKS, 8, run and printed before the counted ones, so that the code the bursts run is
 * compiled as on a server that has been serving a while).
 * A burst: N tasks created together by ceil(N/10) accounts, each with a listener the moment it is
 * created: a player that asks for the task's full stream (retrying STREAM_NOT_READY every 250 ms,
 * as a player would), then plays it at real time (40 KB/s of 320 kbps MP3) — an underrun is a
 * moment its buffer is empty while the stream has not ended. A burst passes when every task is
 * `processing` within 1 s, first byte p99 ≤ 1 s and there is no underrun.
 * The reference, measured in the same run: the stage-cost limit (bench:pipeline's), the real-time
 * streams the server's cores can synthesise and encode; the tasks' voice is bound to the engine
 * and voice those costs are measured with. Bursts search the largest N that passes,
 * from 0.4× that limit (the target) up or down by a quarter; the server and this client run on
 * separate cores. Prints every burst, the largest passing N and its ratio to the limit; exits 1
 * below 0.4×.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { story } from './lib/live-session.js';
import { pinByDefault, pinClient, pinningLine, serverCoreCount } from './lib/pinning.js';
import {
  api,
  cpuSeconds,
  percentile,
  report,
  rssMiB,
  runBench,
  serverEnvFromProcess,
  serverNodeArgsFromProcess,
  startServer,
  type BenchServer,
} from './lib/server.js';
import { measureStageCosts, STAGE_REQUEST, stageLimit } from './lib/stage-costs.js';

const SECONDS = Number(process.env.SECONDS ?? 30);
const ROUNDS = Number(process.env.ROUNDS ?? 3);
const WARM_BURSTS = Number(process.env.WARM_BURSTS ?? 0);
const WARM_TASKS = Number(process.env.WARM_TASKS ?? 8);
/** The target: the largest passing burst is at least this share of the stage-cost limit. */
const TARGET_SHARE = 0.4;
/** Tasks per account in a burst (the accounts' queued-task quotas are far above it). */
const TASKS_PER_ACCOUNT = 10;
/** 320 kbps: the bytes a player consumes per second. */
const BYTES_PER_SECOND = 40_000;
/** A player reads at most this far ahead of what it plays (the rest waits in the socket). */
const READ_AHEAD_SECONDS = 10;
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';

interface ListenerResult {
  firstByteMs: number;
  notReadyRetries: number;
  underruns: number;
  /** Seconds of audio played when each underrun began. */
  underrunsAt: number[];
  /**
   * The least audio the player held beyond the next tick's need, in seconds, over the whole
   * stream (negative: what it missed at its first underrun): how close it came to running dry.
   */
  leastSlack: number;
  bytes: number;
}

/** One GET of the stream: its status, and the response when it is audio. */
function get(url: string, agent: http.Agent): Promise<http.IncomingMessage> {
  return new Promise((resolve, reject) => {
    http.get(url, { agent }, resolve).on('error', reject);
  });
}

/** A real-time player of `streamUrl` (see the module comment). */
async function listen(streamUrl: string, agent: http.Agent): Promise<ListenerResult> {
  const asked = performance.now();
  let retries = 0;
  let response: http.IncomingMessage;
  for (;;) {
    response = await get(streamUrl, agent);
    if (response.statusCode === 200 || response.statusCode === 206) break;
    const body = await new Promise<string>((resolve) => {
      let text = '';
      response.on('data', (c: Buffer) => (text += c.toString()));
      response.on('end', () => resolve(text));
    });
    if (!body.includes('STREAM_NOT_READY')) throw new Error(`stream: ${response.statusCode} ${body}`);
    retries++;
    await sleep(250);
  }
  return new Promise((resolve, reject) => {
    let first = 0;
    let bytes = 0;
    let underruns = 0;
    const underrunsAt: number[] = [];
    /** Playback: seconds of audio played, advanced by a clock while the buffer holds audio. */
    let played = 0;
    let lastTick = 0;
    let stalled = false;
    let ended = false;
    let leastSlack = Number.POSITIVE_INFINITY;
    const clock = setInterval(() => {
      const now = performance.now();
      const buffered = bytes / BYTES_PER_SECOND - played;
      const step = (now - lastTick) / 1000;
      lastTick = now;
      if (!ended && !stalled && bytes > 0) leastSlack = Math.min(leastSlack, buffered - step);
      if (buffered >= step) played += step;
      else if (!ended) {
        // The buffer ran dry while the stream goes on: an underrun (the player waits to refill).
        played += Math.max(0, buffered);
        if (!stalled) {
          underruns++;
          underrunsAt.push(played);
        }
        stalled = true;
        return;
      }
      stalled = false;
      if (bytes / BYTES_PER_SECOND - played < READ_AHEAD_SECONDS && response.isPaused()) response.resume();
    }, 50);
    response.on('data', (chunk: Buffer) => {
      if (bytes === 0) {
        first = performance.now() - asked;
        lastTick = performance.now();
      }
      bytes += chunk.length;
      if (bytes / BYTES_PER_SECOND - played > READ_AHEAD_SECONDS) response.pause();
    });
    response.on('end', () => {
      ended = true;
      clearInterval(clock);
      resolve({ firstByteMs: first, notReadyRetries: retries, underruns, underrunsAt, leastSlack, bytes });
    });
    response.on('error', (err) => {
      clearInterval(clock);
      reject(err);
    });
  });
}

interface Account {
  key: string;
  voiceId: string;
  /** When the task was first listed as not pending (its account's list, polled every 100 ms). */
  seen(id: string): Promise<number | undefined>;
  stop(): Promise<void>;
}

/** An account (through the admin API) with a voice, and a dashboard polling its task list. */
async function openAccount(server: BenchServer, name: string): Promise<Account> {
  const admin = async <T>(method: string, path: string, body?: unknown) =>
    api<T>(server, method, path, body, ADMIN_TOKEN);
  await admin('POST', '/admin/accounts', { name });
  const { key } = await admin<{ key: string }>('POST', `/admin/accounts/${name}/keys`);
  // The engine of the reference's stage costs, so the burst and its limit cost the same per second.
  const voice = await api<{ id: string }>(
    server,
    'POST',
    '/api/voice',
    { name: 'narrator', engine: STAGE_REQUEST.voice },
    key,
  );
  const started = new Map<string, number>();
  let stopped = false;
  let polling: Promise<void> | undefined;
  const poll = async () => {
    while (!stopped) {
      const page = await api<Array<{ id: string; status: string }>>(
        server,
        'GET',
        '/api/tts/generate?limit=50',
        undefined,
        key,
      );
      for (const task of page) {
        if (task.status !== 'pending' && !started.has(task.id)) started.set(task.id, performance.now());
      }
      await sleep(100);
    }
  };
  return {
    key,
    voiceId: voice.id,
    seen: async (id) => {
      polling ??= poll();
      return started.get(id);
    },
    stop: async () => {
      stopped = true;
      await polling;
    },
  };
}

/** Creates a task of the bench's size and returns its stream URL. */
async function createTask(
  server: BenchServer,
  account: Account,
  n: number,
): Promise<{ id: string; streamUrl: string }> {
  const task = await api<{ id: string }>(
    server,
    'POST',
    '/api/tts/generate',
    { contents: [{ text: story(SECONDS, n), voiceId: account.voiceId }] },
    account.key,
  );
  const { streamUrl } = await api<{ streamUrl: string }>(
    server,
    'GET',
    `/api/tts/generate/${task.id}?stream=true`,
    undefined,
    account.key,
  );
  return { id: task.id, streamUrl };
}

interface Burst {
  n: number;
  late: number;
  firstByteP99: number;
  underruns: number;
  pass: boolean;
}

/** One burst of `n` live tasks (see the module comment); prints its figures. */
async function burst(server: BenchServer, n: number, round: number | string): Promise<Burst> {
  const accounts = await Promise.all(
    Array.from({ length: Math.ceil(n / TASKS_PER_ACCOUNT) }, (_, i) =>
      openAccount(server, `burst-${round}-${i}`),
    ),
  );
  const agent = new http.Agent({ keepAlive: true, maxSockets: n * 2 });
  const rssBefore = rssMiB(server.pid);
  const cpuBefore = cpuSeconds(server.pid);
  const started = performance.now();
  const runs = await Promise.all(
    Array.from({ length: n }, async (_, k) => {
      const account = accounts[k % accounts.length];
      if (account === undefined) throw new Error('no account');
      const { id, streamUrl } = await createTask(server, account, k);
      const created = performance.now();
      const processing = (async () => {
        for (;;) {
          const seen = await account.seen(id);
          if (seen !== undefined) return seen - created;
          await sleep(50);
        }
      })();
      const listening = performance.now();
      const [toProcessing, listener] = await Promise.all([processing, listen(streamUrl, agent)]);
      // Since the tasks were sent: creation and the stream URL included.
      return { toProcessing, listener, sinceSent: listening + listener.firstByteMs - started };
    }),
  );
  const wall = (performance.now() - started) / 1000;
  await Promise.all(accounts.map((account) => account.stop()));
  agent.destroy();
  const rssAfter = rssMiB(server.pid);
  const cpu = cpuSeconds(server.pid) - cpuBefore;

  const toProcessing = runs.map((r) => r.toProcessing);
  const firstBytes = runs.map((r) => r.listener.firstByteMs);
  const sinceSent = runs.map((r) => r.sinceSent);
  const underruns = runs.reduce((sum, r) => sum + r.listener.underruns, 0);
  const retries = runs.reduce((sum, r) => sum + r.listener.notReadyRetries, 0);
  const audioSeconds = runs.reduce((sum, r) => sum + r.listener.bytes / BYTES_PER_SECOND, 0);
  const late = toProcessing.filter((ms) => ms > 1000).length;
  const sorted = (values: number[], digits: number) =>
    [...values]
      .sort((x, y) => x - y)
      .map((v) => v.toFixed(digits))
      .join(' ');
  if (process.env.VERBOSE === '1') {
    console.log(`  first bytes (ms): ${sorted(firstBytes, 0)}`);
    console.log(
      `  underruns at (s of audio played): ${sorted(
        runs.flatMap((r) => r.listener.underrunsAt),
        1,
      )}`,
    );
    console.log(`  to processing (ms): ${sorted(toProcessing, 0)}`);
    const slack = runs.map((r) => r.listener.leastSlack * 1000);
    const worst = runs
      .map((r, k) => ({ k, ...r }))
      .sort((x, y) => x.listener.leastSlack - y.listener.leastSlack)
      .slice(0, 5)
      .map(
        (r) =>
          `task ${r.k}: ${(r.listener.leastSlack * 1000).toFixed(0)} ms (first byte ${r.listener.firstByteMs.toFixed(0)} ms, ` +
          `${r.sinceSent.toFixed(0)} ms since sent)`,
      );
    console.log(
      `  least slack (ms; below 0: ran dry): min ${Math.min(...slack).toFixed(0)}, ` +
        `p10 ${percentile(slack, 10).toFixed(0)}, p50 ${percentile(slack, 50).toFixed(0)}; lowest: ${worst.join('; ')}`,
    );
  }
  const firstByteP99 = percentile(firstBytes, 99);
  const pass = late === 0 && firstByteP99 <= 1000 && underruns === 0;
  console.log(
    `${typeof round === 'string' ? `${round} (not counted): ` : ''}burst of ${n} tasks by ${accounts.length} accounts: ${pass ? 'PASS' : 'FAIL'} — ` +
      `${n - late} of ${n} processing within 1 s (p50 ${percentile(toProcessing, 50).toFixed(0)} ms, max ${Math.max(...toProcessing).toFixed(0)} ms); ` +
      `first byte p50 ${percentile(firstBytes, 50).toFixed(0)} ms, p99 ${firstByteP99.toFixed(0)} ms ` +
      `(since the tasks were sent p99 ${percentile(sinceSent, 99).toFixed(0)} ms); underruns ${underruns}; ` +
      `STREAM_NOT_READY retries ${retries}; ${audioSeconds.toFixed(0)} s of audio in ${wall.toFixed(1)} s; ` +
      `server CPU ${cpu.toFixed(1)} s; RSS ${rssBefore.toFixed(0)} → ${rssAfter.toFixed(0)} MiB`,
  );
  return { n, late, firstByteP99, underruns, pass };
}

/** Warm-up: a task of the bench's size, its stream read to the end (threads started, as on a running server). */
async function warmUp(server: BenchServer): Promise<void> {
  const account = await openAccount(server, 'warm-up');
  const { streamUrl } = await createTask(server, account, -1);
  const warmed = await fetch(streamUrl);
  if (!warmed.ok) throw new Error(`warm-up stream: ${warmed.status} ${await warmed.text()}`);
  await warmed.arrayBuffer();
}

async function main(): Promise<number> {
  pinByDefault('1', '0');
  pinClient();
  console.log(pinningLine());
  const cores = serverCoreCount();
  const costs = await measureStageCosts(3);
  const limit = stageLimit(costs, cores);
  const target = Math.ceil(TARGET_SHARE * limit);
  console.log(
    `stage-cost limit on the server's ${cores} core(s): ${limit.toFixed(0)} real-time streams ` +
      `(synthesis ${(costs.synthCost * 1000).toFixed(1)} + encoding ${(costs.encodeCost * 1000).toFixed(1)} ms CPU per audio-second); ` +
      `target: a burst of ${target} passes; ${SECONDS} s of speech per task`,
  );
  const server = await startServer(
    {
      ADMIN_TOKEN,
      RATE_LIMIT_MAX: '1000000',
      STREAM_RATE_LIMIT_MAX: '1000000',
      ...serverEnvFromProcess(),
    },
    serverNodeArgsFromProcess(),
  );
  try {
    await warmUp(server);
    for (let i = 0; i < WARM_BURSTS; i++) await burst(server, WARM_TASKS, `warm-up ${i + 1}`);
    // From the first size, up by a quarter after a pass and down by a quarter after a failure,
    // until a pass follows a failure or the rounds are used.
    let n = Number(process.env.TASKS ?? target);
    let largestPass = 0;
    let failedAbove = Number.POSITIVE_INFINITY;
    for (let round = 0; round < ROUNDS && n >= 1; round++) {
      const result = await burst(server, n, round);
      if (result.pass) largestPass = Math.max(largestPass, n);
      else failedAbove = Math.min(failedAbove, n);
      const next = result.pass ? Math.ceil(n * 1.25) : Math.floor(n * 0.75);
      if ((result.pass && next >= failedAbove) || (!result.pass && next <= largestPass)) break;
      n = next;
    }
    const share = largestPass / limit;
    return report('Live tasks created together, a real-time listener on each', [
      {
        metric: 'largest burst with every task processing within 1 s, first byte p99 ≤ 1 s, 0 underruns',
        ours: largestPass === 0 ? 'none passed' : `${largestPass} tasks`,
        reference: `stage-cost limit ${limit.toFixed(0)} streams`,
        ratio: `${share.toFixed(2)}×`,
        target: `≥ ${TARGET_SHARE}× the limit (${target} tasks)`,
        pass: share >= TARGET_SHARE,
      },
    ]);
  } finally {
    await server.stop();
  }
}

runBench(main);
