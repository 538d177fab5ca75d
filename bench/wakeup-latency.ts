/**
 * Wake-up latency of a Node main thread that shares its core with background worker threads:
 * `npx tsx bench/wakeup-latency.ts`, a measurement of the machine's scheduler rather than of the
 * service, and no test. Environment: SERVER_CPUS and CLIENT_CPUS (taskset lists, default 1 and 0
 * on a machine with two cores or more), PINGS (2000 per case), WORKERS (2).
 *
 * A small server process (plain node:net, no service code) answers one-byte pings over TCP while
 * its worker threads, at niceness 10 as the service's batch threads are, do one of:
 *  - none: there are no workers;
 *  - spin: burn CPU without telling the main thread anything;
 *  - post: burn CPU and post a small message to the main thread every ~3 ms (as batch synthesis,
 *    encoding and the database worker do);
 *  - post-sparse: the same, a message every ~30 ms.
 * The client pings every 2 ms and prints the round trip's p50, p90, p99 and maximum per case.
 * Why it exists: on one saturated core the soak's main thread spends its long turns preempted,
 * waiting for the CPU (docs/reliability.md, Load and soak); this shows how much a kernel adds on
 * its own when lower-priority threads keep waking a main thread.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { pinByDefault, pinClient, pinningLine, serverCommand } from './lib/pinning.js';
import { percentile } from './lib/server.js';

const PINGS = Number(process.env.PINGS ?? 2000);
const WORKERS = Number(process.env.WORKERS ?? 2);
/** Each case: its worker threads, and how often each posts to the main thread (0: never). */
const CASES = [
  { name: 'none', workers: 0, postEveryMs: 0 },
  { name: 'spin', workers: WORKERS, postEveryMs: 0 },
  { name: 'post', workers: WORKERS, postEveryMs: 3 },
  { name: 'post-sparse', workers: WORKERS, postEveryMs: 30 },
];

/** The server: `workers` threads burning CPU, posting every `postEveryMs` (0: never); then it listens. */
const SERVER = `
const net = require('node:net');
const { Worker } = require('node:worker_threads');
const [workers, postEveryMs] = process.argv.slice(1).map(Number);
const worker = \`
const { parentPort, workerData } = require('node:worker_threads');
const { readlinkSync } = require('node:fs');
const { setPriority } = require('node:os');
setPriority(Number(readlinkSync('/proc/thread-self').split('/').pop()), 10);
let last = Date.now();
let x = 0;
function burn() {
  const start = Date.now();
  while (Date.now() - start < 3) x += Math.sqrt(x + 1);
  if (workerData > 0 && Date.now() - last >= workerData) { last = Date.now(); parentPort.postMessage(x); }
  setImmediate(burn);
}
burn();\`;
for (let i = 0; i < workers; i++) new Worker(worker, { eval: true, workerData: postEveryMs }).on('message', () => {});
const server = net.createServer((socket) => { socket.setNoDelay(true); socket.on('data', (d) => socket.write(d)); });
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

async function startServer(
  workers: number,
  postEveryMs: number,
): Promise<{ child: ChildProcess; port: number }> {
  const [command, args] = serverCommand(process.execPath, [
    '-e',
    SERVER,
    String(workers),
    String(postEveryMs),
  ]);
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const [line] = (await once(child.stdout, 'data')) as [Buffer];
  return { child, port: Number(line.toString().trim()) };
}

/** Round trips (ms) of PINGS one-byte pings, one every 2 ms. */
async function ping(port: number): Promise<number[]> {
  const socket = net.connect(port, '127.0.0.1');
  socket.setNoDelay(true);
  await once(socket, 'connect');
  const times: number[] = [];
  for (let i = 0; i < PINGS; i++) {
    const sent = process.hrtime.bigint();
    socket.write('x');
    await once(socket, 'data');
    times.push(Number(process.hrtime.bigint() - sent) / 1e6);
    await sleep(2);
  }
  socket.destroy();
  return times.sort((a, b) => a - b);
}

async function main(): Promise<void> {
  pinByDefault('1', '0');
  pinClient();
  console.log(
    `wake-up latency, ${PINGS} pings per case, ${WORKERS} workers at niceness 10; ${pinningLine()}`,
  );
  console.log('case        | p50 ms | p90 ms | p99 ms | max ms');
  for (const { name, workers, postEveryMs } of CASES) {
    const { child, port } = await startServer(workers, postEveryMs);
    try {
      await sleep(500);
      const t = await ping(port);
      const cell = (q: number) => percentile(t, q).toFixed(2).padStart(6);
      console.log(
        `${name.padEnd(11)} | ${cell(50)} | ${cell(90)} | ${cell(99)} | ${t.at(-1)!.toFixed(2).padStart(6)}`,
      );
    } finally {
      child.kill();
      await once(child, 'exit');
    }
  }
}

await main();
