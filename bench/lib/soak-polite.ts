/**
 * The soak's polite client (bench/soak.ts forks it): the four polite accounts' open-loop API
 * traffic and one-shots, timed in a process of their own, so that the latencies it records are
 * the service's and not the lag of the load generator's event loop (500 paced readers and the
 * hostile floods run in the parent). Talks to the parent over IPC: it is told the accounts, the
 * phase changes and when to stop; it sends its samples and errors every second and its own
 * event-loop delay every 2 s.
 */
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type http from 'node:http';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  agentFor,
  bump,
  call,
  errorName,
  json,
  openLoop,
  SENTENCE,
  setBaseUrl,
  statusOf,
  type CallOptions,
  type Phase,
} from './soak-client.js';

/** What the parent tells: start (accounts and rate), a phase change, stop. */
export type PoliteCommand =
  | { type: 'start'; baseUrl: string; apiRps: number; accounts: PoliteAccountInfo[] }
  | { type: 'phase'; phase: Phase }
  | { type: 'stop' };

/** What this process sends: samples (`at` in epoch ms), error counts since the last report, its event-loop delay, done. */
export type PoliteReport =
  | {
      type: 'samples';
      samples: [kind: string, phase: Phase, at: number, ms: number][];
      errors: [string, number][];
    }
  | { type: 'eventLoop'; at: number; p99: number; max: number }
  | { type: 'stopped' };

/** A polite account as the parent created it. */
export interface PoliteAccountInfo {
  name: string;
  key: string;
  voiceId: string;
  localAddress: string;
  taskIds: string[];
}

interface PoliteAccount extends PoliteAccountInfo {
  agent: http.Agent;
}

const ONE_SHOT_INTERVAL_MS = 2000;

let phase: Phase = 'setup';
/** Polite requests sent and not answered yet (waited for at the stop). */
let inFlight = 0;
let pending: [string, Phase, number, number][] = [];
const errors = new Map<string, number>();

/** Records a latency under the phase its request was sent in (`sentIn`). */
function record(kind: string, ms: number, sentIn: Phase, at: number): void {
  if (sentIn === 'unloaded' || sentIn === 'loaded') pending.push([kind, sentIn, at, ms]);
}

function politeError(kind: string, what: string, sentIn: Phase): void {
  if (sentIn === 'unloaded' || sentIn === 'loaded') bump(errors, `${sentIn} ${kind}: ${what}`);
}

function send(report: PoliteReport): void {
  process.send?.(report);
}

function flush(): void {
  if (pending.length === 0 && errors.size === 0) return;
  send({ type: 'samples', samples: pending, errors: [...errors] });
  pending = [];
  errors.clear();
}

const POLITE_MIX = [
  ['info', 0.2],
  ['list', 0.2],
  ['get', 0.2],
  ['voices', 0.22],
  ['preview', 0.15],
  ['create', 0.03],
] as const;
type PoliteKind = (typeof POLITE_MIX)[number][0];

function pickKind(): PoliteKind {
  let r = Math.random();
  for (const [kind, weight] of POLITE_MIX) {
    r -= weight;
    if (r <= 0) return kind;
  }
  return 'info';
}

let politeSequence = 0;

function politeRequest(account: PoliteAccount): CallOptions {
  const kind = pickKind();
  const { key, agent, voiceId } = account;
  switch (kind) {
    case 'info':
      return { method: 'GET', path: '/api/account/info', key, agent };
    case 'list':
      return { method: 'GET', path: '/api/tts/generate?limit=20', key, agent };
    case 'get': {
      const id = account.taskIds[Math.floor(Math.random() * account.taskIds.length)];
      if (id === undefined) return { method: 'GET', path: '/api/account/info', key, agent };
      return { method: 'GET', path: `/api/tts/generate/${id}`, key, agent };
    }
    case 'voices':
      return { method: 'GET', path: '/api/voice', key, agent };
    case 'preview':
      return {
        method: 'POST',
        path: '/api/splitter/preview',
        key,
        agent,
        body: {
          text: `<A> ${SENTENCE}<B> ${SENTENCE}[calm] ${SENTENCE}<A> ${SENTENCE}`,
          splitter: {
            '<A>': { voiceId },
            '<B>': { voiceId, speechRate: 1.1 },
            splitterMarks: ['[]'],
            lookupTable: { calm: { tags: ['calm'], voiceId } },
            fallbackConfig: { voiceId },
          },
        },
      };
    case 'create':
      return {
        method: 'POST',
        path: '/api/tts/generate',
        key,
        agent,
        body: { contents: [{ text: `A small task, number ${++politeSequence}.`, voiceId }] },
      };
  }
}

