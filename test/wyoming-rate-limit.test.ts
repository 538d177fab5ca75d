// The Wyoming server's per-account request counter, in this process and in a real Redis (shared
// by every node of a cluster): RATE_LIMIT_MAX requests per window, then the seconds to wait.
import assert from 'node:assert/strict';
import { Redis } from 'ioredis';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { accountRequestCounter } from '../src/app.js';
import { loadConfig } from '../src/config/config.js';
import { freshRedis } from './helpers/servers.js';

const config = loadConfig({ RATE_LIMIT_MAX: '3', RATE_LIMIT_WINDOW_MS: '1500' });
const redis = freshRedis();
const client = new Redis(redis.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
after(() => client.quit());

for (const kind of ['memory', 'redis'] as const) {
  describe(`Wyoming request counter (${kind})`, () => {
    it('admits RATE_LIMIT_MAX requests per account and window, then says how long to wait', async () => {
      const store =
        kind === 'memory'
          ? ({ kind: 'memory' } as const)
          : ({ kind: 'redis', client, keyPrefix: redis.prefix } as const);
      // Two counters over one store: two nodes of a cluster count together in Redis.
      const nodeA = accountRequestCounter(config, store);
      const nodeB = kind === 'redis' ? accountRequestCounter(config, store) : nodeA;
      assert.equal(await nodeA('a'), undefined);
      assert.equal(await nodeB('a'), undefined);
      assert.equal(await nodeA('a'), undefined);
      const wait = await nodeB('a');
      assert.ok(wait !== undefined && wait >= 1 && wait <= 2, `wait ${wait}`);
      assert.equal(await nodeA('b'), undefined, 'another account has its own budget');
      await sleep(1600);
      assert.equal(await nodeA('a'), undefined, 'a new window starts afresh');
    });
  });
}
