/**
 * The scale-out TaskQueue on BullMQ (Redis), shared by every node.
 *
 * - Dedupe: the job id is the task id, and BullMQ ignores an add whose job already exists (waiting
 *   or active anywhere); finished jobs are removed at once, so a finished task can be queued again.
 * - Lease and heartbeat: a delivered job holds BullMQ's job lock (`lockDuration` = the lease time),
 *   which the worker's lock manager renews every `leaseMs / 2` or sooner. A node that dies or hangs
 *   stops renewing; once the lock has expired, the stalled check (every `leaseMs / 2`, run by any
 *   live worker) puts the job back in the wait list and another worker gets it, with a new token.
 *   `maxStalledCount` is practically unlimited: the runner enforces its own attempt limit in the
 *   database, and BullMQ failing a stalled job would strand its task.
 * - Lock loss: the lease signal aborts when BullMQ reports a failed renewal ('lockRenewalFailed':
 *   the lock expired or another worker holds it) and, as a local watchdog, when no renewal has been
 *   confirmed ('locksRenewed') for a whole lease time (Redis unreachable). The job is then left
 *   alone: it is not ours any more, and the stalled check hands it on.
 * - close(): aborts every lease, then moves each interrupted job back to the wait list with its
 *   lock token (`job.moveToWait`) and throws BullMQ's `WaitingError` so the worker does not
 *   complete it; the next worker (another node, or this one after restart) gets it first.
 * The fencing token of a lease is a fresh random UUID, not BullMQ's lock token (a worker reuses
 * its lock token for the next job it fetches right after a `WaitingError`).
 *
 * Fairness across accounts. The open-source BullMQ has no fair groups, so a
 * job's BullMQ priority is the task's position among its account's unfinished tasks (counted in
 * PostgreSQL when it is queued, bounded by the queued-tasks quota): every account's first task
 * comes before any account's second, so an account flooding the queue delays another account's
 * single task by at most the deliveries already running. Equal priorities are FIFO. A delivery the
 * runner answers ACCOUNT_BUSY (the account is at its cluster-wide concurrency limit, enforced by the
 * database claim) is moved to the delayed set for `busyRetryMs` and then competes again with its
 * priority; meanwhile the worker takes other jobs.
 */
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { DelayedError, Queue, WaitingError, Worker, type Job } from 'bullmq';
import {
  handsBack,
  LeaseLostError,
  QueueClosingError,
  type QueuedTask,
  type TaskHandler,
  type TaskOutcome,
  type TaskQueue,
} from './task-queue.js';

/** What `BullmqTaskQueue` needs. */
export interface BullmqTaskQueueOptions {
  /** redis:// URL; the queue opens its own connections (BullMQ's worker needs blocking ones). */
  redisUrl: string;
  /** Prefix of every Redis key of this deployment (tests: one per test); a trailing ':' is dropped. */
  prefix: string;
  /** Lease time: a holder that stops renewing loses its task this long after its last heartbeat. */
  leaseMs: number;
  /** Receives Redis and BullMQ errors (retried by BullMQ; none is thrown to callers but enqueue's). */
  onError: (err: Error) => void;
  /** BullMQ queue name; defaults to `generation`. */
  queueName?: string;
  /** How long a delivery handed back ACCOUNT_BUSY waits before it is delivered again (default 1 s). */
  busyRetryMs?: number;
}

/** BullMQ's lowest priority (highest number). */
const LOWEST_PRIORITY = 2_097_152;

const JOB_NAME = 'generate';

/** BullMQ's lock manager tolerates no lock shorter than this (it renews at lockDuration / 4). */
const MIN_LEASE_MS = 200;

interface Delivery {
  readonly controller: AbortController;
  /** When a heartbeat last confirmed the lock (or the delivery began). */
  confirmedAt: number;
}

/** A BullMQ Worker that reports when it is done with a job: completed, failed or handed back. */
class ReportingWorker extends Worker {
  onJobDone: (job: Job) => void = () => undefined;

  override async processJob(job: Job, token: string, fetchNextCallback?: () => boolean): Promise<void | Job> {
    try {
      return await super.processJob(job, token, fetchNextCallback);
    } finally {
      this.onJobDone(job);
    }
  }
}

