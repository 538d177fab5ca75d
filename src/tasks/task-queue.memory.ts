/**
 * In-process task queue for one node (the embedded data directory is single-process): a FIFO of
 * ids, deduplicated against the ids queued or running, delivered up to the concurrency bound.
 * Leases never expire here — the only holder is this process — and an interrupted delivery is
 * delivered again after restart, when the runner queues its unfinished tasks.
 */
import { randomUUID } from 'node:crypto';
import { QueueClosingError, type TaskHandler, type TaskQueue } from './task-queue.js';

/** The embedded TaskQueue adapter: one process, no heartbeats needed. */
export class MemoryTaskQueue implements TaskQueue {
  private readonly waiting: string[] = [];
  /** Ids queued or running: enqueueing one of them again is a no-op. */
  private readonly known = new Set<string>();
  private readonly running = new Map<string, { controller: AbortController; done: Promise<void> }>();
  private handler: TaskHandler | undefined;
  private concurrency = 0;
  private closed = false;

  async enqueue(taskIds: readonly string[]): Promise<void> {
    for (const id of taskIds) {
      if (this.known.has(id)) continue;
      this.known.add(id);
      this.waiting.push(id);
    }
    this.pump();
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
    const all = [...this.running.values()];
    for (const { controller } of all) controller.abort(new QueueClosingError());
    await Promise.allSettled(all.map((r) => r.done));
  }

  private pump(): void {
    const handler = this.handler;
    if (handler === undefined) return;
    while (!this.closed && this.running.size < this.concurrency) {
      const taskId = this.waiting.shift();
      if (taskId === undefined) return;
      const controller = new AbortController();
      const lease = { taskId, token: randomUUID(), signal: controller.signal };
      // A microtask later, so a handler that settles synchronously cannot re-enter this loop.
      const done = Promise.resolve()
        .then(() => handler(lease))
        .catch(() => undefined) // the handler reports its own errors; the delivery is over either way
        .finally(() => {
          this.running.delete(taskId);
          this.known.delete(taskId);
          this.pump();
        });
      this.running.set(taskId, { controller, done });
    }
  }
}
