/**
 * Batch audio work in a process of its own, every thread of it at a lower priority
 * (BATCH_PROCESS_NICENESS): the synthesis and MP3 encoding of long tasks. Threads of the service's
 * own process, however low their priority, cost the event loop wake-ups and the collections of
 * V8's helper threads, which every isolate of a process shares at normal priority
 * (docs/reliability.md, Load and soak); a process of its own keeps both away from it.
 *
 * The process hosts the same code as the service would in its threads: the embedded engines'
 * batch synthesis pools (piscina, the fair queue, the worker modules) and batch encoder workers.
 * A synthesis task's message ports and an encoder worker's messages are relayed over the IPC
 * channel, so the code on this side is the same whether the work runs here or there. Interactive
 * work (one-shots, short tasks) never goes there.
 */
import type { ChildProcess } from 'node:child_process';
import { EventEmitter } from 'node:events';
import type { MessagePort, TransferListItem } from 'node:worker_threads';
import { WORKER_NICENESS } from '../common/worker-priority.js';
import { endChildProcess, forkModule, siblingModuleUrl } from '../common/worker-url.js';
import type { SynthesisQueueOptions } from './engines/priority-task-queue.js';

/** Main → child. */
export type ToBatchProcess =
  | {
      t: 'run';
      run: number;
      workerUrl: string;
      threads: number;
      task: unknown;
      options: SynthesisQueueOptions;
    }
  | { t: 'port'; port: number; message: unknown }
  | { t: 'close-port'; port: number }
  | { t: 'worker-start'; worker: number; url: string; workerData: unknown }
  | { t: 'worker-post'; worker: number; message: unknown }
  | { t: 'worker-terminate'; worker: number }
  | { t: 'close' };

/** Child → main. */
export type FromBatchProcess =
  | { t: 'done'; run: number }
  | { t: 'failed'; run: number; message: string }
  | { t: 'port'; port: number; message: unknown }
  | { t: 'close-port'; port: number }
  | { t: 'worker-message'; worker: number; message: unknown }
  | { t: 'worker-error'; worker: number; message: string }
  | { t: 'worker-exit'; worker: number; code: number };

/** Where a bridged MessagePort stood in a task: replaced by this, the other side makes a port for it. */
export interface BridgedPort {
  bridgedPort: number;
}

/**
 * Runs `task` (carrying `ports`, as piscina's transferList would move them) in the pool of
 * `threads` threads running `workerUrl`; resolves when the task is done, rejects with its error.
 */
export type SynthesisRun = (
  workerUrl: URL,
  threads: number,
  task: object,
  options: SynthesisQueueOptions,
  ports: readonly MessagePort[],
) => Promise<void>;

/** Runs batch synthesis tasks somewhere else than this process's threads. */
export interface BatchSynthesisHost {
  run: SynthesisRun;
}

/** What the encoder pool uses of a worker thread. */
export interface WorkerLike {
  postMessage(message: unknown, transfer?: readonly TransferListItem[]): void;
  on(event: 'message', listener: (message: unknown) => void): this;
  on(event: 'error', listener: (err: Error) => void): this;
  once(event: 'exit', listener: (code: number) => void): this;
  terminate(): Promise<number>;
}

/** Starts worker threads somewhere else than this process. */
export interface BatchWorkerHost {
  startWorker(url: URL, workerData: unknown): WorkerLike;
}

const CHILD_URL = siblingModuleUrl(import.meta.url, 'batch-process.child');

/** How long closing waits for the child to end its pools (its own close waits for running pieces). */
const CLOSE_WAIT_MS = 15_000;

interface Run {
  resolve(): void;
  reject(err: Error): void;
  ports: number[];
}

/** The batch process: started on first use, started again after it died. */
export class BatchProcess implements BatchSynthesisHost, BatchWorkerHost {
  /** `niceness`: of every thread of the process (0–19; default WORKER_NICENESS, the batch threads' own). */
  constructor(private readonly niceness = WORKER_NICENESS) {}

