/**
 * The SessionOwnership contract, run against every adapter: in-process leases and Redis leases on
 * the real test server (one key prefix per test). Each "node" is its own instance on the shared
 * store (for Redis, its own connection). A dead or stalled node is a node whose renewal interval
 * is longer than the ttl: it keeps its lease object but lets the lease expire, like a process
 * paused past its ttl. Short ttls; the only time-related assertions are "eventually, within a
 * deadline".
 */
import { afterEach, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { freshRedis } from '../../test/helpers/servers.js';
import { MemoryLeaseStore, MemorySessionOwnership } from './session-ownership.memory.js';
import { RedisLeaseStore, RedisSessionOwnership } from './session-ownership.redis.js';
import {
  LeaseEndedError,
  type AcquireResult,
  type LeaseStore,
  type OwnedSession,
  type SessionOwnership,
} from './session-ownership.js';

const TTL_MS = 600;

/** A cluster under test: nodes on one shared store, a direct handle on the store, and cleanup. */
interface Cluster {
  /** A new node; `renewEveryMs` above the ttl makes it a stalled node. */
  node(options?: { renewEveryMs?: number }): SessionOwnership;
  /** The store itself, to act as an operator or another party would. */
  store(): LeaseStore;
  close(): Promise<void>;
}

interface Adapter {
  name: string;
  start(): Cluster;
}

const adapters: Adapter[] = [
  {
    name: 'MemorySessionOwnership',
    start: () => {
      const store = new MemoryLeaseStore();
      const nodes: SessionOwnership[] = [];
      return {
        node: (options) => {
          const node = new MemorySessionOwnership({ ttlMs: TTL_MS, store, ...options });
          nodes.push(node);
          return node;
        },
        store: () => store,
        close: async () => {
          for (const node of nodes) await node.close();
        },
      };
    },
  },
  {
    name: 'RedisSessionOwnership',
    start: () => {
      const { url, prefix } = freshRedis();
      const connections: Redis[] = [];
      const nodes: SessionOwnership[] = [];
      const connect = () => {
        const connection = new Redis(url);
        connections.push(connection);
        return connection;
      };
      return {
        node: (options) => {
          const node = new RedisSessionOwnership({
            connection: connect(),
            prefix,
            ttlMs: TTL_MS,
            ...options,
          });
          nodes.push(node);
          return node;
        },
        store: () => new RedisLeaseStore({ connection: connect(), prefix }),
        close: async () => {
          for (const node of nodes) await node.close();
          const admin = connect();
          const keys = await admin.keys(`${prefix}*`);
          if (keys.length > 0) await admin.del(...keys);
          await Promise.all(connections.map((c) => c.quit()));
        },
      };
    },
  },
];

/** Polls `check` until it holds; fails after a deadline instead of hanging. */
async function eventually<T>(check: () => Promise<T | undefined>, what: string): Promise<T> {
  const deadline = AbortSignal.timeout(10_000);
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (deadline.aborted) throw new Error(`timed out waiting for ${what}`);
    await sleep(25, undefined, { signal: deadline }).catch(() => undefined);
  }
}

function owned(result: AcquireResult): OwnedSession {
  if (!('owned' in result))
    throw new Error(`expected to own the lease, held by ${JSON.stringify(result.heldBy)}`);
  return result.owned;
}

/** Acquires `key` for `holder`, waiting for the current lease to end. */
function acquireWhenFree(node: SessionOwnership, key: string, holder: string): Promise<OwnedSession> {
  return eventually(async () => {
    const result = await node.acquire(key, holder);
    return 'owned' in result ? result.owned : undefined;
  }, `the lease of ${key} to become free`);
}

function endReason(lease: OwnedSession): string | undefined {
  const reason: unknown = lease.lost.reason;
  return reason instanceof LeaseEndedError ? reason.why : undefined;
}

