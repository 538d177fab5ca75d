// The rate-limit store contract, run against the in-process store and the Redis store: a fixed
// window per key with 429 RATE_LIMIT_EXCEEDED and Retry-After beyond it, separate counters per key
// and per rule; with Redis, two app instances (two nodes) count the same requests.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { freshRedis } from '../../test/helpers/servers.js';
import { loadConfig } from '../config/config.js';
import { registerRateLimit, type RateLimitStore } from './rate-limit.js';
import { createHttpServer } from './server.js';

interface StoreFixture {
  name: string;
  /** Whether two app instances share counters (they do through Redis, never in process). */
  shared: boolean;
  /** The store; `capacity` bounds the keys of an in-process store (Redis keys expire with their window). */
  store(capacity?: number): RateLimitStore;
}

const redis = freshRedis();
const client = new Redis(redis.url, { maxRetriesPerRequest: 2 });
after(async () => {
  await client.quit();
});

const fixtures: StoreFixture[] = [
  {
    name: 'memory',
    shared: false,
    store: (capacity) => (capacity === undefined ? { kind: 'memory' } : { kind: 'memory', capacity }),
  },
  { name: 'redis', shared: true, store: () => ({ kind: 'redis', client, keyPrefix: redis.prefix }) },
];

/** An app with two rules on two routes, keyed by the `x-client` header. */
async function appWith(store: RateLimitStore, ruleName: string): Promise<FastifyInstance> {
  const app = createHttpServer(loadConfig({ LOG_LEVEL: 'silent' }), false);
  for (const [path, name] of [
    ['/a', `${ruleName}-a`],
    ['/b', `${ruleName}-b`],
  ] as const) {
    await app.register(async (scope) => {
      await registerRateLimit(
        scope,
        { name, max: 3, windowMs: 60_000, keyGenerator: (r) => String(r.headers['x-client']) },
        store,
      );
      scope.get(path, async () => ({ ok: true }));
    });
  }
  await app.ready();
  return app;
}

let rules = 0;

for (const fixture of fixtures) {
  describe(`rate-limit store contract: ${fixture.name}`, () => {
    it('lets max requests through per key, then answers 429 RATE_LIMIT_EXCEEDED with Retry-After', async () => {
      const app = await appWith(fixture.store(), `r${String(++rules)}`);
      try {
        for (let n = 0; n < 3; n++) {
          assert.equal((await app.inject({ url: '/a', headers: { 'x-client': 'one' } })).statusCode, 200);
        }
        const limited = await app.inject({ url: '/a', headers: { 'x-client': 'one' } });
        assert.equal(limited.statusCode, 429);
        assert.equal(limited.json<{ code: string }>().code, 'RATE_LIMIT_EXCEEDED');
        assert.ok(Number(limited.headers['retry-after']) >= 1);
        assert.match(String(limited.headers['x-service-app-request-id']), /^[0-9a-f-]{36}$/);
        // Another key and another rule have counters of their own.
        assert.equal((await app.inject({ url: '/a', headers: { 'x-client': 'two' } })).statusCode, 200);
        assert.equal((await app.inject({ url: '/b', headers: { 'x-client': 'one' } })).statusCode, 200);
      } finally {
        await app.close();
      }
    });

    // @fastify/rate-limit's in-process LRU (5,000 keys) dropped live counters
    // when requests came under many new keys, so everyone's budget started over.
    it('a flood of new keys never resets the counter of another key', async () => {
      const app = await appWith(fixture.store(50), `r${String(++rules)}`);
      try {
        const victim = { 'x-client': 'victim' };
        for (let n = 0; n < 2; n++)
          assert.equal((await app.inject({ url: '/a', headers: victim })).statusCode, 200);
        for (let n = 0; n < 300; n++) {
          const flood = await app.inject({ url: '/a', headers: { 'x-client': `flood-${String(n)}` } });
          // Beyond an in-process store's capacity, newcomers are refused rather than counted.
          assert.ok(flood.statusCode === 200 || (!fixture.shared && flood.statusCode === 429));
        }
        const third = await app.inject({ url: '/a', headers: victim });
        assert.equal(third.statusCode, 200);
        assert.equal(third.headers['x-ratelimit-remaining'], '0');
        assert.equal((await app.inject({ url: '/a', headers: victim })).statusCode, 429);
      } finally {
        await app.close();
      }
    });

    it(`${fixture.shared ? 'counts' : 'does not count'} the requests of another node`, async () => {
      const name = `r${String(++rules)}`;
      const [nodeA, nodeB] = [await appWith(fixture.store(), name), await appWith(fixture.store(), name)];
      try {
        for (let n = 0; n < 3; n++) {
          const node = n % 2 === 0 ? nodeA : nodeB;
          assert.equal((await node.inject({ url: '/a', headers: { 'x-client': 'k' } })).statusCode, 200);
        }
        const fourth = await nodeB.inject({ url: '/a', headers: { 'x-client': 'k' } });
        assert.equal(fourth.statusCode, fixture.shared ? 429 : 200);
      } finally {
        await nodeA.close();
        await nodeB.close();
      }
    });
  });
}
