/**
 * The TaskEvents contract, run against every adapter: the in-process one and Redis pub/sub on the
 * real test server (one key prefix per test, so parallel test files never hear each other).
 * "Another node" is a second instance sharing the bus: a second Redis connection and subscriber
 * for Redis; for the in-process adapter the one process is the whole cluster, so the same
 * instance stands in.
 */
import { afterEach, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { freshRedis } from '../../../test/helpers/servers.js';
import { MemoryTaskEvents } from './task-events.memory.js';
import { RedisTaskEvents } from './task-events.redis.js';
import type { TaskEvents } from './task-events.js';
import { isSettled } from '../../../test/helpers/settled.js';

/** A TaskEvents node that can count its waiters (to check that aborted waits leave none behind). */
type EventsNode = TaskEvents & { waiterCount(taskId: string): number };

/** One bus under test: its first node, a way to get another node on the same bus, and cleanup. */
interface Bus {
  node: EventsNode;
  /** Another node sharing the bus (for the in-process adapter: the same instance). */
  peer(): Promise<EventsNode>;
  /** Errors the adapter reported through onError (a healthy run reports none). */
  errors: Error[];
  close(): Promise<void>;
}

interface Adapter {
  name: string;
  start(): Promise<Bus>;
}

const adapters: Adapter[] = [
  {
    name: 'MemoryTaskEvents',
    start: async () => {
      const node = new MemoryTaskEvents();
      return { node, peer: async () => node, errors: [], close: async () => undefined };
    },
  },
  {
    name: 'RedisTaskEvents',
    start: async () => {
      const { url, prefix } = freshRedis();
      const errors: Error[] = [];
      const closers: (() => Promise<void>)[] = [];
      const startNode = async (): Promise<RedisTaskEvents> => {
        const connection = new Redis(url, { lazyConnect: true });
        await connection.connect();
        closers.push(async () => void (await connection.quit()));
        const events = await RedisTaskEvents.create({
          connection,
          prefix,
          onError: (err) => errors.push(err),
        });
        closers.push(() => events.close());
        return events;
      };
      const node = await startNode();
      return {
        node,
        peer: startNode,
        errors,
        close: async () => {
          for (const close of closers.reverse()) await close();
        },
      };
    },
  },
];

/** Every wait in these tests has a deadline, so a broken adapter fails instead of hanging. */
function deadline(): AbortSignal {
  return AbortSignal.timeout(5_000);
}

for (const adapter of adapters) {
  void describe(`TaskEvents contract: ${adapter.name}`, () => {
    let bus: Bus;
    beforeEach(async () => {
      bus = await adapter.start();
    });
    afterEach(async () => {
      await bus.close();
      assert.deepEqual(bus.errors, []);
    });

    void test('nextChange resolves on a change announced by the same node', async () => {
      const change = bus.node.nextChange('task-1', deadline());
      bus.node.changed('task-1');
      await change;
      assert.equal(bus.node.waiterCount('task-1'), 0);
    });

    void test('nextChange resolves on a change announced by another node', async () => {
      const peer = await bus.peer();
      const change = bus.node.nextChange('task-1', deadline());
      peer.changed('task-1');
      await change;
      // And the other way round.
      const back = peer.nextChange('task-1', deadline());
      bus.node.changed('task-1');
      await back;
    });

    void test('aborting a wait rejects it with the reason and removes its listener', async () => {
      const controller = new AbortController();
      const change = bus.node.nextChange('task-1', controller.signal);
      assert.equal(bus.node.waiterCount('task-1'), 1);
      const reason = new Error('client went away');
      controller.abort(reason);
      await assert.rejects(change, (err) => err === reason);
      assert.equal(bus.node.waiterCount('task-1'), 0);

      const already = AbortSignal.abort(new Error('already gone'));
      await assert.rejects(bus.node.nextChange('task-1', already), /already gone/);
      assert.equal(bus.node.waiterCount('task-1'), 0);
    });

    void test('one change wakes every waiter of the task, on every node', async () => {
      const peer = await bus.peer();
      const waits = [
        ...Array.from({ length: 100 }, () => bus.node.nextChange('task-1', deadline())),
        ...Array.from({ length: 100 }, () => peer.nextChange('task-1', deadline())),
      ];
      peer.changed('task-1');
      await Promise.all(waits);
      assert.equal(bus.node.waiterCount('task-1'), 0);
      assert.equal(peer.waiterCount('task-1'), 0);
    });

    void test('a change of one task does not wake the waiters of another', async () => {
      const peer = await bus.peer();
      const onA = bus.node.nextChange('task-a', deadline());
      const onB = bus.node.nextChange('task-b', deadline());
      peer.changed('task-b');
      await onB;
      // Changes reach a node in the order they were announced: had B's change woken A's waiter,
      // it would have settled by now.
      assert.equal(await isSettled(onA), false);
      peer.changed('task-a');
      await onA;
    });

    void test('a node hears its own change once, not again from the bus', async () => {
      const peer = await bus.peer();
      const peerHeard = peer.nextChange('task-1', deadline());
      bus.node.changed('task-1');
      // Waits from after the change (dispatched here at once): only a second delivery would wake it.
      const again = bus.node.nextChange('task-1', deadline());
      again.catch(() => undefined);
      await peerHeard;
      // Changes reach a node in the order they were announced: by the peer's marker, any echo of
      // the change would have arrived.
      const marker = bus.node.nextChange('task-marker', deadline());
      peer.changed('task-marker');
      await marker;
      assert.equal(await isSettled(again), false);
      bus.node.changed('task-1'); // ends the wait
      await again;
    });

    void test('a wait hears only changes announced after it began', async () => {
      const peer = await bus.peer();
      const first = bus.node.nextChange('task-1', deadline());
      peer.changed('task-1');
      await first;
      // Own announcements may arrive twice (at once locally, then from the bus): let them drain.
      const sentinel = bus.node.nextChange('task-sentinel', deadline());
      peer.changed('task-sentinel');
      await sentinel;

      const later = bus.node.nextChange('task-1', deadline());
      const marker = bus.node.nextChange('task-marker', deadline());
      peer.changed('task-marker');
      await marker;
      assert.equal(await isSettled(later), false);
      peer.changed('task-1');
      await later;
    });

    void test('a cancellation wakes the waiters of cancellations and every other waiter; progress wakes only the latter', async () => {
      const peer = await bus.peer();
      const cancelOnly = bus.node.nextChange('task-1', deadline(), { only: 'cancel' });
      const any = bus.node.nextChange('task-1', deadline());
      assert.equal(bus.node.waiterCount('task-1'), 2);
      peer.changed('task-1');
      await any;
      // Changes reach a node in the order they were announced: a marker after the progress change.
      const marker = bus.node.nextChange('task-marker', deadline());
      peer.changed('task-marker');
      await marker;
      assert.equal(await isSettled(cancelOnly), false, 'progress does not wake a cancellation watcher');
      const anyAgain = bus.node.nextChange('task-1', deadline());
      peer.changed('task-1', 'cancel');
      await Promise.all([cancelOnly, anyAgain]);
      assert.equal(bus.node.waiterCount('task-1'), 0);
      // A cancellation announced by the waiting node itself, and an aborted cancellation wait.
      const own = peer.nextChange('task-2', deadline(), { only: 'cancel' });
      peer.changed('task-2', 'cancel');
      await own;
      const controller = new AbortController();
      const aborted = bus.node.nextChange('task-3', controller.signal, { only: 'cancel' });
      controller.abort(new Error('done'));
      await assert.rejects(aborted, /done/);
      assert.equal(bus.node.waiterCount('task-3'), 0);
    });

    void test('a deletion wakes the waiters of deletions and every other waiter, never a cancellation watcher', async () => {
      const peer = await bus.peer();
      const deletedOnly = bus.node.nextChange('task-d', deadline(), { only: 'deleted' });
      const cancelOnly = bus.node.nextChange('task-d', deadline(), { only: 'cancel' });
      const any = bus.node.nextChange('task-d', deadline());
      peer.changed('task-d', 'cancel');
      await Promise.all([cancelOnly, any]);
      const marker = bus.node.nextChange('task-d-marker', deadline());
      peer.changed('task-d-marker');
      await marker;
      assert.equal(await isSettled(deletedOnly), false, 'a cancellation does not wake a deletion watcher');
      const cancelAgain = bus.node.nextChange('task-d', deadline(), { only: 'cancel' });
      peer.changed('task-d', 'deleted');
      await deletedOnly;
      const marker2 = bus.node.nextChange('task-d-marker', deadline());
      peer.changed('task-d-marker');
      await marker2;
      assert.equal(await isSettled(cancelAgain), false, 'a deletion does not wake a cancellation watcher');
      peer.changed('task-d', 'cancel');
      await cancelAgain;
      assert.equal(bus.node.waiterCount('task-d'), 0);
    });

    void test('onAnnouncement hears every non-progress announcement of any task, from any node, until unsubscribed', async () => {
      const peer = await bus.peer();
      const heard: [string | null, string | null][] = [];
      const stop = bus.node.onAnnouncement((taskId, kind) => heard.push([taskId, kind]));
      const waitFor = async (count: number) => {
        const end = Date.now() + 5_000;
        while (heard.length < count && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
      };
      bus.node.changed('task-own', 'token');
      peer.changed('task-a', 'progress');
      peer.changed('task-b', 'token');
      peer.changed('task-c', 'deleted');
      peer.changed('task-s', 'status');
      await waitFor(4);
      // Progress is no announcement: a marker after it shows it was delivered and not heard.
      assert.deepEqual(heard, [
        ['task-own', 'token'],
        ['task-b', 'token'],
        ['task-c', 'deleted'],
        ['task-s', 'status'],
      ]);
      stop();
      const marker = bus.node.nextChange('task-after', deadline());
      peer.changed('task-after', 'token');
      await marker;
      assert.equal(heard.length, 4, 'nothing is heard once unsubscribed');
    });

    void test('changed() with no waiters anywhere is a no-op', async () => {
      bus.node.changed('nobody-waits');
      const peer = await bus.peer();
      peer.changed('nobody-waits');
      const sentinel = bus.node.nextChange('task-sentinel', deadline());
      peer.changed('task-sentinel');
      await sentinel;
    });
  });
}

void describe('RedisTaskEvents after its subscriber reconnects', () => {
  test('wakes every waiter to re-check, then hears changes again', async () => {
    const { url, prefix } = freshRedis();
    const errors: Error[] = [];
    const admin = new Redis(url);
    const connections = [new Redis(url), new Redis(url)] as const;
    const [node, peer] = await Promise.all(
      connections.map((connection) =>
        RedisTaskEvents.create({ connection, prefix, onError: (err) => errors.push(err) }),
      ),
    );
    assert.ok(node !== undefined && peer !== undefined);
    try {
      const waiting = node.nextChange('task-1', deadline());
      const lapses: [string | null, string | null][] = [];
      node.onAnnouncement((taskId, kind) => lapses.push([taskId, kind]));
      // Kill this node's subscriber connection (found by its name); ioredis reconnects by itself.
      const clients = String(await admin.call('CLIENT', 'LIST', 'TYPE', 'pubsub'));
      const ids = clients
        .split('\n')
        .filter((line) => line.includes(` name=${prefix}task-events `))
        .map((line) => /(?:^|\s)id=(\d+)/.exec(line)?.[1])
        .filter((id): id is string => id !== undefined);
      assert.equal(ids.length, 2);
      for (const id of ids) await admin.call('CLIENT', 'KILL', 'ID', id);

      // Nothing changed, but a change might have been missed while disconnected: the waiter wakes,
      // and announcement listeners hear that anything may have changed (null).
      await waiting;
      const end = Date.now() + 5_000;
      while (lapses.length === 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 5));
      assert.deepEqual(lapses[0], [null, null]);

      const again = node.nextChange('task-1', deadline());
      peer.changed('task-1');
      await again;
    } finally {
      await node.close();
      await peer.close();
      await Promise.all([admin.quit(), ...connections.map((c) => c.quit())]);
    }
    // A killed connection may be reported as a reset; nothing else may be.
    assert.deepEqual(
      errors.filter((err) => !/ECONNRESET|Connection is closed/.test(err.message)),
      [],
    );
  });

  test('closed while its reconnection subscribes again, leaves no promise rejected unhandled', async () => {
    const { url, prefix } = freshRedis();
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown): void => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    const connection = new Redis(url);
    try {
      for (let round = 0; round < 5; round++) {
        const events = await RedisTaskEvents.create({
          connection,
          prefix: `${prefix}${round}:`,
          onError: () => {},
        });
        const subscriber = events['subscriber'];
        // The moment a reconnection is ready its subscription is sent again; the connection then
        // drops with that reply outstanding, and the service shuts down at once.
        const closed = new Promise<void>((resolve) =>
          subscriber.once('ready', () => {
            subscriber.stream.destroy();
            void events.close().then(resolve);
          }),
        );
        subscriber.stream.destroy();
        await closed;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await connection.quit();
    }
    assert.deepEqual(unhandled.map(String), []);
  });
});