for (const adapter of adapters) {
  void describe(`SessionOwnership contract: ${adapter.name}`, () => {
    let cluster: Cluster;
    beforeEach(() => {
      cluster = adapter.start();
    });
    afterEach(async () => {
      await cluster.close();
    });

    void test('of concurrent acquires exactly one wins; the others see the winner and its token', async () => {
      const nodes = Array.from({ length: 6 }, () => cluster.node());
      const results = await Promise.all(
        nodes.map((node, i) => node.acquire('session-1', `http://node-${i}`)),
      );
      const winners = results.flatMap((r, i) =>
        'owned' in r ? [{ lease: r.owned, holder: `http://node-${i}` }] : [],
      );
      assert.equal(winners.length, 1);
      const winner = winners[0]!;
      for (const result of results) {
        if ('heldBy' in result)
          assert.deepEqual(result.heldBy, { holder: winner.holder, token: winner.lease.token });
      }
      assert.deepEqual(await nodes[0]!.holderOf('session-1'), {
        holder: winner.holder,
        token: winner.lease.token,
      });
      assert.equal(await winner.lease.stillOwned(), true);
    });

    void test('a lease is never shared, not even with its own holder', async () => {
      const node = cluster.node();
      const lease = owned(await node.acquire('session-1', 'http://a'));
      assert.deepEqual(await node.acquire('session-1', 'http://a'), {
        heldBy: { holder: 'http://a', token: lease.token },
      });
    });

    void test('tokens strictly increase across acquisitions', async () => {
      const [a, b] = [cluster.node(), cluster.node()];
      const tokens: number[] = [];
      for (let round = 0; round < 4; round++) {
        const node = round % 2 === 0 ? a : b;
        const lease = owned(await node.acquire('session-1', `http://node-${round % 2}`));
        // Leases of other keys in between do not break the order of this key's tokens.
        const other = owned(await node.acquire(`other-${round}`, 'http://x'));
        tokens.push(lease.token);
        await lease.release();
        await other.release();
      }
      for (let i = 1; i < tokens.length; i++)
        assert.ok(tokens[i]! > tokens[i - 1]!, `tokens ${tokens.join(', ')}`);
    });

    void test('renewals keep a lease past its ttl', async () => {
      const [a, b] = [cluster.node(), cluster.node()];
      const lease = owned(await a.acquire('session-1', 'http://a'));
      await sleep(3 * TTL_MS);
      assert.equal(lease.lost.aborted, false);
      assert.equal(await lease.stillOwned(), true);
      assert.deepEqual(await b.acquire('session-1', 'http://b'), {
        heldBy: { holder: 'http://a', token: lease.token },
      });
    });

    void test('a lease that is not renewed expires; the next holder gets a greater token; the old one is fenced off', async () => {
      const stalled = cluster.node({ renewEveryMs: 100 * TTL_MS });
      const old = owned(await stalled.acquire('session-1', 'http://dead'));
      const taker = cluster.node();
      const lease = await acquireWhenFree(taker, 'session-1', 'http://b');
      assert.ok(lease.token > old.token);
      assert.equal(await old.stillOwned(), false);
      assert.equal(await lease.stillOwned(), true);
      await eventually(async () => (old.lost.aborted ? true : undefined), 'the old lease to be lost');
      assert.ok(['expired', 'gone'].includes(endReason(old) ?? ''), String(old.lost.reason));
      assert.deepEqual(await taker.holderOf('session-1'), { holder: 'http://b', token: lease.token });
    });

    void test('a renewal that finds the lease gone aborts lost', async () => {
      const node = cluster.node();
      const lease = owned(await node.acquire('session-1', 'http://a'));
      // Another party deletes the lease behind the holder's back (as an expiry would) and takes it.
      const store = cluster.store();
      await store.drop('session-1', lease.token);
      const taken = await store.take('session-1', 'http://b', 60_000);
      assert.ok('token' in taken && taken.token > lease.token);
      await eventually(async () => (lease.lost.aborted ? true : undefined), 'the lease to be lost');
      assert.equal(endReason(lease), 'gone');
      assert.equal(await lease.stillOwned(), false);
      assert.deepEqual(await node.holderOf('session-1'), { holder: 'http://b', token: taken.token });
    });

    void test('release lets another node acquire at once, and ends the lease', async () => {
      const [a, b] = [cluster.node(), cluster.node()];
      const lease = owned(await a.acquire('session-1', 'http://a'));
      await lease.release();
      assert.equal(lease.lost.aborted, true);
      assert.equal(endReason(lease), 'released');
      assert.equal(await lease.stillOwned(), false);
      assert.equal(await a.holderOf('session-1'), undefined);
      const next = owned(await b.acquire('session-1', 'http://b'));
      assert.ok(next.token > lease.token);
    });

    void test('releasing a lost lease leaves the new holder’s lease alone', async () => {
      const stalled = cluster.node({ renewEveryMs: 100 * TTL_MS });
      const old = owned(await stalled.acquire('session-1', 'http://dead'));
      const taker = cluster.node();
      const lease = await acquireWhenFree(taker, 'session-1', 'http://b');
      await old.release();
      assert.deepEqual(await taker.holderOf('session-1'), { holder: 'http://b', token: lease.token });
      assert.equal(await lease.stillOwned(), true);
      assert.equal(lease.lost.aborted, false);
    });

    void test('close() releases every lease of the node and refuses new ones', async () => {
      const [a, b] = [cluster.node(), cluster.node()];
      const leases = [
        owned(await a.acquire('session-1', 'http://a')),
        owned(await a.acquire('session-2', 'http://a')),
      ];
      await a.close();
      for (const lease of leases) assert.equal(endReason(lease), 'released');
      owned(await b.acquire('session-1', 'http://b'));
      owned(await b.acquire('session-2', 'http://b'));
      await assert.rejects(a.acquire('session-3', 'http://a'), /closed/);
    });

    void test('holderOf a key nobody holds is undefined', async () => {
      assert.equal(await cluster.node().holderOf('nobody'), undefined);
    });
  });
}
