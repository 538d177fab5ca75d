// Rate-limit keys no client can multiply: keyed by task id, each random task id would get a fresh budget,
// and @fastify/rate-limit's in-process LRU (5,000 counters) would let such a flood evict every other
// client's counter, resetting its budget. Limits are keyed by what a client cannot multiply (its address,
// its account) and the in-process store never evicts a live counter (src/http/rate-limit.contract.test.ts
// covers both stores under a flood of keys).
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

const ATTACKER = '203.0.113.66';
const VICTIM = '198.51.100.5';
const STREAM_MAX = 5;

describe('random task ids cannot reset other clients’ counters', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { STREAM_RATE_LIMIT_MAX: String(STREAM_MAX), RATE_LIMIT_MAX: '5' } });
  });
  after(async () => t.close());

  const streamRequest = (remoteAddress: string, taskId = randomUUID()) =>
    t.app.http.inject({ url: `/api/tts/generate/${taskId}/stream.mp3?auth=x`, remoteAddress });

  it('a flood of 6,000 random task ids from one address is limited after its own budget, and the victim’s budget keeps decreasing', async () => {
    const victimTask = randomUUID();
    const remaining: string[] = [];
    for (let n = 0; n < 2; n++) {
      remaining.push(String((await streamRequest(VICTIM, victimTask)).headers['x-ratelimit-remaining']));
    }
    let attackerPassed = 0;
    // More than the 5,000 counters of the old LRU.
    for (let n = 0; n < 6_000; n++) {
      const res = await streamRequest(ATTACKER);
      if (res.statusCode !== 429) attackerPassed += 1;
      else if (n === STREAM_MAX) assert.equal(res.json<{ code: string }>().code, 'RATE_LIMIT_EXCEEDED');
    }
    assert.equal(attackerPassed, STREAM_MAX, 'new task ids give no new budget');
    for (let n = 0; n < 3; n++) {
      remaining.push(String((await streamRequest(VICTIM, victimTask)).headers['x-ratelimit-remaining']));
    }
    assert.deepEqual(remaining, ['4', '3', '2', '1', '0']);
    const limited = await streamRequest(VICTIM, victimTask);
    assert.equal(limited.statusCode, 429);
    assert.ok(Number(limited.headers['retry-after']) >= 1);
  });

  it('finished audio shares no counter with the stream endpoints and is keyed by address alone', async () => {
    const address = '198.51.100.77';
    for (let n = 0; n < STREAM_MAX; n++) {
      const res = await t.app.http.inject({
        url: `/api/tts/generate/${randomUUID()}/audio.mp3?auth=x`,
        remoteAddress: address,
      });
      assert.notEqual(res.statusCode, 429);
    }
    const limited = await t.app.http.inject({
      url: `/api/tts/generate/${randomUUID()}/audio.mp3?auth=x`,
      remoteAddress: address,
    });
    assert.equal(limited.statusCode, 429);
    assert.notEqual((await streamRequest(address)).statusCode, 429);
  });

  it('IPv6 clients are keyed by their /64: rotating addresses inside it gives no new budget', async () => {
    let passed = 0;
    for (let n = 0; n < 20; n++) {
      const res = await streamRequest(`2001:db8:1:2::${n.toString(16)}`);
      if (res.statusCode !== 429) passed += 1;
    }
    assert.equal(passed, STREAM_MAX);
    assert.notEqual((await streamRequest('2001:db8:1:3::1')).statusCode, 429);
  });

  it('bearer routes are counted per account: another account’s requests from the same address do not use its budget', async () => {
    const other = await t.newAccount();
    const address = '198.51.100.90';
    for (let n = 0; n < 5; n++) {
      const res = await t.app.http.inject({
        url: '/api/account/info',
        headers: bearer(other.key),
        remoteAddress: address,
      });
      assert.equal(res.statusCode, 200);
    }
    assert.equal(
      (
        await t.app.http.inject({
          url: '/api/account/info',
          headers: bearer(other.key),
          remoteAddress: address,
        })
      ).statusCode,
      429,
    );
    const mine = await t.app.http.inject({
      url: '/api/account/info',
      headers: bearer(t.key),
      remoteAddress: address,
    });
    assert.equal(mine.statusCode, 200);
    assert.equal(mine.headers['x-ratelimit-remaining'], '4');
  });
});
