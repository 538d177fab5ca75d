/**
 * The generation work queue: which node generates which task, and for how long it may. A delivery
 * is a lease kept alive by a heartbeat; a node that dies or hangs stops renewing it and the task
 * is delivered again elsewhere, with a new fencing token, so the database can refuse the late
 * writes of the holder that lost it. Adapters: in-process (`task-queue.memory.ts`, one node) and
 * BullMQ on Redis (`task-queue.bullmq.ts`, many nodes); one contract suite
 * (`task-queue.contract.test.ts`) runs against both.
 */

/** One delivery of a queued task to this node, under a lease kept alive by a heartbeat. */
export interface TaskLease {
  readonly taskId: string;
  /** Unique per delivery: the fencing token the holder's database writes are conditioned on. */
  readonly token: string;
  /** Aborts when the lease is lost or the queue is closing; the handler should stop soon after. */
  readonly signal: AbortSignal;
}

/**
 * Works on one delivery. Returning or throwing ends the delivery for good (the task is not
 * delivered again); errors are the handler's to report — the queue only ends the delivery.
 */
export type TaskHandler = (lease: TaskLease) => Promise<void>;

/**
 * Delivers queued task ids to handlers, at most once at a time per task while leases are valid.
 * A task is delivered again only when its lease expired (the worker died or hung: no heartbeat) or
 * its delivery was interrupted by `close()`.
 */
export interface TaskQueue {
  /** Queues tasks unless already queued or being worked on anywhere (idempotent; never steals a live lease). */
  enqueue(taskIds: readonly string[]): Promise<void>;
  /** Starts delivering to `handler`, at most `concurrency` at once on this node. */
  start(handler: TaskHandler, concurrency: number): Promise<void>;
  /** Tasks being handled on this node now. */
  readonly active: number;
  /**
   * Stops taking work, aborts running handlers, waits for them; tasks interrupted this way are
   * delivered again (to another node, or after restart). Releases connections.
   */
  close(): Promise<void>;
}

/** The abort reason of a lease whose holder lost it (expired or taken over by another delivery). */
export class LeaseLostError extends Error {
  constructor(taskId: string, detail = 'the lease was lost') {
    super(`task ${taskId}: ${detail}`);
    this.name = 'LeaseLostError';
  }
}

/** The abort reason of leases interrupted because their queue is closing. */
export class QueueClosingError extends Error {
  constructor() {
    super('the task queue is closing');
    this.name = 'QueueClosingError';
  }
}
