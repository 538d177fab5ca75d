/**
 * The batch process (batch-process.ts): lowers every thread of itself, then runs what the service
 * sends — synthesis tasks in one pool per worker module, and encoder worker threads — relaying
 * each task's ports and each worker's messages over the IPC channel. Ends when told to close, or
 * when the service is gone.
 */
import { MessageChannel, receiveMessageOnPort, type MessagePort, type Worker } from 'node:worker_threads';
import type { Piscina } from 'piscina';
import { lowerProcessPriority, WORKER_NICENESS } from '../common/worker-priority.js';
import { startModuleWorker } from '../common/worker-url.js';
import { withQueueOptions } from './engines/priority-task-queue.js';
import { createSynthesisPool } from './engines/sentence-workers.js';
import {
  transferable,
  type BridgedPort,
  type FromBatchProcess,
  type ToBatchProcess,
} from './batch-process.js';

// Its niceness is the service's choice (BATCH_PROCESS_NICENESS), given as its one argument.
const niceness = Number(process.argv[2]);
lowerProcessPriority(Number.isInteger(niceness) ? niceness : WORKER_NICENESS);

const pools = new Map<string, Piscina>();
const ports = new Map<number, MessagePort>();
const workers = new Map<number, Worker>();

const send = (message: FromBatchProcess): void => {
  if (process.connected) process.send?.(message);
};

/** The twin of a port the service bridged: what this side gives the worker in its place. */
function twin(id: number): MessagePort {
  const { port1, port2 } = new MessageChannel();
  ports.set(id, port1);
  port1.on('message', (message: unknown) => send({ t: 'port', port: id, message }));
  port1.once('close', () => {
    if (ports.delete(id)) send({ t: 'close-port', port: id });
  });
  return port2;
}

/** `task` with each BridgedPort replaced by a twin (top level, or one level down), those twins and their ids. */
function withTwins(task: unknown): { task: object; transfer: MessagePort[]; ids: number[] } {
  const transfer: MessagePort[] = [];
  const ids: number[] = [];
  const restore = (value: unknown, depth: number): unknown => {
    if (typeof value !== 'object' || value === null || Array.isArray(value)) return value;
    const id = (value as Partial<BridgedPort>).bridgedPort;
    if (typeof id === 'number') {
      const port = twin(id);
      transfer.push(port);
      ids.push(id);
      return port;
    }
    if (depth === 0) return value;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, restore(v, depth - 1)]));
  };
  return { task: restore(task, 2) as object, transfer, ids };
}

function poolFor(workerUrl: string, threads: number): Piscina {
  let pool = pools.get(workerUrl);
  if (pool === undefined) {
    pool = createSynthesisPool(new URL(workerUrl), threads);
    pools.set(workerUrl, pool);
  }
  return pool;
}

function startWorker(id: number, url: string, workerData: unknown): void {
  const worker = startModuleWorker(new URL(url), workerData);
  workers.set(id, worker);
  worker.on('message', (message: unknown) => send({ t: 'worker-message', worker: id, message }));
  worker.on('error', (err) => send({ t: 'worker-error', worker: id, message: err.message }));
  worker.once('exit', (code) => {
    workers.delete(id);
    send({ t: 'worker-exit', worker: id, code });
  });
}

function run(message: Extract<ToBatchProcess, { t: 'run' }>): void {
  const { task, transfer, ids } = withTwins(message.task);
  const settle = (outcome: FromBatchProcess): void => {
    // What the task posted before it ended is relayed before its end (a port's messages and the
    // pool's answer arrive here on different ports, in no set order); then its twins close.
    for (const id of ids) {
      const port = ports.get(id);
      ports.delete(id);
      if (port === undefined) continue;
      for (let m = receiveMessageOnPort(port); m !== undefined; m = receiveMessageOnPort(port))
        send({ t: 'port', port: id, message: m.message });
      port.close();
    }
    send(outcome);
  };
  poolFor(message.workerUrl, message.threads)
    .run(withQueueOptions(task, message.options), { transferList: transfer })
    .then(
      () => settle({ t: 'done', run: message.run }),
      (err: unknown) =>
        settle({ t: 'failed', run: message.run, message: err instanceof Error ? err.message : String(err) }),
    );
}

async function close(): Promise<never> {
  await Promise.all([
    ...[...pools.values()].map((pool) => pool.close({ force: true }).catch(() => undefined)),
    ...[...workers.values()].map((worker) => worker.terminate()),
  ]);
  process.exit(0);
}

process.on('message', (message: ToBatchProcess) => {
  switch (message.t) {
    case 'run':
      run(message);
      return;
    case 'port':
      ports.get(message.port)?.postMessage(message.message, transferable(message.message));
      return;
    case 'close-port': {
      const port = ports.get(message.port);
      ports.delete(message.port);
      port?.close();
      return;
    }
    case 'worker-start':
      startWorker(message.worker, message.url, message.workerData);
      return;
    case 'worker-post': {
      const worker = workers.get(message.worker);
      worker?.postMessage(message.message, transferable(message.message));
      return;
    }
    case 'worker-terminate':
      void workers.get(message.worker)?.terminate();
      return;
    case 'close':
      void close();
  }
});

// The service is gone (crashed, killed): nothing is left to do for it.
process.on('disconnect', () => void close());
