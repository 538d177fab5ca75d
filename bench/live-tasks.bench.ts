/**
 * Many live tasks at once: `npm run bench:live-tasks` (env: TASKS, 50; ACCOUNTS, 5;
 * SECONDS, about 60 s of speech per task; SERVER_ENV; SERVER_NODE_ARGS, e.g. `--cpu-prof`).
 * TASKS tasks are created together by ACCOUNTS accounts, and each gets a listener the moment it is
 * created: a player that asks for the task's full stream (retrying STREAM_NOT_READY every 250 ms,
 * as a player would), then plays it at real time (40 KB/s of 320 kbps MP3) — an underrun is a
 * moment its buffer is empty while the stream has not ended. The reference, measured in the same
 * run: what the machine can generate, the embedded engine's real-time factor on one thread times
 * the cores (streams of real time it could keep ahead of their listeners).
 * Targets: every task `processing` within 1 s, first byte p99 ≤ 1 s, 0 underruns.
 */
import http from 'node:http';
import { availableParallelism } from 'node:os';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { createEspeakEngine } from '../src/audio/engines/espeak.engine.js';
import { CANONICAL_RATE } from '../src/audio/pcm.js';
import { story } from './lib/live-session.js';
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
} from './lib/server.js';

const TASKS = Number(process.env.TASKS ?? 50);
const ACCOUNTS = Number(process.env.ACCOUNTS ?? 5);
const SECONDS = Number(process.env.SECONDS ?? 60);
/** 320 kbps: the bytes a player consumes per second. */
const BYTES_PER_SECOND = 40_000;
/** A player reads at most this far ahead of what it plays (the rest waits in the socket). */
const READ_AHEAD_SECONDS = 10;
const ADMIN_TOKEN = 'bench-admin-token-0123456789abcdef';
/** Set when the run is over: the accounts' list pollers stop. */
let stopPolling = false;

interface ListenerResult {
  firstByteMs: number;
  notReadyRetries: number;
  underruns: number;
  /** Seconds of audio played when each underrun began. */
  underrunsAt: number[];
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
    const clock = setInterval(() => {
      const now = performance.now();
      const buffered = bytes / BYTES_PER_SECOND - played;
      const step = (now - lastTick) / 1000;
      lastTick = now;
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
      resolve({ firstByteMs: first, notReadyRetries: retries, underruns, underrunsAt, bytes });
    });
    response.on('error', (err) => {
      clearInterval(clock);
      reject(err);
    });
  });
}

/** The embedded engine's real-time factor on one thread, on the bench's own text. */
async function engineRealtimeFactor(): Promise<number> {
  const engine = createEspeakEngine({ threads: 1 });
  try {
    const text = story(30, 0);
    const run = async () => {
      let samples = 0;
      for await (const pcm of engine.synthesize(
        { text, voice: { engine: 'espeak', voice: 'en-us' }, speechRate: 1 },
        AbortSignal.timeout(120_000),
      ))
        samples += pcm.length;
      return samples;
    };
    await run(); // warm-up
    const started = performance.now();
    const samples = await run();
    return samples / CANONICAL_RATE / ((performance.now() - started) / 1000);
  } finally {
    await engine.close();
  }
}

