/**
 * The generation work queue: which node generates which task, and for how long it may. A delivery
 * is a lease kept alive by a heartbeat; a node that dies or hangs stops renewing it and the task
 * is delivered again elsewhere, with a new fencing token, so the database can refuse the late
 * writes of the holder that lost it. Adapters: in-process (`task-queue.memory.ts`, one node) and
 * BullMQ on Redis (`task-queue.bullmq.ts`, many nodes); one contract suite
 * (`task-queue.contract.test.ts`) runs against both.
 */

/** A task to queue: its id, and the account whose fair share of the queue it takes. */
export interface QueuedTask {
  readonly taskId: string;
  readonly accountId: string;
  /**
   * 1-based position of the task among its account's unfinished tasks, oldest first, as the
   * database counted when it was queued (bounded by the account's queued-tasks quota). The BullMQ
   * adapter orders by it; the in-process adapter serves accounts in turn and needs no hint.
   */
  readonly position: number;
}

/** One delivery of a queued task to this node, under a lease kept alive by a heartbeat. */
export interface TaskLease {
  readonly taskId: string;
  /** Unique per delivery: the fencing token the holder's database writes are conditioned on. */
  readonly token: string;
  /** Aborts when the lease is lost or the queue is closing; the handler should stop soon after. */
  readonly signal: AbortSignal;
}

/**
 * What a handler may answer instead of finishing: the task's account is at its concurrency limit
 * right now, so the task goes back to the queue and is delivered again later (after one of that
 * account's tasks on this node finished, or after a short delay), while other accounts' tasks go on.
 */
export const ACCOUNT_BUSY = 'account-busy';

/**
 * What a handler may answer when it could not take the task up for a passing reason (the database
 * did not answer its claim): the task goes back to the queue like an ACCOUNT_BUSY one and is
 * delivered again later, instead of staying pending until a node restarts.
 */
export const RETRY_LATER = 'retry-later';

/**
 * Works on one delivery. Returning or throwing ends the delivery for good (the task is not
 * delivered again), except returning ACCOUNT_BUSY or RETRY_LATER; errors are the handler's to
 * report — the queue only ends the delivery.
 */
export type TaskHandler = (lease: TaskLease) => Promise<TaskOutcome>;

/** How a delivery ended: done (undefined), or one of the answers that hand the task back. */
export type TaskOutcome = void | typeof ACCOUNT_BUSY | typeof RETRY_LATER;

/** True when the delivery's outcome hands the task back to be delivered again later (every adapter alike). */
export function handsBack(outcome: TaskOutcome): boolean {
  return outcome === ACCOUNT_BUSY || outcome === RETRY_LATER;
}

/**
 * Delivers queued task ids to handlers, at most once at a time per task while leases are valid.
 * A task is delivered again only when its lease expired (the worker died or hung: no heartbeat),
 * its delivery was interrupted by `close()`, or its handler answered ACCOUNT_BUSY or RETRY_LATER.
 *
 * Fair across accounts: within an account tasks go in queue order, and one
 * account's many queued tasks delay another account's task by about one delivery per slot at most.
 */
export interface TaskQueue {
  /** Queues tasks unless already queued or being worked on anywhere (idempotent; never steals a live lease). */
  enqueue(tasks: readonly QueuedTask[]): Promise<void>;
  /** Takes a queued task out before it is delivered (a cancelled task); a task being handled is left alone. */
  remove(taskId: string): Promise<void>;
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
