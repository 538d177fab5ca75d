// The in-process rate-limit counters: fixed windows, bounded memory, and no
// eviction of a live counter, however many new keys arrive.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MemoryRateLimitCounters } from './rate-limit-store.memory.js';

const WINDOW = 1_000;

describe('MemoryRateLimitCounters', () => {
  it('counts per key within a window and starts over when it ends', () => {
    let now = 0;
    const counters = new MemoryRateLimitCounters(10, () => now);
    assert.deepEqual(counters.increment('a', WINDOW, 5), { current: 1, ttl: 1000 });
    now = 400;
    assert.deepEqual(counters.increment('a', WINDOW, 5), { current: 2, ttl: 600 });
    assert.deepEqual(counters.increment('b', WINDOW, 5), { current: 1, ttl: 1000 });
    assert.deepEqual(counters.read('a', WINDOW), { current: 2, ttl: 600 });
    now = 1_000;
    assert.deepEqual(counters.read('a', WINDOW), { current: 0, ttl: 0 });
    assert.deepEqual(counters.increment('a', WINDOW, 5), { current: 1, ttl: 1000 });
  });

  it('a flood of new keys never evicts a live counter: newcomers are over their limit until a window ends', () => {
    let now = 0;
    const counters = new MemoryRateLimitCounters(100, () => now);
    for (let n = 0; n < 3; n++) counters.increment('victim', WINDOW, 5);
    now = 10;
    for (let n = 0; n < 99; n++) assert.equal(counters.increment(`flood-${String(n)}`, WINDOW, 5).current, 1);
    // Full of live windows: 10,000 more keys are refused, none stored.
    for (let n = 99; n < 10_099; n++) {
      const refused = counters.increment(`flood-${String(n)}`, WINDOW, 5);
      assert.equal(refused.current, 6);
      // Until the oldest window (the victim's) ends.
      assert.equal(refused.ttl, 990);
    }
    assert.equal(counters.size, 100);
    // The victim's counter went on where it was.
    assert.deepEqual(counters.increment('victim', WINDOW, 5), { current: 4, ttl: 990 });
    // When windows end, their keys are swept and newcomers are counted again.
    now = 1_000;
    assert.deepEqual(counters.increment('newcomer', WINDOW, 5), { current: 1, ttl: 1000 });
    now = 1_010;
    counters.increment('another', WINDOW, 5);
    assert.equal(counters.size, 2);
  });

  it('a restarted window moves to the end, so expired keys are always swept first', () => {
    let now = 0;
    const counters = new MemoryRateLimitCounters(2, () => now);
    counters.increment('a', WINDOW, 5);
    now = 500;
    counters.increment('b', WINDOW, 5);
    now = 1_000; // a's window ended: a restarts and moves behind b
    counters.increment('a', WINDOW, 5);
    now = 1_500; // b's window ended, a's runs until 2,000
    assert.equal(counters.increment('c', WINDOW, 5).current, 1);
    assert.deepEqual(counters.read('a', WINDOW), { current: 1, ttl: 500 });
  });

  it('refuses a capacity that is not a positive integer', () => {
    assert.throws(() => new MemoryRateLimitCounters(0), RangeError);
  });
});