async function main(): Promise<number> {
  const perThread = await engineRealtimeFactor();
  const capacity = perThread * availableParallelism();
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
    const admin = async <T>(method: string, path: string, body?: unknown) =>
      api<T>(server, method, path, body, ADMIN_TOKEN);
    const accounts = await Promise.all(
      Array.from({ length: ACCOUNTS }, async (_, i) => {
        await admin('POST', '/admin/accounts', { name: `listener-${i}` });
        const { key } = await admin<{ key: string }>('POST', `/admin/accounts/listener-${i}/keys`);
        const voice = await api<{ id: string }>(server, 'POST', '/api/voice', { name: 'narrator' }, key);
        /** When each task of the account was first listed as not pending (a dashboard's view). */
        const started = new Map<string, number>();
        let polling: Promise<void> | undefined;
        const poll = async () => {
          while (!stopPolling) {
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
        const seen = async (id: string) => {
          polling ??= poll();
          return started.get(id);
        };
        return { key, voiceId: voice.id, seen, done: () => polling ?? Promise.resolve() };
      }),
    );
    const agent = new http.Agent({ keepAlive: true, maxSockets: TASKS * 2 });
    // Warm-up: a task like the bench's (the same lane: a short one would start the short lane's
    // threads, not these) and its stream read to the end, so the synthesis and encoder threads the
    // burst uses are started, as on a running server.
    {
      const [first] = accounts;
      if (first === undefined) throw new Error('no account');
      const warm = await api<{ id: string }>(
        server,
        'POST',
        '/api/tts/generate',
        {
          contents: [{ text: story(SECONDS, -1), voiceId: first.voiceId }],
        },
        first.key,
      );
      const { streamUrl } = await api<{ streamUrl: string }>(
        server,
        'GET',
        `/api/tts/generate/${warm.id}?stream=true`,
        undefined,
        first.key,
      );
      const warmed = await fetch(streamUrl);
      if (!warmed.ok) throw new Error(`warm-up stream: ${warmed.status} ${await warmed.text()}`);
      await warmed.arrayBuffer();
    }
    const rssBefore = rssMiB(server.pid);
    const cpuBefore = cpuSeconds(server.pid);
    const started = performance.now();
    const runs = await Promise.all(
      Array.from({ length: TASKS }, async (_, n) => {
        const account = accounts[n % ACCOUNTS];
        if (account === undefined) throw new Error('no account');
        const task = await api<{ id: string }>(
          server,
          'POST',
          '/api/tts/generate',
          {
            contents: [{ text: story(SECONDS, n), voiceId: account.voiceId }],
          },
          account.key,
        );
        const created = performance.now();
        const { streamUrl } = await api<{ streamUrl: string }>(
          server,
          'GET',
          `/api/tts/generate/${task.id}?stream=true`,
          undefined,
          account.key,
        );
        // When the task is first seen processing (or later): its account's list, polled every 100 ms.
        const processing = (async () => {
          for (;;) {
            const seen = await account.seen(task.id);
            if (seen !== undefined) return seen - created;
            await sleep(50);
          }
        })();
        const listening = performance.now();
        const [toProcessing, listener] = await Promise.all([processing, listen(streamUrl, agent)]);
        // Since the tasks were sent: creation and the stream URL included.
        const sinceSent = listening + listener.firstByteMs - started;
        return { toProcessing, listener, sinceSent, createdAfter: created - started };
      }),
    );
    const wall = (performance.now() - started) / 1000;
    stopPolling = true;
    await Promise.all(accounts.map((account) => account.done()));
    const scrape = await (await fetch(`${server.url}/metrics`)).text();
    const lag = (name: string) =>
      Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(scrape)?.[1] ?? Number.NaN) * 1000;
    agent.destroy();
    const rssAfter = rssMiB(server.pid);
    const cpu = cpuSeconds(server.pid) - cpuBefore;

    const toProcessing = runs.map((r) => r.toProcessing);
    const firstBytes = runs.map((r) => r.listener.firstByteMs);
    const sinceSent = runs.map((r) => r.sinceSent);
    const createdAfter = runs.map((r) => r.createdAfter);
    const underruns = runs.reduce((sum, r) => sum + r.listener.underruns, 0);
    const retries = runs.reduce((sum, r) => sum + r.listener.notReadyRetries, 0);
    const audioSeconds = runs.reduce((sum, r) => sum + r.listener.bytes / BYTES_PER_SECOND, 0);
    const late = toProcessing.filter((ms) => ms > 1000).length;
    if (process.env.VERBOSE === '1') {
      console.log(
        `first bytes (ms): ${[...firstBytes]
          .sort((x, y) => x - y)
          .map((ms) => ms.toFixed(0))
          .join(' ')}`,
      );
      console.log(
        `underruns at (s of audio played): ${runs
          .flatMap((r) => r.listener.underrunsAt)
          .sort((x, y) => x - y)
          .map((s) => s.toFixed(1))
          .join(' ')}`,
      );
      console.log(
        `to processing (ms): ${[...toProcessing]
          .sort((x, y) => x - y)
          .map((ms) => ms.toFixed(0))
          .join(' ')}`,
      );
    }
    console.log(
      `${TASKS} tasks by ${ACCOUNTS} accounts, ${audioSeconds.toFixed(0)} s of audio in ${wall.toFixed(1)} s; ` +
        `processing after p50 ${percentile(toProcessing, 50).toFixed(0)} ms, max ${Math.max(...toProcessing).toFixed(0)} ms; ` +
        `first byte p50 ${percentile(firstBytes, 50).toFixed(0)} ms, p99 ${percentile(firstBytes, 99).toFixed(0)} ms; ` +
        `since the tasks were sent: created p50 ${percentile(createdAfter, 50).toFixed(0)} ms, max ${Math.max(...createdAfter).toFixed(0)} ms, ` +
        `first byte p50 ${percentile(sinceSent, 50).toFixed(0)} ms, p99 ${percentile(sinceSent, 99).toFixed(0)} ms; ` +
        `STREAM_NOT_READY retries ${retries}; underruns ${underruns}; server CPU ${cpu.toFixed(1)} s; ` +
        `RSS ${rssBefore.toFixed(0)} → ${rssAfter.toFixed(0)} MiB; ` +
        `event-loop delay p99 ${lag('voicegen_nodejs_eventloop_lag_p99_seconds').toFixed(0)} ms, max ${lag('voicegen_nodejs_eventloop_lag_max_seconds').toFixed(0)} ms; engine ${perThread.toFixed(0)}× real time per thread`,
    );
    return report(`${TASKS} live tasks created together, a real-time listener on each`, [
      {
        metric: 'tasks processing within 1 s',
        ours: `${TASKS - late} of ${TASKS}`,
        reference: `capacity ${capacity.toFixed(0)} streams`,
        ratio: `${(TASKS / capacity).toFixed(2)} of capacity`,
        target: `all ${TASKS}`,
        pass: late === 0,
      },
      {
        metric: 'listener first byte p99',
        ours: `${percentile(firstBytes, 99).toFixed(0)} ms`,
        reference: '—',
        ratio: '—',
        target: '≤ 1000 ms',
        pass: percentile(firstBytes, 99) <= 1000,
      },
      {
        metric: 'underruns',
        ours: String(underruns),
        reference: '—',
        ratio: '—',
        target: '0',
        pass: underruns === 0,
      },
    ]);
  } finally {
    await server.stop();
  }
}

runBench(main);
