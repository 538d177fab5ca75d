/**
 * Load and soak: `npx tsx bench/soak.ts`, a measurement script, not a test.
 * Environment: DURATION (loaded seconds, 600), UNLOADED (seconds, 45), WARMUP (seconds, 15), READERS (500), SESSIONS (20),
 * API_RPS (50), HOSTILE_HEAD_RPS (200), HOSTILE_PREVIEW_RPS (5), HOSTILE_GENERATE_RPS (10),
 * HOSTILE_TASK_CHARS (100000), HOSTILE_GENERATE_UNTIL_REFUSED (1: the generate flood stops at its first
 * refusal, so only the accepted tasks load the service), LOAD_NICENESS (19: the niceness this process, the load
 * generator, takes once the polite client is started, so that on the client core the polite client's timings never
 * wait behind the load; 0 keeps them equal), SERVER_CPUS and CLIENT_CPUS (taskset core lists: the server on one,
 * this process and the polite client on the other, e.g. SERVER_CPUS=1 CLIENT_CPUS=0), SERVER_ENV ("K=V,K=V" extra server variables), SERVER_NODE_ARGS
 * (extra node flags of the server, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof"), SERVER_BUILD (`dist`:
 * the compiled service, as `npm start` runs it; build it first), KEEP_DATA (1 keeps the temporary
 * DATA_DIR and the server log).
 *
 * Starts the real server (`node --import tsx src/main.ts`, embedded defaults, a temporary DATA_DIR)
 * with an event-loop-delay probe preloaded, creates five accounts through the admin API (four
 * polite, one hostile), then:
 *  1. unloaded: API_RPS polite requests/s (account info, task list, task detail, a small task,
 *     a splitter preview, voice list) spread over the polite accounts, plus one one-shot
 *     (`POST /api/tts/simple-generate`, `direct_stream`) every 2 s, timed to its first MP3 byte;
 *  2. loaded: the same, plus SESSIONS live stream sessions (one long task per group of five
 *     sessions, five distinct `i` per task) read by READERS readers at real-time pace (40 KB/s,
 *     320 kbps: a reader pauses its socket when ahead, it never reads as fast as it can), and the
 *     hostile account: HEAD floods with a new `i` each, maximum-size splitter previews and a
 *     generate flood of large tasks. Each client group connects from its own loopback address
 *     (127.0.x.y), as distinct clients would, so the per-address limits apply to each separately.
 * The polite traffic is sent and timed by a process of its own (bench/lib/soak-polite.ts), as
 * separate clients would: the readers and floods of this process made its event loop lag by up to
 * ~100 ms, which the latencies then counted. Prints unloaded vs loaded latency, one-shot first
 * byte, polite errors, the hostile account's answers by status, server RSS, the event-loop delay
 * of the server and of both client processes, the server's busiest threads, and PASS/FAIL against
 * the issue's criteria (p99 and one-shot first byte within 2× of unloaded, 0 polite errors, RSS
 * flat). Exits 0.
 */