function labelOf(options: CallOptions): string {
  if (options.path.startsWith('/api/tts/generate/')) return 'get task';
  if (options.path.startsWith('/api/tts/generate'))
    return options.method === 'POST' ? 'create task' : 'list tasks';
  if (options.path === '/api/splitter/preview') return 'preview';
  if (options.path === '/api/voice') return 'voices';
  return 'account info';
}

async function politeOne(account: PoliteAccount): Promise<void> {
  const options = politeRequest(account);
  const label = labelOf(options);
  const sentIn = phase;
  const at = performance.timeOrigin + performance.now();
  inFlight++;
  try {
    const answer = await call(options);
    if (answer.status >= 200 && answer.status <= 299) {
      record('api', answer.totalMs, sentIn, at);
      record(`api ${label}`, answer.totalMs, sentIn, at);
      // Requests that had to open a connection (more in flight than kept-alive connections).
      if (!answer.reusedSocket) record('api on a new connection', answer.totalMs, sentIn, at);
      if (label === 'create task') {
        account.taskIds.push(json<{ id: string }>(answer).id);
        if (account.taskIds.length > 50) account.taskIds.shift();
      }
    } else {
      politeError(label, `HTTP ${statusOf(answer)}`, sentIn);
    }
  } catch (err) {
    politeError(label, errorName(err), sentIn);
  } finally {
    inFlight--;
  }
}

async function oneShotLoop(accounts: PoliteAccount[], stop: AbortSignal): Promise<void> {
  for (let n = 0; !stop.aborted; n++) {
    const account = accounts[n % accounts.length];
    if (account === undefined) return;
    const started = performance.now();
    const at = performance.timeOrigin + started;
    const sentIn = phase;
    try {
      const answer = await call({
        method: 'POST',
        path: '/api/tts/simple-generate',
        key: account.key,
        agent: account.agent,
        body: {
          text: `This is one shot number ${n}, spoken at once.`,
          voiceId: account.voiceId,
          direct_stream: true,
        },
        timeoutMs: 60_000,
      });
      if (
        answer.status === 200 &&
        answer.headers['content-type'] === 'audio/mpeg' &&
        answer.body.length > 0
      ) {
        record('one-shot first byte', answer.firstByteMs, sentIn, at);
        record('one-shot total', answer.totalMs, sentIn, at);
      } else {
        politeError('one-shot', `HTTP ${statusOf(answer)}`, sentIn);
      }
    } catch (err) {
      politeError('one-shot', errorName(err), sentIn);
    }
    const wait = ONE_SHOT_INTERVAL_MS - (performance.now() - started);
    if (wait > 0) await sleep(wait, undefined, { signal: stop }).catch(() => undefined);
  }
}

function run(start: Extract<PoliteCommand, { type: 'start' }>, stop: AbortSignal): Promise<unknown> {
  setBaseUrl(start.baseUrl);
  const accounts: PoliteAccount[] = start.accounts.map((a) => ({
    ...a,
    agent: agentFor(a.localAddress, 64),
  }));
  return Promise.all([
    openLoop(start.apiRps, stop, (n) => {
      const account = accounts[n % accounts.length];
      if (account !== undefined) void politeOne(account);
    }),
    oneShotLoop(accounts, stop),
  ]);
}

const loop = monitorEventLoopDelay({ resolution: 10 });
loop.enable();
const loopTimer = setInterval(() => {
  send({
    type: 'eventLoop',
    at: performance.timeOrigin + performance.now(),
    p99: loop.percentile(99) / 1e6,
    max: loop.max / 1e6,
  });
  loop.reset();
}, 2000);
const flushTimer = setInterval(flush, 1000);
const stopController = new AbortController();
let traffic: Promise<unknown> = Promise.resolve();

process.on('message', (command: PoliteCommand) => {
  switch (command.type) {
    case 'start':
      traffic = run(command, stopController.signal);
      break;
    case 'phase':
      phase = command.phase;
      break;
    case 'stop':
      stopController.abort();
      // Requests already sent are answered (or time out) and recorded under the phase they were sent in.
      void traffic.then(async () => {
        for (let waited = 0; inFlight > 0 && waited < 35_000; waited += 50) await sleep(50);
        clearInterval(loopTimer);
        clearInterval(flushTimer);
        flush();
        send({ type: 'stopped' });
        process.disconnect();
      });
      break;
  }
});
// The parent went away: nothing left to measure for.
process.on('disconnect', () => process.exit(0));
