/**
 * In-process task queue for one node (the embedded data directory is single-process): one FIFO of
 * ids per account, deduplicated against the ids queued or running, delivered up to the concurrency
 * bound. Fair across accounts: each free slot goes to the waiting account
 * served least recently (one never served first), so a flood of one account delays another
 * account's task by at most one delivery per slot. A delivery answered ACCOUNT_BUSY goes to the back
 * of its account's FIFO and the account is skipped until one of its tasks here finishes (or, when
 * none runs here, for `busyRetryMs`).
 * Leases never expire here — the only holder is this process — and an interrupted delivery is
 * delivered again after restart, when the runner queues its unfinished tasks.
 */
import { randomUUID } from 'node:crypto';
import {
  handsBack,
  QueueClosingError,
  type QueuedTask,
  type TaskHandler,
  type TaskQueue,
} from './task-queue.js';

/** Options of `MemoryTaskQueue`. */
export interface MemoryTaskQueueOptions {
  /** How long an account whose task was handed back busy is skipped when none of its tasks runs here. */
  busyRetryMs?: number;
}

/** The tasks of one account waiting here, and when it was last served. */
interface AccountLine {
  readonly waiting: string[];
  /** Order of the account's last delivery (0 = never served). */
  servedAt: number;
  /** Skipped until one of its tasks here finishes or this timer fires. */
  paused: NodeJS.Timeout | boolean;
}

/** The embedded TaskQueue adapter: one process, no heartbeats needed. */
export class MemoryTaskQueue implements TaskQueue {
  private readonly lines = new Map<string, AccountLine>();
  /** Ids queued or running, with their account: enqueueing one of them again is a no-op. */
  private readonly known = new Map<string, string>();
  private readonly running = new Map<
    string,
    { controller: AbortController; done: Promise<void>; accountId: string }
  >();
  private readonly busyRetryMs: number;
  private handler: TaskHandler | undefined;
  private concurrency = 0;
  private deliveries = 0;
  private closed = false;

  constructor(options: MemoryTaskQueueOptions = {}) {
    this.busyRetryMs = options.busyRetryMs ?? 1000;
  }

  async enqueue(tasks: readonly QueuedTask[]): Promise<void> {
    for (const { taskId, accountId } of tasks) {
      if (this.known.has(taskId)) continue;
      this.known.set(taskId, accountId);
      this.line(accountId).waiting.push(taskId);
    }
    this.pump();
  }

  async remove(taskId: string): Promise<void> {
    const accountId = this.known.get(taskId);
    if (accountId === undefined || this.running.has(taskId)) return;
    const line = this.lines.get(accountId);
    const at = line?.waiting.indexOf(taskId) ?? -1;
    if (line === undefined || at === -1) return;
    line.waiting.splice(at, 1);
    this.known.delete(taskId);
    this.dropIfIdle(accountId);
  }

  async start(handler: TaskHandler, concurrency: number): Promise<void> {
    if (this.handler !== undefined) throw new Error('the task queue is already started');
    if (this.closed) throw new Error('the task queue is closed');
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new Error('concurrency must be at least 1');
    this.handler = handler;
    this.concurrency = concurrency;
    this.pump();
  }

  get active(): number {
    return this.running.size;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const line of this.lines.values()) if (typeof line.paused !== 'boolean') clearTimeout(line.paused);
    const all = [...this.running.values()];
    for (const { controller } of all) controller.abort(new QueueClosingError());
    await Promise.allSettled(all.map((r) => r.done));
  }

  private line(accountId: string): AccountLine {
    let line = this.lines.get(accountId);
    if (line === undefined) {
      line = { waiting: [], servedAt: 0, paused: false };
      this.lines.set(accountId, line);
    }
    return line;
  }

  /** Forgets an account with nothing waiting, nothing running and no pause. */
  private dropIfIdle(accountId: string): void {
    const line = this.lines.get(accountId);
    if (line === undefined || line.waiting.length > 0 || line.paused !== false) return;
    for (const run of this.running.values()) if (run.accountId === accountId) return;
    this.lines.delete(accountId);
  }

  /** The waiting, unpaused account served least recently (ties: the one that came first). */
  private nextAccount(): [string, AccountLine] | undefined {
    let best: [string, AccountLine] | undefined;
    for (const entry of this.lines) {
      const line = entry[1];
      if (line.waiting.length === 0 || line.paused !== false) continue;
      if (best === undefined || line.servedAt < best[1].servedAt) best = entry;
    }
    return best;
  }

  private pump(): void {
    const handler = this.handler;
    if (handler === undefined) return;
    while (!this.closed && this.running.size < this.concurrency) {
      const next = this.nextAccount();
      if (next === undefined) return;
      const [accountId, line] = next;
      const taskId = line.waiting.shift();
      if (taskId === undefined) return;
      line.servedAt = ++this.deliveries;
      const controller = new AbortController();
      const lease = { taskId, token: randomUUID(), signal: controller.signal };
      // A microtask later, so a handler that settles synchronously cannot re-enter this loop.
      const done = Promise.resolve()
        .then(() => handler(lease))
        .catch(() => undefined) // the handler reports its own errors; the delivery is over either way
        .then((outcome) => {
          this.running.delete(taskId);
          if (handsBack(outcome) && !this.closed) this.handBackBusy(taskId, accountId);
          else {
            this.known.delete(taskId);
            this.resume(accountId);
          }
          this.dropIfIdle(accountId);
          this.pump();
        });
      this.running.set(taskId, { controller, done, accountId });
    }
  }

  /**
   * The account is at its limit (or its task could not be claimed): the task waits at the back of
   * its line, the account is skipped until one of its tasks here finishes or `busyRetryMs` passed.
   */
  private handBackBusy(taskId: string, accountId: string): void {
    const line = this.line(accountId);
    line.waiting.push(taskId);
    const runsHere = [...this.running.values()].some((r) => r.accountId === accountId);
    if (runsHere) {
      if (typeof line.paused !== 'boolean') clearTimeout(line.paused);
      line.paused = true; // until one of them finishes (resume)
      return;
    }
    if (typeof line.paused !== 'boolean') return; // already waiting for the timer
    // Its running tasks are elsewhere (left processing by a stopped process): look again later.
    const timer = setTimeout(() => this.resume(accountId), this.busyRetryMs);
    timer.unref();
    line.paused = timer;
  }

  private resume(accountId: string): void {
    const line = this.lines.get(accountId);
    if (line === undefined || line.paused === false) return;
    if (typeof line.paused !== 'boolean') clearTimeout(line.paused);
    line.paused = false;
    this.dropIfIdle(accountId);
    this.pump();
  }
}