/** TaskQueue shared by every node through BullMQ on Redis; see the file comment for the mechanisms. */
export class BullmqTaskQueue implements TaskQueue {
  private readonly queue: Queue;
  private readonly prefix: string;
  private readonly queueName: string;
  private worker: ReportingWorker | undefined;
  /** The current delivery of each job id on this node. */
  private readonly deliveries = new Map<string, Delivery>();
  /** Jobs whose handler started here and that BullMQ has not finished with yet (`active`). */
  private readonly counted = new Set<Job>();
  private watchdog: NodeJS.Timeout | undefined;
  private closed = false;
  private closing: Promise<void> | undefined;

  constructor(private readonly options: BullmqTaskQueueOptions) {
    if (!(options.leaseMs >= MIN_LEASE_MS)) throw new Error(`leaseMs must be at least ${MIN_LEASE_MS}`);
    this.prefix = options.prefix.replace(/:+$/, '');
    this.queueName = options.queueName ?? 'generation';
    this.queue = new Queue(this.queueName, {
      connection: { url: options.redisUrl },
      prefix: this.prefix,
      defaultJobOptions: { attempts: 1, removeOnComplete: true, removeOnFail: true },
    });
    this.queue.on('error', (err) => this.report(err));
  }

  async enqueue(tasks: readonly QueuedTask[]): Promise<void> {
    if (tasks.length === 0) return;
    const unique = new Map(tasks.map((task) => [task.taskId, task]));
    await this.queue.addBulk(
      [...unique.values()].map(({ taskId, accountId, position }) => ({
        name: JOB_NAME,
        data: { accountId },
        opts: {
          jobId: taskId,
          priority: Math.min(LOWEST_PRIORITY, Math.max(1, Math.floor(position))),
        },
      })),
    );
  }

  async remove(taskId: string): Promise<void> {
    // Refused (0) while a worker holds the job's lock: the runner cancels a running task itself.
    await this.queue.remove(taskId);
  }

  async start(handler: TaskHandler, concurrency: number): Promise<void> {
    if (this.worker !== undefined) throw new Error('the task queue is already started');
    if (this.closed) throw new Error('the task queue is closed');
    if (!Number.isInteger(concurrency) || concurrency < 1) throw new Error('concurrency must be at least 1');
    const leaseMs = this.options.leaseMs;
    const worker = new ReportingWorker(
      this.queueName,
      (job: Job, token?: string) => this.process(job, token ?? '', handler),
      {
        connection: { url: this.options.redisUrl, maxRetriesPerRequest: null },
        prefix: this.prefix,
        concurrency,
        lockDuration: leaseMs,
        stalledInterval: Math.max(MIN_LEASE_MS / 2, Math.round(leaseMs / 2)),
        maxStalledCount: Number.MAX_SAFE_INTEGER,
      },
    );
    worker.onJobDone = (job) => void this.counted.delete(job);
    worker.on('error', (err) => this.report(err));
    worker.on('lockRenewalFailed', (jobIds) => {
      for (const id of jobIds) this.lose(id, 'its lock could not be renewed');
    });
    worker.on('locksRenewed', ({ jobIds }) => {
      const now = Date.now();
      for (const id of jobIds) {
        const delivery = this.deliveries.get(id);
        if (delivery) delivery.confirmedAt = now;
      }
    });
    this.worker = worker;
    this.watchdog = setInterval(() => {
      const now = Date.now();
      for (const [id, delivery] of this.deliveries)
        if (now - delivery.confirmedAt > leaseMs)
          this.lose(id, 'no heartbeat was confirmed for a lease time');
    }, leaseMs / 4);
    this.watchdog.unref();
    await worker.waitUntilReady();
  }

  get active(): number {
    return this.counted.size;
  }

  async close(): Promise<void> {
    this.closing ??= this.shutDown();
    return this.closing;
  }

  private async shutDown(): Promise<void> {
    this.closed = true;
    clearInterval(this.watchdog);
    for (const delivery of this.deliveries.values()) delivery.controller.abort(new QueueClosingError());
    // Waits for the running processors, which hand their jobs back (see process()). With Redis
    // down or still reconnecting BullMQ's close can wait for ever: past CLOSE_GRACE_MS the
    // connections are dropped, so a node always stops (its jobs' locks
    // expire and other nodes take them, as after a crash).
    const worker = this.worker;
    if (worker !== undefined) {
      // (A second close(true) would return BullMQ's pending close: drop the connections instead.)
      await closeWithin(worker.close(), CLOSE_GRACE_MS, () => forceCloseWorker(worker));
    }
    await closeWithin(this.queue.close(), CLOSE_GRACE_MS, () => this.queue.disconnect());
  }

