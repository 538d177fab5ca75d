/**
 * Wake-up latency of a Node main thread that shares its core with background worker threads:
 * `npx tsx bench/wakeup-latency.ts`, a measurement of the machine's scheduler rather than of the
 * service, and no test. Environment: SERVER_CPUS and CLIENT_CPUS (taskset lists, default 1 and 0
 * on a machine with two cores or more), PINGS (2000 per case), BURNERS (2).
 *
 * A small server process (plain node:net, no service code) answers one-byte pings over TCP while
 * background burners, at niceness 10 as the service's batch threads are, do one of:
 *  - none: there are no burners;
 *  - spin: worker threads of the server burn CPU without telling the main thread anything;
 *  - post: the same, and each posts a small message to the main thread every ~3 ms (as batch
 *    synthesis, encoding and the database worker do);
 *  - post-sparse: the same, a message every ~30 ms;
 *  - proc-spin, proc-post: the burners are child processes instead of threads (same session, so
 *    the same autogroup), posting over their IPC channel;
 *  - proc-post-idle: child processes started under `chrt --idle 0`, so every thread of theirs is
 *    SCHED_IDLE, posting every ~3 ms;
 *  - proc-post-group: child processes in a session of their own (a separate autogroup) whose
 *    autogroup niceness is 19 (`/proc/self/autogroup`), posting every ~3 ms.
 * The client pings every 2 ms and prints the round trip's p50, p90, p99 and maximum per case.
 * Why it exists: on one saturated core the soak's main thread spends its long turns preempted,
 * waiting for the CPU (docs/reliability.md, Load and soak); this shows how much a kernel adds on
 * its own when lower-priority work keeps waking a main thread, and how much depends on where that
 * work runs (threads of the process, other processes, another scheduling group).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import net from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { pinByDefault, pinClient, pinningLine, serverCommand } from './lib/pinning.js';
import { percentile } from './lib/server.js';

const PINGS = Number(process.env.PINGS ?? 2000);
const BURNERS = Number(process.env.BURNERS ?? 2);
/** Each case: its burners, threads or processes (in a group of their own), and how often each posts (0: never). */
const CASES = [
  { name: 'none', burners: 0, kind: 'thread', postEveryMs: 0 },
  { name: 'spin', burners: BURNERS, kind: 'thread', postEveryMs: 0 },
  { name: 'post', burners: BURNERS, kind: 'thread', postEveryMs: 3 },
  { name: 'post-sparse', burners: BURNERS, kind: 'thread', postEveryMs: 30 },
  { name: 'proc-spin', burners: BURNERS, kind: 'process', postEveryMs: 0 },
  { name: 'proc-post', burners: BURNERS, kind: 'process', postEveryMs: 3 },
  { name: 'proc-post-idle', burners: BURNERS, kind: 'idle', postEveryMs: 3 },
  { name: 'proc-post-group', burners: BURNERS, kind: 'group', postEveryMs: 3 },
] as const;
type BurnerKind = (typeof CASES)[number]['kind'];

/**
 * The server: `burners` of `kind` burning CPU, posting every `postEveryMs` (0: never); then it
 * listens. A burner process leaves with its parent (its IPC channel closes).
 */
const SERVER = `
const net = require('node:net');
const { Worker } = require('node:worker_threads');
const { spawn } = require('node:child_process');
const [burners, kind, postEveryMs] = process.argv.slice(1);
const burn = (post, lower) => \`
const { setPriority } = require('node:os');
\${lower}
let last = Date.now();
let x = 0;
function burn() {
  const start = Date.now();
  while (Date.now() - start < 3) x += Math.sqrt(x + 1);
  if (\${postEveryMs} > 0 && Date.now() - last >= \${postEveryMs}) { last = Date.now(); \${post}; }
  setImmediate(burn);
}
burn();\`;
const thread = burn(
  "require('node:worker_threads').parentPort.postMessage(x)",
  "setPriority(Number(require('node:fs').readlinkSync('/proc/thread-self').split('/').pop()), 10);",
);
const proc = burn(
  'process.send(x)',
  "process.on('disconnect', () => process.exit()); " +
    (kind === 'group'
      ? "try { require('node:fs').writeFileSync('/proc/self/autogroup', '19'); } catch (err) { console.error('no autogroup niceness here:', err.message); } "
      : '') +
    'setPriority(10);',
);
const children = [];
for (let i = 0; i < Number(burners); i++) {
  if (kind === 'thread') new Worker(thread, { eval: true }).on('message', () => {});
  else {
    const command = kind === 'idle' ? ['chrt', '--idle', '0', process.execPath] : [process.execPath];
    const child = spawn(command[0], [...command.slice(1), '-e', proc], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], detached: kind === 'group' });
    child.on('message', () => {}).on('error', (err) => { console.error(\`cannot start a burner: \${err.message}\`); process.exit(1); });
    children.push(child);
  }
}
process.on('SIGTERM', () => { for (const child of children) child.kill('SIGKILL'); process.exit(0); });
const server = net.createServer((socket) => { socket.setNoDelay(true); socket.on('data', (d) => socket.write(d)); });
server.listen(0, '127.0.0.1', () => console.log(server.address().port));
`;

async function startServer(
  burners: number,
  kind: BurnerKind,
  postEveryMs: number,
): Promise<{ child: ChildProcess; port: number }> {
  const [command, args] = serverCommand(process.execPath, [
    '-e',
    SERVER,
    String(burners),
    kind,
    String(postEveryMs),
  ]);
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  const exited = once(child, 'exit').then(([code]) => {
    throw new Error(`the echo server exited (${String(code)}) before listening`);
  });
  const [line] = (await Promise.race([once(child.stdout, 'data'), exited])) as [Buffer];
  exited.catch(() => undefined);
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
    `wake-up latency, ${PINGS} pings per case, ${BURNERS} burners at niceness 10; ${pinningLine()}`,
  );
  console.log('case            | p50 ms | p90 ms | p99 ms | max ms');
  for (const { name, burners, kind, postEveryMs } of CASES) {
    const { child, port } = await startServer(burners, kind, postEveryMs);
    try {
      await sleep(500);
      const t = await ping(port);
      const cell = (q: number) => percentile(t, q).toFixed(2).padStart(6);
      console.log(
        `${name.padEnd(15)} | ${cell(50)} | ${cell(90)} | ${cell(99)} | ${t.at(-1)!.toFixed(2).padStart(6)}`,
      );
    } finally {
      child.kill();
      await once(child, 'exit');
    }
  }
}

await main();
