// Regression test: BullMQ's close() waited for ever when Redis was
// down or still reconnecting, so a node told to stop (SIGTERM) never exited. close() now drops
// the connections after a grace period. A private redis-server is killed under a started queue;
// the shared test Redis is never touched.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Redis } from 'ioredis';
import { freePort } from '../../../test/helpers/free-port.js';
import { BullmqTaskQueue } from './task-queue.bullmq.js';

let server: ChildProcess | undefined;
after(() => void server?.kill('SIGKILL'));

/** A throw-away redis-server on a free port, without persistence; resolves once it answers PING. */
async function privateRedis(): Promise<{ url: string; kill(): Promise<void> }> {
  const port = await freePort();
  const child = spawn('redis-server', ['--port', String(port), '--save', '', '--appendonly', 'no'], {
    stdio: 'ignore',
  });
  server = child;
  const url = `redis://127.0.0.1:${String(port)}`;
  const deadline = AbortSignal.timeout(15_000);
  for (;;) {
    const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    client.on('error', () => undefined); // not up yet: the connect() below reports it
    const up = await client.connect().then(
      () => client.ping().then(() => true),
      () => false,
    );
    client.disconnect();
    if (up) break;
    if (deadline.aborted) throw new Error('redis-server did not start');
    await sleep(50);
  }
  return {
    url,
    kill: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGKILL');
      }),
  };
}

/** How many timers keep the process alive now. */
function timers(): number {
  return process.getActiveResourcesInfo().filter((kind) => kind === 'Timeout').length;
}

describe('BullmqTaskQueue.close with Redis gone', () => {
  it('returns (the connections are dropped after the grace period) instead of waiting for ever', async () => {
    const redis = await privateRedis();
    const timersBefore = timers();
    const queue = new BullmqTaskQueue({
      redisUrl: redis.url,
      prefix: 'close-test',
      leaseMs: 5000,
      onError: () => undefined, // connection errors are expected here
    });
    await queue.start(async () => undefined, 1);
    await redis.kill();
    await sleep(200); // the worker is now reconnecting
    // Bounded by the test's own deadline, not by a timing assertion: before the fix this never settled.
    const deadline = new AbortController();
    const closed = await Promise.race([
      queue.close().then(() => 'closed'),
      sleep(60_000, 'still waiting', { signal: deadline.signal }).catch(() => 'aborted'),
    ]);
    deadline.abort();
    assert.equal(closed, 'closed');
    // Nothing of the queue may keep the process alive afterwards (BullMQ's lock renewal timer did).
    await sleep(100);
    assert.ok(timers() <= timersBefore, 'timers left running after close()');
  });
});