  private child: ChildProcess | undefined;
  private readonly runs = new Map<number, Run>();
  private readonly ports = new Map<number, MessagePort>();
  private readonly workers = new Map<number, RemoteWorker>();
  private nextRun = 1;
  private nextPort = 1;
  private nextWorker = 1;
  private closed = false;

  /** The process id of the child while it runs (tests check its threads' priority). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Synthesis tasks sent to the child so far (tests check which pieces went there). */
  get runsSent(): number {
    return this.nextRun - 1;
  }

  readonly run: SynthesisRun = (workerUrl, threads, task, options, ports) => {
    if (this.closed) return Promise.reject(new Error('the batch process is closed'));
    this.started();
    const ids = new Map(ports.map((port) => [port, this.bridge(port)]));
    const run = this.nextRun++;
    return new Promise<void>((resolve, reject) => {
      this.runs.set(run, { resolve, reject, ports: [...ids.values()] });
      this.holdOpen();
      this.send({ t: 'run', run, workerUrl: workerUrl.href, threads, task: withBridges(task, ids), options });
    });
  };

  startWorker(url: URL, workerData: unknown): WorkerLike {
    const id = this.nextWorker++;
    const worker = new RemoteWorker(
      (message) => this.send({ t: 'worker-post', worker: id, message }),
      () => this.send({ t: 'worker-terminate', worker: id }),
    );
    if (this.closed) {
      queueMicrotask(() => worker.exited(1, new Error('the batch process is closed')));
      return worker;
    }
    this.started();
    this.workers.set(id, worker);
    this.holdOpen();
    this.send({ t: 'worker-start', worker: id, url: url.href, workerData });
    return worker;
  }

  async close(): Promise<void> {
    this.closed = true;
    const child = this.child;
    if (child === undefined) return;
    await endChildProcess(child, () => this.send({ t: 'close' }), CLOSE_WAIT_MS);
  }

  private started(): ChildProcess {
    if (this.child !== undefined) return this.child;
    const child = forkModule(CHILD_URL, [String(this.niceness)], 0, {
      stderr: 'inherit',
      serialization: 'advanced',
    });
    this.child = child;
    child.on('message', (message: FromBatchProcess) => this.receive(message));
    // A child that could not be started never exits: what was sent to it fails here instead.
    child.on('error', (err) => {
      if (child.pid === undefined) this.lost(child, err.message);
    });
    child.once('exit', (code, signal) => this.lost(child, signal ?? `code ${code ?? '?'}`));
    // An idle child keeps no one waiting: the channel holds the event loop only while work is out.
    child.unref();
    child.channel?.unref();
    return child;
  }

  /** The child is gone: its runs fail and its workers exit, as threads that died would. */
  private lost(child: ChildProcess, how: string): void {
    if (this.child === child) this.child = undefined;
    const err = new Error(`the batch process exited (${how})`);
    for (const [id, run] of this.runs) {
      this.runs.delete(id);
      this.closePorts(run.ports);
      run.reject(err);
    }
    for (const [id, worker] of this.workers) {
      this.workers.delete(id);
      worker.exited(1, err);
    }
  }

  /**
   * The child and its channel hold the event loop while runs or workers are out, so that their
   * answers, or the child's exit, are waited for; an idle child holds nothing.
   */
  private holdOpen(): void {
    const child = this.child;
    if (child === undefined) return;
    if (this.runs.size > 0 || this.workers.size > 0) {
      child.ref();
      child.channel?.ref();
    } else {
      child.unref();
      child.channel?.unref();
    }
  }

  private send(message: ToBatchProcess): void {
    const child = this.child;
    if (child?.connected !== true) return;
    child.send(message, (err) => {
      if (err !== null && err !== undefined) child.kill('SIGKILL'); // 'exit' fails what was out
    });
  }