import { fork, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { once, setMaxListeners } from 'node:events';
import { openSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import http, { type IncomingMessage } from 'node:http';
import { createServer } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { pinClient, pinningLine, reniceThisProcess, serverCommand } from './lib/pinning.js';
import { percentile, serverEnvFromProcess } from './lib/server.js';
import {
  agentFor,
  bump,
  call,
  errorName,
  json,
  openLoop,
  REQUEST_TIMEOUT_MS,
  SENTENCE,
  setBaseUrl,
  statusOf,
  type Answer,
  type CallOptions,
  type Phase,
} from './lib/soak-client.js';
import type { PoliteCommand, PoliteReport } from './lib/soak-polite.js';

const env = (name: string, fallback: number): number => {
  const raw = process.env[name];
  const value = raw === undefined || raw === '' ? fallback : Number(raw);
  if (!Number.isFinite(value) || value < 0) throw new Error(`${name} must be a non-negative number`);
  return value;
};

const DURATION_S = env('DURATION', 600);
const UNLOADED_S = env('UNLOADED', 45);
const WARMUP_S = env('WARMUP', 15);
const READERS = env('READERS', 500);
const SESSIONS = env('SESSIONS', 20);
const API_RPS = env('API_RPS', 50);
const HOSTILE_HEAD_RPS = env('HOSTILE_HEAD_RPS', 200);
const HOSTILE_PREVIEW_RPS = env('HOSTILE_PREVIEW_RPS', 5);
const HOSTILE_GENERATE_RPS = env('HOSTILE_GENERATE_RPS', 10);
const HOSTILE_TASK_CHARS = env('HOSTILE_TASK_CHARS', 100_000);
const LOAD_NICENESS = env('LOAD_NICENESS', 19);
const KEEP_DATA = process.env.KEEP_DATA === '1';
const HOSTILE_GENERATE_UNTIL_REFUSED = process.env.HOSTILE_GENERATE_UNTIL_REFUSED === '1';

const POLITE_ACCOUNTS = 4;
const SESSIONS_PER_TASK = 5;
/** 320 kbps MP3: what a real-time listener consumes. */
const READER_BYTES_PER_S = 40_000;
const SAMPLE_INTERVAL_MS = 2000;
/** espeak en-us speaks about 14 characters per second. */
/** At most the characters a second the embedded engine speaks at speechRate 1 (it says 15–19). */
const CHARS_PER_AUDIO_S = 20;
/**
 * Per-account limit: the polite accounts send API_RPS/4 requests/s each (750/min at 50 req/s) plus
 * a one-shot every 8 s; a third more covers fixed-window alignment and bursts. The hostile account
 * gets the same limit (and hits it).
 */
const RATE_LIMIT_MAX = Math.max(600, Math.ceil(((API_RPS / POLITE_ACCOUNTS) * 60 + 60 / 8) * (4 / 3)));

let phase: Phase = 'setup';
/** The polite client's process (bench/lib/soak-polite.ts): told every phase change. */
let politeClient: ChildProcess | undefined;

function setPhase(next: Phase): void {
  phase = next;
  politeClient?.send({ type: 'phase', phase: next } satisfies PoliteCommand);
}
let loadedStartedAt = 0;
/** performance.now() when the unloaded phase began (0 until then). */
let unloadedStartedAt = 0;

/**
 * Whether an event-loop window reported at `at` (it covers the SAMPLE_INTERVAL_MS before) lies
 * wholly in `which` phase: the server's start-up (module loading, ~1 s of one busy turn) and the
 * warm-up came before the unloaded phase and a window straddling a phase change belongs to neither,
 * so the start-up no longer shows up as a stall of the unloaded service.
 */
function inLoopPhase(at: number, which: 'unloaded' | 'loaded'): boolean {
  if (which === 'loaded') return at >= loadedStartedAt + SAMPLE_INTERVAL_MS;
  return at >= unloadedStartedAt + SAMPLE_INTERVAL_MS && at < loadedStartedAt;
}

// ---------------------------------------------------------------- recording

/** One latency (ms) of a request sent at `at` (this process's performance.now() scale) in `phase`. */
interface Sample {
  phase: Phase;
  at: number;
  ms: number;
}

interface EventLoopSample {
  at: number;
  p99: number;
  max: number;
}

const latency = new Map<string, Sample[]>();
/**
 * Event-loop delay every 2 s of the polite client's process and of this one (the load generator):
 * a measuring client that lags inflates the latencies it records.
 */
const clientEventLoop = { polite: [] as EventLoopSample[], load: [] as EventLoopSample[] };
const politeErrors = new Map<string, number>();
const hostileStatus = new Map<string, number>();
const readerStats = {
  opens: 0,
  liveOpens: 0,
  redirects: 0,
  notReady: 0,
  errors: new Map<string, number>(),
  bytes: 0,
  /** Sum over responses of the time each live 200 was being read. */
  readingMs: 0,
  firstByte: [] as number[],
  tasksCreated: 0,
};

// ---------------------------------------------------------------- server

interface ServerInfo {
  child: ChildProcess;
  pid: number;
  dataDir: string;
  adminToken: string;
  baseUrl: string;
  eventLoop: { at: number; p50: number; p99: number; max: number }[];
}

/** The server's origin, for the readers' own requests (agent-less, one connection each). */
let serverBaseUrl = '';

async function freePort(): Promise<number> {
  const probe = createServer();
  probe.listen(0, '127.0.0.1');
  await once(probe, 'listening');
  const address = probe.address();
  probe.close();
  if (address === null || typeof address !== 'object') throw new Error('no port');
  return address.port;
}

/** Preloaded into the server: its event-loop delay every 2 s over the IPC channel (bench only). */
const PROBE = `import { monitorEventLoopDelay } from 'node:perf_hooks';
const h = monitorEventLoopDelay({ resolution: 10 });
h.enable();
setInterval(() => {
  if (process.send) process.send({ eventLoop: { p50: h.percentile(50) / 1e6, p99: h.percentile(99) / 1e6, max: h.max / 1e6 } });
  h.reset();
}, ${SAMPLE_INTERVAL_MS}).unref();
`;

async function startServer(): Promise<ServerInfo> {
  const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-soak-'));
  const probe = join(dataDir, 'eventloop-probe.mjs');
  await writeFile(probe, PROBE);
  const port = await freePort();
  const extra = serverEnvFromProcess();
  const log = join(dataDir, 'server.log');
  const logFile = openSync(log, 'w');
  // SERVER_NODE_ARGS: extra node flags for the server, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  const nodeArgs = (process.env.SERVER_NODE_ARGS ?? '').split(' ').filter((arg) => arg !== '');
  // SERVER_BUILD=dist: the compiled service `npm start` runs (build it first); otherwise the source under tsx.
  const entry = process.env.SERVER_BUILD === 'dist' ? ['dist/main.js'] : ['--import', 'tsx', 'src/main.ts'];
  const [command, args] = serverCommand(process.execPath, [...nodeArgs, '--import', probe, ...entry]);
  const child = spawn(command, args, {
    env: {
      ...process.env,
      HOST: '127.0.0.1',
      PORT: String(port),
      DATA_DIR: dataDir,
      RATE_LIMIT_MAX: String(RATE_LIMIT_MAX),
      LOG_LEVEL: process.env.LOG_LEVEL ?? 'info',
      ...extra,
    },
    stdio: ['ignore', logFile, logFile, 'ipc'],
  });
  const info: ServerInfo = {
    child,
    pid: child.pid ?? 0,
    dataDir,
    adminToken: '',
    baseUrl: '',
    eventLoop: [],
  };
  child.on('message', (message: { eventLoop?: { p50: number; p99: number; max: number } }) => {
    if (message.eventLoop !== undefined) info.eventLoop.push({ at: performance.now(), ...message.eventLoop });
  });
  info.baseUrl = `http://127.0.0.1:${port}`;
  setBaseUrl(info.baseUrl);
  serverBaseUrl = info.baseUrl;
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited: ${readFileSync(log, 'utf8').slice(-2000)}`);
    if (Date.now() > deadline) throw new Error('server did not start within 120 s');
    try {
      const file = JSON.parse(await readFile(join(dataDir, 'server.json'), 'utf8')) as {
        adminToken?: string;
      };
      if (file.adminToken !== undefined) {
        info.adminToken = file.adminToken;
        return info;
      }
    } catch {
      // not written yet
    }
    await sleep(250);
  }
}

function rssMiB(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = /VmRSS:\s+(\d+)/.exec(status)?.[1];
  return kb === undefined ? Number.NaN : Number(kb) / 1024;
}

/** The server's user+system CPU seconds (/proc/<pid>/stat fields 14 and 15, in clock ticks of 100 Hz). */
function cpuSeconds(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? [];
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

/** CPU seconds of each of the server's threads, by thread id (with its name), from /proc/<pid>/task. */
function threadCpu(pid: number): Map<string, { name: string; seconds: number; nice: number }> {
  const threads = new Map<string, { name: string; seconds: number; nice: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
      const name = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'));
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      threads.set(tid, {
        name,
        seconds: (Number(fields[11]) + Number(fields[12])) / 100,
        nice: Number(fields[16]),
      });
    } catch {
      // the thread ended
    }
  }
  return threads;
}

/** Pages of memory the machine's TCP sockets hold now (/proc/net/sockstat), and the kernel's pressure threshold. */
function tcpMemoryPages(): { used: number; pressure: number } {
  const used = Number(
    /TCP: .* mem (\d+)/.exec(readFileSync('/proc/net/sockstat', 'utf8'))?.[1] ?? Number.NaN,
  );
  const pressure = Number(
    readFileSync('/proc/sys/net/ipv4/tcp_mem', 'utf8').trim().split(/\s+/)[1] ?? Number.NaN,
  );
  return { used, pressure };
}

/**
 * One TcpExt counter of /proc/net/netstat (the whole machine's), e.g. ListenOverflows: connections
 * dropped because a listen queue was full (each such client retries its SYN after 1 s, then 3 s).
 */
function tcpExt(name: string): number {
  const lines = readFileSync('/proc/net/netstat', 'utf8').split('\n');
  const names = lines.find((l) => l.startsWith('TcpExt:'))?.split(' ') ?? [];
  const values = lines.filter((l) => l.startsWith('TcpExt:'))[1]?.split(' ') ?? [];
  return Number(values[names.indexOf(name)] ?? Number.NaN);
}

// ---------------------------------------------------------------- accounts

interface Account {
  name: string;
  key: string;
  voiceId: string;
  /** The client address its requests leave from. */
  localAddress: string;
  agent: http.Agent;
  taskIds: string[];
}

async function createAccount(name: string, adminToken: string, localAddress: string): Promise<Account> {
  const agent = agentFor(localAddress, 64);
  json(await call({ method: 'POST', path: '/admin/accounts', key: adminToken, body: { name }, agent }));
  const { key } = json<{ key: string }>(
    await call({ method: 'POST', path: `/admin/accounts/${name}/keys`, key: adminToken, agent }),
  );
  const voice = json<{ id: string }>(
    await call({ method: 'POST', path: '/api/voice', key, body: { name: `${name} narrator` }, agent }),
  );
  return { name, key, voiceId: voice.id, localAddress, agent, taskIds: [] };
}

// ---------------------------------------------------------------- polite traffic

// ---------------------------------------------------------------- live sessions and readers

interface LiveGroup {
  owner: Account;
  taskId: string;
  auth: string;
  generation: number;
  /** Resolves when the current task is processing (or later); replaced on renewal. */
  ready: Promise<void>;
  renewing: boolean;
}

function liveTaskText(): string {
  // Long enough that a reader joining as late as 3 minutes into the loaded phase is still reading
  // when the run ends (at DURATION 600 the audio of DURATION + 60 s of estimate ran out at 480 s:
  // the engine speaks more characters a second than the estimate, so it errs long here).
  const chars = (DURATION_S + 180) * CHARS_PER_AUDIO_S;
  const perContent = SENTENCE.repeat(Math.ceil(1000 / SENTENCE.length)).slice(0, 1000);
  return perContent.repeat(Math.ceil(chars / perContent.length)).slice(0, chars);
}

async function waitStreamable(owner: Account, taskId: string, stop: AbortSignal): Promise<void> {
  while (!stop.aborted) {
    const task = json<{ status: string }>(
      await call({ method: 'GET', path: `/api/tts/generate/${taskId}`, key: owner.key, agent: owner.agent }),
    );
    if (task.status !== 'pending') return;
    await sleep(200, undefined, { signal: stop }).catch(() => undefined);
  }
}

async function newLiveTask(group: LiveGroup, stop: AbortSignal): Promise<void> {
  const text = liveTaskText();
  const contents = [];
  for (let at = 0; at < text.length; at += 1000) {
    contents.push({ text: text.slice(at, at + 1000), voiceId: group.owner.voiceId });
  }
  const task = json<{ id: string }>(
    await call({
      method: 'POST',
      path: '/api/tts/generate',
      key: group.owner.key,
      agent: group.owner.agent,
      body: { contents },
    }),
  );
  const detail = json<{ streamUrl: string }>(
    await call({
      method: 'GET',
      path: `/api/tts/generate/${task.id}?stream=true`,
      key: group.owner.key,
      agent: group.owner.agent,
    }),
  );
  readerStats.tasksCreated++;
  group.taskId = task.id;
  group.auth = new URL(detail.streamUrl).searchParams.get('auth') ?? '';
  group.generation++;
  await waitStreamable(group.owner, task.id, stop);
}

function renew(group: LiveGroup, finishedTaskId: string, stop: AbortSignal): Promise<void> {
  if (group.taskId !== finishedTaskId || group.renewing) return group.ready;
  group.renewing = true;
  group.ready = liveTaskOrPause(group, stop);
  return group.ready;
}

/** newLiveTask, or a 1-s pause when it failed (counted as a reader error; the next 302 retries). */
function liveTaskOrPause(group: LiveGroup, stop: AbortSignal): Promise<void> {
  return newLiveTask(group, stop)
    .catch(async (err: unknown) => {
      bump(readerStats.errors, `live task: ${err instanceof Error ? err.message.slice(0, 100) : 'error'}`);
      await sleep(1000, undefined, { signal: stop }).catch(() => undefined);
    })
    .finally(() => {
      group.renewing = false;
    });
}

/** Reads one response at real-time pace: pauses the socket whenever it is ahead of 40 KB/s. */
function pacedRead(res: IncomingMessage, stop: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const started = performance.now();
    let bytes = 0;
    let timer: NodeJS.Timeout | undefined;
    const onStop = () => {
      clearTimeout(timer);
      res.destroy();
      resolve();
    };
    stop.addEventListener('abort', onStop, { once: true });
    res.on('data', (chunk: Buffer) => {
      bytes += chunk.length;
      readerStats.bytes += chunk.length;
      const ahead = (bytes / READER_BYTES_PER_S) * 1000 - (performance.now() - started);
      if (ahead > 20) {
        res.pause();
        timer = setTimeout(() => res.resume(), ahead);
      }
    });
    res.once('close', () => {
      readerStats.readingMs += performance.now() - started;
    });
    res.once('end', () => {
      stop.removeEventListener('abort', onStop);
      resolve();
    });
    res.once('error', (err) => {
      stop.removeEventListener('abort', onStop);
      if (stop.aborted) resolve();
      else reject(err);
    });
  });
}

function openStream(
  path: string,
  localAddress: string,
): Promise<{ res: IncomingMessage; firstByteMs: number }> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.request(`${serverBaseUrl}${path}`, { agent: false, localAddress }, (res) => {
      resolve({ res, firstByteMs: performance.now() - started });
    });
    req.once('error', reject);
    req.setTimeout(REQUEST_TIMEOUT_MS, () => req.destroy(new Error('no answer within 30 s')));
    req.end();
  });
}

async function reader(
  group: LiveGroup,
  slot: number,
  localAddress: string,
  stop: AbortSignal,
): Promise<void> {
  while (!stop.aborted) {
    await group.ready;
    if (stop.aborted) return;
    const taskId = group.taskId;
    const path = `/api/tts/generate/${taskId}/stream.mp3?auth=${group.auth}&i=soak-${slot}-${group.generation}`;
    readerStats.opens++;
    try {
      const { res, firstByteMs } = await openStream(path, localAddress);
      if (res.statusCode === 200) {
        readerStats.liveOpens++;
        readerStats.firstByte.push(firstByteMs);
        await pacedRead(res, stop);
        continue;
      }
      const body = await new Promise<string>((resolve) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
        res.once('error', () => resolve(''));
      });
      if (res.statusCode === 302) {
        // The task finished: its session is no longer live; the group gets a new task.
        readerStats.redirects++;
        await renew(group, taskId, stop);
      } else if (body.includes('STREAM_NOT_READY')) {
        readerStats.notReady++;
        await sleep(1000, undefined, { signal: stop }).catch(() => undefined);
      } else {
        bump(readerStats.errors, `HTTP ${res.statusCode ?? 0} ${body.slice(0, 100)}`);
        await sleep(1000, undefined, { signal: stop }).catch(() => undefined);
      }
    } catch (err) {
      if (stop.aborted) return;
      bump(readerStats.errors, errorName(err));
      await sleep(1000, undefined, { signal: stop }).catch(() => undefined);
    }
  }
}

// ---------------------------------------------------------------- hostile account

function hostilePreviewBody(voiceId: string, pathological: boolean): unknown {
  const splitter: Record<string, unknown> = { fallbackConfig: { voiceId } };
  // Long placeholder keys up to the config's bytes, 64 marks, 500 lookup entries with 2,000 tags: at the bounds.
  for (let k = 0; k < 1000; k++) splitter[`<${String(k).padStart(4, '0')}${'k'.repeat(94)}>`] = { voiceId };
  splitter.splitterMarks = Array.from({ length: 64 }, (_, m) =>
    String.fromCharCode(0x2200 + 2 * m, 0x2201 + 2 * m),
  );
  const lookupTable: Record<string, unknown> = {};
  for (let e = 0; e < 500; e++)
    lookupTable[`e${e}`] = { tags: [`t${e}`, `u${e}`, [`v${e}`, `w${e}`]], voiceId };
  splitter.lookupTable = lookupTable;
  let text = '';
  if (pathological) {
    // Open characters with no close, and key prefixes that never complete: the worst case of a scan.
    while (text.length < 10_000) text += `${String.fromCharCode(0x2200 + 2 * (text.length % 64))}<0001kkkk `;
  } else {
    for (let u = 0; text.length < 9_800; u++) {
      text += `${String.fromCharCode(0x2200 + 2 * (u % 64))}t${u % 500}${String.fromCharCode(0x2201 + 2 * (u % 64))} words ${'x'.repeat(42)} `;
    }
  }
  return { text: text.slice(0, 10_000), splitter };
}

function hostileTaskBody(voiceId: string): unknown {
  const item = SENTENCE.repeat(Math.ceil(1000 / SENTENCE.length)).slice(0, 1000);
  const count = Math.max(1, Math.min(200, Math.round(HOSTILE_TASK_CHARS / 1000)));
  return { contents: Array.from({ length: count }, () => ({ text: item, voiceId })) };
}

async function hostile(account: Account, stop: AbortSignal): Promise<void> {
  const flood = { taskId: '', auth: '' };
  let refused = false;
  const inFlight = new Map<string, number>();
  /** Sends one request unless 128 of its kind are still unanswered (the flood's own connection cap). */
  const fire = (label: string, options: CallOptions, after?: (answer: Answer) => void) => {
    const kind = label.split(' ')[0] ?? label;
    const open = inFlight.get(kind) ?? 0;
    if (open >= 128) {
      bump(hostileStatus, `${label}: not sent (128 unanswered)`);
      return;
    }
    inFlight.set(kind, open + 1);
    call(options)
      .then((answer) => {
        bump(hostileStatus, `${label}: ${statusOf(answer)}`);
        after?.(answer);
      })
      .catch((err: unknown) => bump(hostileStatus, `${label}: ${errorName(err)}`))
      .finally(() => inFlight.set(kind, (inFlight.get(kind) ?? 1) - 1));
  };
  const { key, agent, voiceId } = account;
  const previews = [hostilePreviewBody(voiceId, false), hostilePreviewBody(voiceId, true)];
  const taskBody = hostileTaskBody(voiceId);
  // The HEAD target: one of its own tasks that is processing (a pending one only answers STREAM_NOT_READY).
  const retarget = setInterval(() => {
    call({ method: 'GET', path: '/api/tts/generate?limit=50&status=processing&stream=true', key, agent })
      .then((answer) => {
        const running = json<{ status: string; id: string; streamUrl?: string }[]>(answer).find(
          (task) => task.status === 'processing' && task.streamUrl !== undefined,
        );
        if (running?.streamUrl === undefined) return;
        flood.taskId = running.id;
        flood.auth = new URL(running.streamUrl).searchParams.get('auth') ?? '';
      })
      .catch(() => undefined);
  }, 3000);
  stop.addEventListener('abort', () => clearInterval(retarget), { once: true });
  await Promise.all([
    openLoop(HOSTILE_GENERATE_RPS, stop, () => {
      if (HOSTILE_GENERATE_UNTIL_REFUSED && refused) return;
      fire(
        'generate',
        { method: 'POST', path: '/api/tts/generate', key, agent, body: taskBody },
        (answer) => {
          if (answer.status === 429) refused = true;
          if (answer.status !== 200 || flood.taskId !== '') return;
          flood.taskId = json<{ id: string }>(answer).id;
          void call({
            method: 'GET',
            path: `/api/tts/generate/${flood.taskId}?stream=true`,
            key,
            agent,
          }).then(
            (detail) => {
              flood.auth =
                new URL(json<{ streamUrl: string }>(detail).streamUrl).searchParams.get('auth') ?? '';
            },
            () => undefined,
          );
        },
      );
    }),
    openLoop(HOSTILE_PREVIEW_RPS, stop, (n) =>
      fire(n % 2 === 0 ? 'preview (200 utterances)' : 'preview (pathological)', {
        method: 'POST',
        path: '/api/splitter/preview',
        key,
        agent,
        body: previews[n % 2],
      }),
    ),
    openLoop(HOSTILE_HEAD_RPS, stop, () => {
      if (flood.auth === '') return;
      fire('HEAD new i', {
        method: 'HEAD',
        path: `/api/tts/generate/${flood.taskId}/stream.mp3?auth=${flood.auth}&i=${randomBytes(8).toString('hex')}`,
        agent,
      });
    }),
  ]);
}

// ---------------------------------------------------------------- polite client

/**
 * Forks the polite client (bench/lib/soak-polite.ts) and starts its traffic with `accounts`; its
 * samples go into `latency` and `politeErrors` as they come. Resolves when it has stopped.
 */
function startPoliteClient(baseUrl: string, accounts: Account[]): Promise<void> {
  const child = fork(new URL('./lib/soak-polite.ts', import.meta.url), {
    execArgv: ['--import', 'tsx'],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  politeClient = child;
  // Its times are epoch ms; ours are performance.now().
  const here = (epochMs: number) => epochMs - performance.timeOrigin;
  const stopped = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.on('message', (report: PoliteReport) => {
      switch (report.type) {
        case 'samples':
          for (const [kind, sentIn, at, ms] of report.samples) {
            const list = latency.get(kind) ?? [];
            list.push({ phase: sentIn, at: here(at), ms });
            latency.set(kind, list);
          }
          for (const [what, n] of report.errors) politeErrors.set(what, (politeErrors.get(what) ?? 0) + n);
          break;
        case 'eventLoop':
          clientEventLoop.polite.push({ at: here(report.at), p99: report.p99, max: report.max });
          break;
        case 'stopped':
          resolve();
          break;
      }
    });
  });
  child.send({
    type: 'start',
    baseUrl,
    apiRps: API_RPS,
    accounts: accounts.map(({ name, key, voiceId, localAddress, taskIds }) => ({
      name,
      key,
      voiceId,
      localAddress,
      taskIds,
    })),
  } satisfies PoliteCommand);
  child.send({ type: 'phase', phase } satisfies PoliteCommand);
  return stopped;
}

// ---------------------------------------------------------------- main

async function main(): Promise<void> {
  pinClient();
  console.log(pinningLine());
  console.log(
    `soak: unloaded ${UNLOADED_S} s, loaded ${DURATION_S} s, ${READERS} readers on ${SESSIONS} sessions, ` +
      `${API_RPS} polite req/s, RATE_LIMIT_MAX=${RATE_LIMIT_MAX}, load generator at niceness ${LOAD_NICENESS}, load average ${loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
  );
  const server = await startServer();
  console.log(`server pid ${server.pid} at ${server.baseUrl}, data in ${server.dataDir}`);
  const rss: { at: number; mib: number; phase: Phase }[] = [];
  const loads: number[] = [];
  const clientLoop = monitorEventLoopDelay({ resolution: 10 });
  clientLoop.enable();
  const sampler = setInterval(() => {
    clientEventLoop.load.push({
      at: performance.now(),
      p99: clientLoop.percentile(99) / 1e6,
      max: clientLoop.max / 1e6,
    });
    clientLoop.reset();
    try {
      rss.push({ at: performance.now(), mib: rssMiB(server.pid), phase });
      loads.push(loadavg()[0] ?? 0);
    } catch {
      // the server is gone
    }
  }, SAMPLE_INTERVAL_MS);
  const stopAll = new AbortController();
  let exitCode: number | null = null;
  server.child.once('exit', (code) => {
    exitCode = code ?? -1;
    if (phase !== 'done') console.error(`server exited early with ${code}`);
    stopAll.abort();
  });
  try {
    const polite: Account[] = [];
    for (let a = 0; a < POLITE_ACCOUNTS; a++) {
      polite.push(await createAccount(`polite${a + 1}`, server.adminToken, `127.0.2.${a + 1}`));
    }
    const villain = await createAccount('hostile', server.adminToken, '127.0.3.1');
    // Seed each polite account with a few tasks for "get task".
    for (const account of polite) {
      for (let t = 0; t < 3; t++) {
        const created = await call({
          method: 'POST',
          path: '/api/tts/generate',
          key: account.key,
          agent: account.agent,
          body: { contents: [{ text: `Seed task ${t}.`, voiceId: account.voiceId }] },
        });
        account.taskIds.push(json<{ id: string }>(created).id);
      }
    }
    // Warm-up (not recorded): the same polite traffic, so the unloaded figures are not the JIT's.
    setPhase('warmup');
    const politeStopped = startPoliteClient(server.baseUrl, polite);
    reniceThisProcess(LOAD_NICENESS);
    stopAll.signal.addEventListener('abort', () => politeClient?.kill(), { once: true });
    await sleep(WARMUP_S * 1000, undefined, { signal: stopAll.signal }).catch(() => undefined);

    // Phase 1: polite traffic only.
    setPhase('unloaded');
    const unloadedStarted = performance.now();
    unloadedStartedAt = unloadedStarted;
    const cpuBefore = cpuSeconds(server.pid);
    const overflowsUnloadedStart = tcpExt('ListenOverflows');
    await sleep(UNLOADED_S * 1000, undefined, { signal: stopAll.signal }).catch(() => undefined);
    const cpuUnloaded = cpuSeconds(server.pid) - cpuBefore;
    const overflowsUnloaded = tcpExt('ListenOverflows') - overflowsUnloadedStart;
    const unloadedSeconds = (performance.now() - unloadedStarted) / 1000;

    // Phase 2: live sessions first (their tasks must reach processing), then the hostile account.
    setPhase('loaded');
    loadedStartedAt = performance.now();
    const cpuLoadedStart = cpuSeconds(server.pid);
    const threadsLoadedStart = threadCpu(server.pid);
    const overflowsLoadedStart = tcpExt('ListenOverflows');
    const pressureLoadedStart = tcpExt('TCPMemoryPressuresChrono');
    // A plain timer, not AbortSignal.timeout: Node 20 can collect an unreferenced timeout signal
    // combined by AbortSignal.any before it fires.
    const loadController = new AbortController();
    const loadTimer = setTimeout(() => loadController.abort(), DURATION_S * 1000);
    stopAll.signal.addEventListener('abort', () => loadController.abort(), { once: true });
    const loadStop = loadController.signal;
    setMaxListeners(0, loadStop);
    const groups: LiveGroup[] = [];
    for (let g = 0; g < Math.ceil(SESSIONS / SESSIONS_PER_TASK); g++) {
      const owner = polite[g % polite.length];
      if (owner === undefined) break;
      const group: LiveGroup = {
        owner,
        taskId: '',
        auth: '',
        generation: 0,
        ready: Promise.resolve(),
        renewing: true,
      };
      group.ready = liveTaskOrPause(group, loadStop);
      groups.push(group);
    }
    const readers: Promise<void>[] = [];
    for (let r = 0; r < READERS; r++) {
      const slot = r % SESSIONS;
      const group = groups[Math.floor(slot / SESSIONS_PER_TASK)];
      if (group === undefined) break;
      // One client address per session's listeners (the stream limit is per address).
      readers.push(reader(group, slot, `127.0.1.${slot + 1}`, loadStop));
    }
    await Promise.all(groups.map((group) => group.ready.catch(() => undefined)));
    console.log(`live tasks streamable after ${((performance.now() - loadedStartedAt) / 1000).toFixed(1)} s`);
    const hostileDone = hostile(villain, loadStop);
    let threadsBefore = threadCpu(server.pid);
    let overflowsBefore = overflowsLoadedStart;
    let synRetriesBefore = tcpExt('TCPSynRetrans');
    let pressureMsBefore = tcpExt('TCPMemoryPressuresChrono');
    const progress = setInterval(() => {
      const seconds = (performance.now() - loadedStartedAt) / 1000;
      // The busiest server threads of the last 15 s (cores; "main" is the event loop).
      const threadsNow = threadCpu(server.pid);
      const busiest = [...threadsNow]
        .map(([tid, t]) => ({
          tid,
          nice: t.nice,
          cores: (t.seconds - (threadsBefore.get(tid)?.seconds ?? 0)) / 15,
        }))
        .sort((a, b) => b.cores - a.cores)
        .slice(0, 5)
        .map(
          (t) =>
            `${t.tid === String(server.pid) ? 'main' : `${t.tid}${t.nice === 0 ? '' : `/n${t.nice}`}`} ${t.cores.toFixed(2)}`,
        )
        .join(', ');
      threadsBefore = threadsNow;
      const overflows = tcpExt('ListenOverflows');
      const dropped = overflows - overflowsBefore;
      overflowsBefore = overflows;
      const tcpMemory = tcpMemoryPages();
      const pressureMs = tcpExt('TCPMemoryPressuresChrono');
      const underPressure = pressureMs - pressureMsBefore;
      pressureMsBefore = pressureMs;
      const synRetries = tcpExt('TCPSynRetrans');
      const retried = synRetries - synRetriesBefore;
      synRetriesBefore = synRetries;
      const last = rss.at(-1)?.mib ?? Number.NaN;
      const loop = server.eventLoop.at(-1);
      // The polite API latency of the requests sent in the last 15 s (answered by now).
      const window = (latency.get('api') ?? [])
        .filter((s) => s.at >= performance.now() - 15_000)
        .map((s) => s.ms);
      console.log(
        `  ${seconds.toFixed(0)} s: readers live opens ${readerStats.liveOpens}, ${(readerStats.bytes / 1e6).toFixed(0)} MB read, ` +
          `polite p99 ${percentile(window, 99).toFixed(0)} ms, listen overflows +${dropped}, SYN retries +${retried}, ` +
          `TCP memory ${((tcpMemory.used / tcpMemory.pressure) * 100).toFixed(0)} % of the pressure threshold (${underPressure} ms under pressure), ` +
          `RSS ${last.toFixed(0)} MiB, event loop p99 ${loop?.p99.toFixed(1) ?? '?'} ms, polite errors ${[...politeErrors.values()].reduce((a, b) => a + b, 0)}, load ${loadavg()[0]?.toFixed(2)}; threads ${busiest}`,
      );
    }, 15_000);
    // The phase lasts DURATION even when every hostile rate is 0 (another process loads the core).
    const phaseOver = new Promise<void>((resolve) =>
      loadStop.aborted ? resolve() : loadStop.addEventListener('abort', () => resolve(), { once: true }),
    );
    await Promise.all([hostileDone, ...readers, phaseOver]);
    clearInterval(progress);
    clearTimeout(loadTimer);
    const loadedSeconds = (performance.now() - loadedStartedAt) / 1000;
    const cpuLoaded = cpuSeconds(server.pid) - cpuLoadedStart;
    const overflowsLoaded = tcpExt('ListenOverflows') - overflowsLoadedStart;
    const pressureLoaded = tcpExt('TCPMemoryPressuresChrono') - pressureLoadedStart;
    const threadsLoaded = [...threadCpu(server.pid)].map(([tid, { name, seconds, nice }]) => ({
      tid,
      name: `${name} nice ${nice}`,
      seconds: seconds - (threadsLoadedStart.get(tid)?.seconds ?? 0),
    }));
    setPhase('done');
    politeClient?.send({ type: 'stop' } satisfies PoliteCommand);
    await politeStopped;
    report({
      server,
      rss,
      loads,
      cpuUnloaded,
      unloadedSeconds,
      cpuLoaded,
      loadedSeconds,
      threadsLoaded,
      overflows: { unloaded: overflowsUnloaded, loaded: overflowsLoaded },
      tcpPressureMs: pressureLoaded,
    });
  } finally {
    phase = 'done';
    politeClient?.kill();
    clearInterval(sampler);
    stopAll.abort();
    if (exitCode === null) {
      server.child.kill('SIGTERM');
      await Promise.race([once(server.child, 'exit'), sleep(15_000)]);
      if (server.child.exitCode === null) server.child.kill('SIGKILL');
    }
    if (KEEP_DATA) console.log(`kept ${server.dataDir} (server.log inside)`);
    else await rm(server.dataDir, { recursive: true, force: true });
  }
}

interface ReportInput {
  server: ServerInfo;
  rss: { at: number; mib: number; phase: Phase }[];
  loads: number[];
  cpuUnloaded: number;
  unloadedSeconds: number;
  cpuLoaded: number;
  loadedSeconds: number;
  /** CPU seconds of each server thread during the loaded phase (the first is the main thread). */
  threadsLoaded: { tid: string; name: string; seconds: number }[];
  /** Connections the machine dropped from full listen queues in each phase. */
  overflows: { unloaded: number; loaded: number };
  /** Milliseconds the machine's TCP stack spent under memory pressure in the loaded phase. */
  tcpPressureMs: number;
}

function report(input: ReportInput): void {
  const { server, rss } = input;
  const fmt = (v: number) => (Number.isNaN(v) ? '—' : v >= 100 ? v.toFixed(0) : v.toFixed(1));
  const values = (kind: string, which: Phase, fromFraction = 0) => {
    const from = loadedStartedAt + fromFraction * input.loadedSeconds * 1000;
    return (latency.get(kind) ?? [])
      .filter((s) => s.phase === which && (which !== 'loaded' || s.at >= from))
      .map((s) => s.ms);
  };
  const verdicts: string[] = [];
  console.log(
    '\nlatency (ms)                      | unloaded n  p50   p99  | loaded n   p50   p99  | p99 ratio | loaded 2nd half p50 / p99',
  );
  const kinds = [...latency.keys()].sort((a, b) => (a === 'api' ? -1 : b === 'api' ? 1 : a.localeCompare(b)));
  for (const kind of kinds) {
    const u = values(kind, 'unloaded');
    const l = values(kind, 'loaded');
    const h = values(kind, 'loaded', 0.5);
    const metric = kind === 'one-shot first byte' ? 'p50' : 'p99';
    const ratio =
      metric === 'p50' ? percentile(l, 50) / percentile(u, 50) : percentile(l, 99) / percentile(u, 99);
    console.log(
      `${kind.padEnd(33)} | ${String(u.length).padStart(6)} ${fmt(percentile(u, 50)).padStart(5)} ${fmt(percentile(u, 99)).padStart(6)} ` +
        `| ${String(l.length).padStart(6)} ${fmt(percentile(l, 50)).padStart(5)} ${fmt(percentile(l, 99)).padStart(6)} | ` +
        `${fmt(ratio).padStart(6)}×   | ${fmt(percentile(h, 50))} / ${fmt(percentile(h, 99))}`,
    );
    if (kind === 'api')
      verdicts.push(`${ratio <= 2 ? 'PASS' : 'FAIL'} polite API p99 loaded/unloaded = ${fmt(ratio)}× (≤ 2×)`);
    if (kind === 'one-shot first byte') {
      const r99 = percentile(l, 99) / percentile(u, 99);
      verdicts.push(
        `${ratio <= 2 ? 'PASS' : 'FAIL'} one-shot first byte p50 loaded/unloaded = ${fmt(ratio)}× (≤ 2×; p99 ratio ${fmt(r99)}×)`,
      );
    }
  }
  if (!latency.has('one-shot first byte')) verdicts.push('FAIL one-shot: no successful one-shot');
  const errorCount = [...politeErrors].filter(([k]) => k.startsWith('loaded') || k.startsWith('unloaded'));
  const total = errorCount.reduce((sum, [, n]) => sum + n, 0);
  console.log(`\npolite errors: ${total}`);
  for (const [what, n] of [...politeErrors].sort((a, b) => b[1] - a[1]).slice(0, 15))
    console.log(`  ${String(n).padStart(6)}  ${what}`);
  verdicts.push(`${total === 0 ? 'PASS' : 'FAIL'} polite errors = ${total} (0)`);

  console.log('\nhostile answers by status:');
  for (const [what, n] of [...hostileStatus].sort((a, b) => a[0].localeCompare(b[0])))
    console.log(`  ${String(n).padStart(7)}  ${what}`);

  const readerErrors = [...readerStats.errors.values()].reduce((a, b) => a + b, 0);
  console.log(
    `\nreaders: ${READERS} on ${SESSIONS} sessions; ${readerStats.opens} opens, ${readerStats.liveOpens} live 200s, ` +
      `${readerStats.redirects} 302 (task finished → new task), ${readerStats.notReady} not ready yet, ${readerErrors} errors; ` +
      `${(readerStats.bytes / 1e6).toFixed(0)} MB read (${(readerStats.bytes / Math.max(1, readerStats.readingMs)).toFixed(1)} KB/s per reader while open); ` +
      `first byte p50 ${fmt(percentile(readerStats.firstByte, 50))} ms, p99 ${fmt(percentile(readerStats.firstByte, 99))} ms; live tasks created ${readerStats.tasksCreated}`,
  );
  for (const [what, n] of readerStats.errors) console.log(`  ${String(n).padStart(6)}  ${what}`);

  const loaded = rss.filter((s) => s.phase === 'loaded');
  const quarter = Math.max(1, Math.floor(loaded.length / 4));
  const mean = (xs: { mib: number }[]) => xs.reduce((sum, s) => sum + s.mib, 0) / Math.max(1, xs.length);
  const first = mean(loaded.slice(0, quarter));
  const lastQ = mean(loaded.slice(-quarter));
  const unloadedRss = mean(rss.filter((s) => s.phase === 'unloaded'));
  const max = Math.max(...rss.map((s) => s.mib));
  console.log(
    `\nserver RSS (MiB): unloaded mean ${fmt(unloadedRss)}; loaded first quarter mean ${fmt(first)}, last quarter mean ${fmt(lastQ)}, ` +
      `end ${fmt(loaded.at(-1)?.mib ?? Number.NaN)}, max ${fmt(max)} (${rss.length} samples every ${SAMPLE_INTERVAL_MS / 1000} s)`,
  );
  verdicts.push(
    `${lastQ <= first * 1.15 ? 'PASS' : 'FAIL'} RSS flat: last quarter ${fmt(lastQ)} vs first quarter ${fmt(first)} MiB (≤ +15 %)`,
  );
  const loop = (which: 'unloaded' | 'loaded') => server.eventLoop.filter((s) => inLoopPhase(s.at, which));
  for (const [client, samples] of Object.entries(clientEventLoop)) {
    for (const which of ['unloaded', 'loaded'] as const) {
      const inPhase = samples.filter((s) => inLoopPhase(s.at, which));
      const p99s = inPhase.map((s) => s.p99);
      console.log(
        `${client} client's event-loop delay ${which}: p99 of 2-s windows median ${fmt(percentile(p99s, 50))} ms, ` +
          `worst window p99 ${fmt(Math.max(...p99s))} ms, max ${fmt(Math.max(...inPhase.map((s) => s.max)))} ms`,
      );
    }
  }
  for (const which of ['unloaded', 'loaded'] as const) {
    const samples = loop(which);
    console.log(
      `event-loop delay ${which}: p99 of 2-s windows median ${fmt(
        percentile(
          samples.map((s) => s.p99),
          50,
        ),
      )} ms, ` +
        `worst window p99 ${fmt(Math.max(...samples.map((s) => s.p99)))} ms, max ${fmt(Math.max(...samples.map((s) => s.max)))} ms`,
    );
  }
  console.log(
    `server CPU: unloaded ${(input.cpuUnloaded / input.unloadedSeconds).toFixed(2)} cores, loaded ${(input.cpuLoaded / input.loadedSeconds).toFixed(2)} cores; ` +
      `machine load average during the run ${fmt(Math.min(...input.loads))}–${fmt(Math.max(...input.loads))} (2 cores); bench process CPU ${(
        (process.cpuUsage().user + process.cpuUsage().system) /
        1e6
      ).toFixed(0)} s`,
  );
  const busiest = [...input.threadsLoaded].sort((a, b) => b.seconds - a.seconds).slice(0, 10);
  console.log(
    `server threads, loaded (cores): ${busiest
      .map(
        (t) =>
          `${t.tid === String(server.pid) ? 'main' : `${t.name}#${t.tid}`} ${(t.seconds / input.loadedSeconds).toFixed(2)}`,
      )
      .join(', ')}`,
  );
  console.log(
    `listen queue overflows (connections dropped, the client retries after 1 s): unloaded ${input.overflows.unloaded}, loaded ${input.overflows.loaded}; ` +
      `TCP memory pressure (the kernel drops segments, senders retransmit) during the loaded phase: ${input.tcpPressureMs} ms`,
  );
  console.log(`\n${verdicts.join('\n')}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error(err);
    process.exit(0);
  },
);