  /** The worker's processor: one delivery of one job. */
  private async process(job: Job, lockToken: string, handler: TaskHandler): Promise<void> {
    const taskId = job.id;
    if (taskId === undefined) return; // every job is added with its task id
    if (this.closed) return this.handBack(job, lockToken);

    // The same job again on this node means the previous delivery's lock was lost.
    this.deliveries.get(taskId)?.controller.abort(new LeaseLostError(taskId, 'it was delivered again'));
    const delivery: Delivery = { controller: new AbortController(), confirmedAt: Date.now() };
    this.deliveries.set(taskId, delivery);
    this.counted.add(job);
    let outcome: TaskOutcome = undefined;
    try {
      outcome = await handler({ taskId, token: randomUUID(), signal: delivery.controller.signal });
    } catch {
      // The handler reports its own errors; the delivery is over either way.
    } finally {
      if (this.deliveries.get(taskId) === delivery) this.deliveries.delete(taskId);
    }
    const reason: unknown = delivery.controller.signal.reason;
    if (reason instanceof QueueClosingError) return this.handBack(job, lockToken);
    // Not ours any more: completing it would fail on the lock anyway; the stalled check hands it on.
    if (reason instanceof LeaseLostError) throw new WaitingError();
    if (handsBack(outcome)) return this.delay(job, lockToken);
    // Returning completes the job, which removes it: the task can be queued again.
  }

  /** Hands a job back for `busyRetryMs` (its account is at its limit, or it could not be claimed); it keeps its priority. */
  private async delay(job: Job, lockToken: string): Promise<never> {
    try {
      await job.moveToDelayed(Date.now() + (this.options.busyRetryMs ?? 1000), lockToken);
    } catch (err) {
      // Lock already lost: the stalled check will put it back instead.
      this.report(err);
      throw new WaitingError();
    }
    throw new DelayedError();
  }

  /** Puts an interrupted job back in the wait list, at the front, and tells BullMQ it was moved. */
  private async handBack(job: Job, lockToken: string): Promise<never> {
    try {
      await job.moveToWait(lockToken);
    } catch (err) {
      // Lock already lost: the stalled check will put it back instead.
      this.report(err);
    }
    throw new WaitingError();
  }

  private lose(jobId: string, detail: string): void {
    this.deliveries.get(jobId)?.controller.abort(new LeaseLostError(jobId, detail));
  }

  private report(err: unknown): void {
    try {
      this.options.onError(err instanceof Error ? err : new Error(String(err)));
    } catch {
      // onError must not throw; if it does, there is nowhere left to report to.
    }
  }
}

/**
 * Drops a worker whose graceful close is stuck. BullMQ's close() first waits for its main loop,
 * which waits for ever on a blocking connection that cannot reconnect; the lock manager it would
 * close afterwards keeps re-arming its renewal timer, which would keep the process alive. So the
 * connections are dropped and the lock manager (not part of BullMQ's typed API) is closed here.
 */
async function forceCloseWorker(worker: Worker): Promise<void> {
  const internals = worker as unknown as { lockManager?: { close?: () => Promise<void> } };
  await internals.lockManager?.close?.();
  await worker.disconnect();
}

/** How long close() waits for BullMQ's graceful close before it forces it. */
const CLOSE_GRACE_MS = 10_000;

/**
 * Waits for `closing` at most `ms`; past that starts `force` and waits for it at most `ms` too
 * (it may hang as well with the server gone). Never throws: a close that failed leaves nothing to do.
 */
async function closeWithin(closing: Promise<void>, ms: number, force: () => Promise<void>): Promise<void> {
  const settled = (p: Promise<void>) =>
    p.then(
      () => true,
      () => true,
    );
  const timer = new AbortController();
  const expiry = sleep(ms, false, { signal: timer.signal }).catch(() => false);
  try {
    if (await Promise.race([settled(closing), expiry])) return;
  } finally {
    timer.abort();
  }
  const again = new AbortController();
  try {
    await Promise.race([settled(force()), sleep(ms, false, { signal: again.signal }).catch(() => false)]);
  } finally {
    again.abort();
  }
}