  private receive(message: FromBatchProcess): void {
    switch (message.t) {
      case 'port':
        this.ports.get(message.port)?.postMessage(message.message, transferable(message.message));
        return;
      case 'close-port':
        this.closePorts([message.port]);
        return;
      case 'worker-message':
        this.workers.get(message.worker)?.emit('message', message.message);
        return;
      case 'worker-error':
        this.workers.get(message.worker)?.emit('error', new Error(message.message));
        return;
      case 'worker-exit': {
        const worker = this.workers.get(message.worker);
        this.workers.delete(message.worker);
        this.holdOpen();
        worker?.exited(message.code);
        return;
      }
      case 'done':
      case 'failed': {
        const run = this.runs.get(message.run);
        if (run === undefined) return;
        this.runs.delete(message.run);
        // The child relayed everything the task posted before this: its ports have done their part
        // (a port's peer still gets what was posted to it before it closed).
        this.closePorts(run.ports);
        this.holdOpen();
        if (message.t === 'done') run.resolve();
        else run.reject(new Error(message.message));
      }
    }
  }

  /** Relays a port this side would have transferred: its messages go to the child's twin and back. */
  private bridge(port: MessagePort): number {
    const id = this.nextPort++;
    this.ports.set(id, port);
    port.on('message', (message: unknown) => this.send({ t: 'port', port: id, message }));
    port.once('close', () => {
      if (this.ports.delete(id)) this.send({ t: 'close-port', port: id });
    });
    return id;
  }

  private closePorts(ids: readonly number[]): void {
    for (const id of ids) {
      const port = this.ports.get(id);
      this.ports.delete(id);
      port?.close();
    }
  }
}

/** A worker thread of the batch process, as this side sees it. */
class RemoteWorker extends EventEmitter implements WorkerLike {
  private exitCode: number | undefined;
  private readonly whenExited: Promise<number>;
  private markExited: (code: number) => void = () => {};

  constructor(
    /** Sends a message to the thread: copied over the channel, so nothing is moved. */
    private readonly post: (message: unknown) => void,
    private readonly end: () => void,
  ) {
    super();
    this.whenExited = new Promise((resolve) => (this.markExited = resolve));
  }

  postMessage(message: unknown): void {
    if (this.exitCode === undefined) this.post(message);
  }

  terminate(): Promise<number> {
    if (this.exitCode === undefined) this.end();
    return this.whenExited;
  }

  /** Its thread ended (or the whole process did: `err`, reported first as a thread's error would be). */
  exited(code: number, err?: Error): void {
    if (this.exitCode !== undefined) return;
    this.exitCode = code;
    if (err !== undefined && this.listenerCount('error') > 0) this.emit('error', err);
    this.emit('exit', code);
    this.markExited(code);
  }
}

/** `task` with each of its ports (top level, or one level down) replaced by a BridgedPort. */
export function withBridges(task: object, ids: ReadonlyMap<MessagePort, number>): unknown {
  const replace = (value: unknown, depth: number): unknown => {
    const id = ids.get(value as MessagePort);
    if (id !== undefined) return { bridgedPort: id } satisfies BridgedPort;
    if (depth === 0 || typeof value !== 'object' || value === null || Array.isArray(value)) return value;
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, replace(v, depth - 1)]));
  };
  return replace(task, 2);
}

/** The buffers a relayed message owns whole (typed arrays among its fields): moved, not copied. */
export function transferable(message: unknown): TransferListItem[] {
  if (typeof message !== 'object' || message === null) return [];
  const buffers = new Set<ArrayBuffer>();
  for (const value of Object.values(message)) {
    if (!ArrayBuffer.isView(value)) continue;
    const { buffer } = value;
    if (buffer instanceof ArrayBuffer && value.byteOffset === 0 && value.byteLength === buffer.byteLength)
      buffers.add(buffer);
  }
  return [...buffers];
}
