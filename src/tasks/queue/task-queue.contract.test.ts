/**
 * The TaskQueue contract, run against every adapter: the in-process one and BullMQ on the real
 * Redis test server (one key prefix per test, so parallel test files never see each other's jobs).
 * Tests that need several nodes or lease expiry run where the adapter has them (capability flags):
 * the in-process adapter is a single process, whose leases never expire.
 * Leases are short (1 s) so expiry tests finish quickly; every wait has a deadline, and no test
 * asserts how long anything took.
 */
import assert from 'node:assert/strict';
import { afterEach, beforeEach, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { WaitingError, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { freshRedis } from '../../../test/helpers/servers.js';
import { BullmqTaskQueue } from './task-queue.bullmq.js';
import { MemoryTaskQueue } from './task-queue.memory.js';
import {
  ACCOUNT_BUSY,
  RETRY_LATER,
  LeaseLostError,
  QueueClosingError,
  type QueuedTask,
  type TaskHandler,
  type TaskLease,
  type TaskQueue,
} from './task-queue.js';

const LEASE_MS = 1_000;

/** Where a BullMQ queue lives, for tests that act on Redis directly. */
interface BullmqPlace {
  url: string;
  prefix: string;
  queueName: string;
}

/** One queue under test: nodes sharing it, errors the adapter reported, and cleanup. */
interface Cluster {
  /** A new, not yet started node of this queue. */
  node(): TaskQueue;
  /** Errors the adapters reported through onError. */
  errors: Error[];
  /** Closes every node (again: close is idempotent) and removes the queue's data. */
  close(): Promise<void>;
}

interface Adapter {
  name: string;
  /** Several nodes can share one queue (and a node can take over another's interrupted work). */
  multiNode: boolean;
  /** Set where leases expire without a heartbeat: the BullMQ queue's location. */
  bullmq?: BullmqPlace;
  start(): Promise<Cluster>;
}

function bullmqAdapter(): Adapter {
  const place: BullmqPlace = { ...freshRedis(), queueName: 'generation' };
  return {
    name: 'BullmqTaskQueue',
    multiNode: true,
    bullmq: place,
    start: async () => {
      // A new prefix per test: jobs of one test never reach another's workers.
      Object.assign(place, freshRedis());
      const errors: Error[] = [];
      const nodes: TaskQueue[] = [];
      return {
        node: () => {
          const queue = new BullmqTaskQueue({
            redisUrl: place.url,
            prefix: place.prefix,
            leaseMs: LEASE_MS,
            queueName: place.queueName,
            onError: (err) => errors.push(err),
          });
          nodes.push(queue);
          return queue;
        },
        errors,
        close: async () => {
          await Promise.all(nodes.map((n) => n.close()));
          await deleteKeys(place);
        },
      };
    },
  };
}

const adapters: Adapter[] = [
  {
    name: 'MemoryTaskQueue',
    multiNode: false,
    start: async () => {
      const nodes: TaskQueue[] = [];
      return {
        node: () => {
          const queue = new MemoryTaskQueue();
          nodes.push(queue);
          return queue;
        },
        errors: [],
        close: async () => void (await Promise.all(nodes.map((n) => n.close()))),
      };
    },
  },
  bullmqAdapter(),
];

/** Removes every key of a test's prefix. */
async function deleteKeys(place: BullmqPlace): Promise<void> {
  const redis = new Redis(place.url);
  try {
    const keys = await redis.keys(`${place.prefix.replace(/:+$/, '')}:*`);
    if (keys.length > 0) await redis.del(...keys);
  } finally {
    await redis.quit();
  }
}

/** Polls `condition` until it holds; fails after 15 s instead of hanging. */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = AbortSignal.timeout(15_000);
  while (!condition()) {
    if (deadline.aborted) assert.fail(`timed out waiting until ${what}`);
    await sleep(10);
  }
}

/** Positions handed out per account in the current test, as the database would count them. */
const positions = new Map<string, number>();

/** `ids` as tasks of `accountId`, each one position further back in the account's line. */
function queued(ids: readonly string[], accountId = 'account-1'): QueuedTask[] {
  return ids.map((taskId) => {
    const position = (positions.get(accountId) ?? 0) + 1;
    positions.set(accountId, position);
    return { taskId, accountId, position };
  });
}

/** A promise with its resolve function outside. */
function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve = (): void => undefined;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** Resolves when `signal` aborts (with its reason). */
function aborted(signal: AbortSignal): Promise<unknown> {
  return new Promise((resolve) => {
    if (signal.aborted) resolve(signal.reason);
    else signal.addEventListener('abort', () => resolve(signal.reason), { once: true });
  });
}

/**
 * A handler that records every delivery and how many run at once. Deliveries of ids in `held`
 * wait until released (or until their lease signal aborts); others finish at once.
 */
class Recorder {
  readonly deliveries: TaskLease[] = [];
  /** Deliveries that returned, in order. */
  readonly finished: TaskLease[] = [];
  running = 0;
  maxRunning = 0;
  private readonly gates = new Map<string, ReturnType<typeof deferred>>();

  constructor(held: readonly string[] = []) {
    for (const id of held) this.gates.set(id, deferred());
  }

  readonly handler: TaskHandler = async (lease) => {
    this.deliveries.push(lease);
    this.running++;
    this.maxRunning = Math.max(this.maxRunning, this.running);
    try {
      const gate = this.gates.get(lease.taskId);
      if (gate) await Promise.race([gate.promise, aborted(lease.signal)]);
      await sleep(1); // some asynchronous work after the gate or the abort
    } finally {
      this.running--;
      this.finished.push(lease);
    }
  };

  release(taskId: string): void {
    this.gates.get(taskId)?.resolve();
  }

  count(taskId: string): number {
    return this.deliveries.filter((d) => d.taskId === taskId).length;
  }
}

for (const adapter of adapters) {
  void describe(`TaskQueue contract: ${adapter.name}`, () => {
    let cluster: Cluster;
    beforeEach(async () => {
      positions.clear();
      cluster = await adapter.start();
    });
    afterEach(async () => {
      await cluster.close();
    });

    /**
     * Proves nothing else is pending for delivery on a concurrency-1 node: a sentinel queued now is
     * delivered next, and FIFO order means anything queued before it would have come first.
     */
    async function drain(queue: TaskQueue, recorder: Recorder, sentinel: string): Promise<void> {
      await queue.enqueue(queued([sentinel]));
      await until(() => recorder.finished.some((d) => d.taskId === sentinel), `${sentinel} is handled`);
    }

    void test('delivers each queued id once, in queue order, each with its own token', async () => {
      const queue = cluster.node();
      const recorder = new Recorder();
      await queue.enqueue(queued(['task-a', 'task-b']));
      await queue.start(recorder.handler, 1);
      await queue.enqueue(queued(['task-c']));
      await drain(queue, recorder, 'task-z');
      assert.deepEqual(
        recorder.deliveries.map((d) => d.taskId),
        ['task-a', 'task-b', 'task-c', 'task-z'],
      );
      assert.equal(new Set(recorder.deliveries.map((d) => d.token)).size, 4);
      for (const d of recorder.deliveries) assert.equal(d.signal.aborted, false);
      assert.deepEqual(cluster.errors, []);
    });

    void test('enqueue is idempotent while the task is queued or running', async () => {
      const queue = cluster.node();
      const recorder = new Recorder(['task-a']);
      await queue.enqueue(queued(['task-a', 'task-a']));
      await queue.enqueue(queued(['task-a']));
      await queue.start(recorder.handler, 1);
      await until(() => recorder.running === 1, 'task-a runs');
      await queue.enqueue(queued(['task-a']));
      assert.equal(queue.active, 1);
      recorder.release('task-a');
      await drain(queue, recorder, 'task-z');
      assert.equal(recorder.count('task-a'), 1);
      assert.deepEqual(cluster.errors, []);
    });

    void test('never runs more handlers at once than the concurrency bound', async () => {
      const queue = cluster.node();
      const ids = ['task-1', 'task-2', 'task-3', 'task-4', 'task-5'];
      const recorder = new Recorder(ids);
      await queue.start(recorder.handler, 2);
      await queue.enqueue(queued(ids));
      await until(() => recorder.running === 2, 'two handlers run');
      assert.equal(queue.active, 2);
      // Release one at a time; each release lets exactly one more in.
      for (let released = 0; released < ids.length; released++) {
        const next = recorder.deliveries[released];
        assert.ok(next, `delivery ${released} happened`);
        recorder.release(next.taskId);
        await until(() => recorder.finished.length === released + 1, `${released + 1} handlers finished`);
        await until(
          () => recorder.running === Math.min(2, ids.length - released - 1),
          'the freed slot is taken',
        );
      }
      await until(() => queue.active === 0, 'the queue is idle');
      assert.equal(recorder.maxRunning, 2);
      assert.deepEqual([...recorder.deliveries.map((d) => d.taskId)].sort(), ids);
      assert.deepEqual(cluster.errors, []);
    });

    void test('a task queued again after its delivery finished is delivered again, with a new token', async () => {
      const queue = cluster.node();
      const recorder = new Recorder();
      await queue.start(recorder.handler, 1);
      await queue.enqueue(queued(['task-a']));
      await until(() => recorder.finished.length === 1 && queue.active === 0, 'task-a is done');
      await queue.enqueue(queued(['task-a']));
      await until(() => recorder.finished.length === 2, 'task-a is delivered again');
      const [first, second] = recorder.deliveries;
      assert.equal(second?.taskId, 'task-a');
      assert.notEqual(first?.token, second?.token);
      assert.deepEqual(cluster.errors, []);
    });

    void test('a handler that throws ends its delivery: the task is not delivered again', async () => {
      const queue = cluster.node();
      const recorder = new Recorder();
      let thrown = 0;
      await queue.start(async (lease) => {
        if (lease.taskId === 'task-bad') {
          thrown++;
          throw new Error('engine exploded');
        }
        return recorder.handler(lease);
      }, 1);
      await queue.enqueue(queued(['task-bad']));
      await drain(queue, recorder, 'task-z');
      assert.equal(thrown, 1);
      assert.deepEqual(cluster.errors, []);
    });

    void test('close() aborts the running handlers, waits for them and delivers nothing more', async () => {
      const queue = cluster.node();
      const recorder = new Recorder(['task-a', 'task-b']);
      await queue.start(recorder.handler, 2);
      await queue.enqueue(queued(['task-a', 'task-b', 'task-c']));
      await until(() => recorder.running === 2, 'two handlers run');
      await queue.close();
      // Both handlers saw the abort and had finished when close() resolved.
      assert.equal(recorder.finished.length, 2);
      for (const d of recorder.deliveries) assert.ok(d.signal.reason instanceof QueueClosingError);
      assert.equal(queue.active, 0);
      assert.equal(recorder.count('task-c'), 0);
      await queue.close(); // idempotent
      assert.deepEqual(cluster.errors, []);
    });

    void test('remove() takes a queued task out before its delivery and leaves a running one alone', async () => {
      const queue = cluster.node();
      const recorder = new Recorder(['task-a']);
      await queue.start(recorder.handler, 1);
      await queue.enqueue(queued(['task-a', 'task-b', 'task-c']));
      await until(() => recorder.running === 1, 'task-a runs');
      await queue.remove('task-b');
      await queue.remove('task-a');
      await queue.remove('no-such-task');
      recorder.release('task-a');
      await drain(queue, recorder, 'task-z');
      assert.deepEqual(
        recorder.finished.map((d) => d.taskId),
        ['task-a', 'task-c', 'task-z'],
      );
      assert.deepEqual(cluster.errors, []);
    });

    void test("fairness: one account flooding the queue delays another account's task by one delivery at most", async () => {
      const queue = cluster.node();
      const flood = Array.from({ length: 30 }, (_, i) => `flood-${i}`);
      const recorder = new Recorder(['flood-0']);
      await queue.start(recorder.handler, 1);
      await queue.enqueue(queued(flood, 'account-flood'));
      await until(() => recorder.running === 1, 'flood-0 runs');
      await queue.enqueue(queued(['single'], 'account-single'));
      recorder.release('flood-0');
      await until(() => recorder.finished.length === flood.length + 1, 'every task is handled');
      // The only slot was taken when the single task came: it is the very next delivery.
      assert.deepEqual(
        recorder.deliveries.slice(0, 3).map((d) => d.taskId),
        ['flood-0', 'single', 'flood-1'],
      );
      // Within the flooding account, queue order is kept.
      assert.deepEqual(
        recorder.deliveries.map((d) => d.taskId).filter((id) => id !== 'single'),
        flood,
      );
      assert.deepEqual(cluster.errors, []);
    });

    void test('fairness: two flooding accounts take turns', async () => {
      const queue = cluster.node();
      const recorder = new Recorder();
      await queue.enqueue(queued(['a-1', 'a-2', 'a-3'], 'account-a'));
      await queue.enqueue(queued(['b-1', 'b-2', 'b-3'], 'account-b'));
      await queue.start(recorder.handler, 1);
      await until(() => recorder.finished.length === 6, 'every task is handled');
      assert.deepEqual(
        recorder.deliveries.map((d) => d.taskId),
        ['a-1', 'b-1', 'a-2', 'b-2', 'a-3', 'b-3'],
      );
      assert.deepEqual(cluster.errors, []);
    });

    void test('a delivery answered ACCOUNT_BUSY is delivered again later; other accounts go first meanwhile', async () => {
      const queue = cluster.node();
      const handled: TaskLease[] = [];
      let refusals = 0;
      await queue.enqueue(queued(['busy-1'], 'account-busy'));
      await queue.enqueue(queued(['other-1'], 'account-other'));
      await queue.start(async (lease) => {
        if (lease.taskId === 'busy-1' && refusals === 0) {
          refusals++;
          return ACCOUNT_BUSY;
        }
        handled.push(lease);
        return undefined;
      }, 1);
      await until(() => handled.length === 2, 'both tasks are handled');
      assert.equal(refusals, 1);
      assert.deepEqual(
        handled.map((d) => d.taskId),
        ['other-1', 'busy-1'],
      );
      await until(() => queue.active === 0, 'the queue is idle');
      assert.deepEqual(cluster.errors, []);
    });

    void test('a delivery answered RETRY_LATER (its claim failed) is delivered again, with a new token', async () => {
      const queue = cluster.node();
      const leases: TaskLease[] = [];
      await queue.enqueue(queued(['flaky-1'], 'account-flaky'));
      await queue.start(async (lease) => {
        leases.push(lease);
        return leases.length === 1 ? RETRY_LATER : undefined;
      }, 1);
      await until(() => leases.length === 2, 'the task is delivered again');
      assert.notEqual(leases[0]?.token, leases[1]?.token);
      await until(() => queue.active === 0, 'the queue is idle');
      assert.deepEqual(cluster.errors, []);
    });

    if (adapter.multiNode) {
      void test('a task is delivered to one node at a time, whichever node queues it', async () => {
        const [a, b] = [cluster.node(), cluster.node()];
        const recorder = new Recorder(['task-a']);
        await a.start(recorder.handler, 1);
        await b.start(recorder.handler, 1);
        await b.enqueue(queued(['task-a']));
        await until(() => recorder.running === 1, 'task-a runs');
        await a.enqueue(queued(['task-a']));
        await b.enqueue(queued(['task-a']));
        recorder.release('task-a');
        await until(() => recorder.finished.length === 1, 'task-a is done');
        assert.equal(recorder.maxRunning, 1);
        // Both nodes are idle again and take a sentinel each: task-a would have come before them.
        await a.enqueue(queued(['task-y', 'task-z']));
        await until(() => recorder.finished.length === 3, 'the sentinels are handled');
        assert.equal(recorder.count('task-a'), 1);
        assert.deepEqual(cluster.errors, []);
      });

      void test('a task interrupted by close() is delivered again to another node, with a new token', async () => {
        const [a, b] = [cluster.node(), cluster.node()];
        const onA = new Recorder(['task-a']);
        await a.start(onA.handler, 1);
        await a.enqueue(queued(['task-a']));
        await until(() => onA.running === 1, 'task-a runs on a');
        const onB = new Recorder();
        await b.start(onB.handler, 1);
        await a.close();
        await until(() => onB.finished.length === 1, 'task-a is delivered to b');
        assert.equal(onB.deliveries[0]?.taskId, 'task-a');
        assert.notEqual(onB.deliveries[0]?.token, onA.deliveries[0]?.token);
        assert.deepEqual(cluster.errors, []);
      });
    }

    const place = adapter.bullmq;
    if (place !== undefined) {
      void test('while a holder heartbeats nobody else gets its task; once it stops, another node does', async () => {
        // The holder is a bare BullMQ worker that renews its lock only when told to: a node that
        // later hangs or dies without releasing the task.
        const queue = cluster.node();
        const held = deferred();
        let heartbeat = true;
        const release = deferred();
        let holderLock = '';
        const holder = new Worker(
          place.queueName,
          async (job: Job, token?: string) => {
            holderLock = token ?? '';
            held.resolve();
            while (heartbeat) {
              await job.extendLock(holderLock, LEASE_MS);
              await Promise.race([sleep(LEASE_MS / 4), release.promise]);
            }
            await release.promise;
            throw new WaitingError(); // leave the job alone: it is not this worker's any more
          },
          {
            connection: { url: place.url, maxRetriesPerRequest: null },
            prefix: place.prefix.replace(/:+$/, ''),
            lockDuration: LEASE_MS,
            skipLockRenewal: true,
            skipStalledCheck: true,
          },
        );
        const holderErrors: Error[] = [];
        holder.on('error', (err) => holderErrors.push(err));
        try {
          await queue.enqueue(queued(['task-a']));
          await held.promise;
          const recorder = new Recorder();
          await queue.start(recorder.handler, 1);
          // Three lease times of heartbeats: the lock never expires, so the task stays the holder's.
          await sleep(3 * LEASE_MS);
          assert.equal(recorder.deliveries.length, 0);
          heartbeat = false; // the holder hangs: no more heartbeats
          await until(() => recorder.finished.length === 1, 'task-a is delivered to the live node');
          assert.equal(recorder.deliveries[0]?.taskId, 'task-a');
        } finally {
          heartbeat = false;
          release.resolve();
          await holder.close();
        }
        assert.deepEqual(holderErrors, []);
      });

      void test('a holder whose lock is lost has its lease aborted; the task is delivered again, with a new token', async () => {
        const [a, b] = [cluster.node(), cluster.node()];
        const recorder = new Recorder(['task-a']);
        await a.start(recorder.handler, 1);
        await a.enqueue(queued(['task-a']));
        await until(() => recorder.running === 1, 'task-a runs on a');
        await b.start(recorder.handler, 1);
        const first = recorder.deliveries[0];
        assert.ok(first);
        // What a holder finds after a long pause (or a partition): its lock expired.
        const redis = new Redis(place.url);
        try {
          const lockKey = `${place.prefix.replace(/:+$/, '')}:${place.queueName}:task-a:lock`;
          assert.equal(await redis.del(lockKey), 1);
        } finally {
          await redis.quit();
        }
        assert.ok((await aborted(first.signal)) instanceof LeaseLostError);
        await until(() => recorder.deliveries.length === 2, 'task-a is delivered again');
        const second = recorder.deliveries[1];
        assert.equal(second?.taskId, 'task-a');
        assert.notEqual(second?.token, first.token);
        assert.equal(second?.signal.aborted, false);
        recorder.release('task-a');
        await until(() => recorder.finished.length === 2, 'the second delivery is done');
        // BullMQ reports the failed renewal; nothing else.
        assert.deepEqual(
          cluster.errors.filter((err) => !/could not renew lock for job task-a/.test(err.message)),
          [],
        );
      });
    }
  });
}
