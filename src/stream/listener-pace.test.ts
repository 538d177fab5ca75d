import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ListenerPacer } from './listener-pace.js';

describe('ListenerPacer', () => {
  it('grants the burst at once, then the rate, in chunks of at least the quantum', () => {
    let now = 0;
    const pacer = new ListenerPacer({ burstBytes: 100_000, bytesPerSecond: 50_000 }, () => now);
    const pace = pacer.listener();
    assert.equal(pace.grant(1_000_000), 100_000);
    pace.take(100_000);
    assert.equal(pace.grant(1_000_000), 0, 'the burst is spent');
    now = 500; // 25,000 bytes refilled: less than the 32 KiB quantum
    assert.equal(pace.grant(1_000_000), 0);
    now = 700; // 35,000 bytes
    assert.equal(pace.grant(1_000_000), 35_000);
    pace.take(35_000);
    // Fewer bytes ready than the quantum (the live edge): granted as soon as the bucket holds them.
    now = 800;
    assert.equal(pace.grant(4_000), 4_000);
    pace.take(4_000);
    // A listener that kept up refills to the burst, never beyond it.
    now = 60_000;
    assert.equal(pace.grant(1_000_000), 100_000);
  });

  it('wakes a waiting listener when its bucket allows a chunk, and forgets one that leaves', async () => {
    const pacer = new ListenerPacer({ burstBytes: 40_000, bytesPerSecond: 400_000 });
    const pace = pacer.listener();
    pace.take(pace.grant(1_000_000));
    assert.equal(pace.grant(1_000_000), 0);
    const started = performance.now();
    await pace.ready(new AbortController().signal);
    assert.ok(pace.grant(1_000_000) >= pacer.quantumBytes);
    assert.ok(performance.now() - started >= 50, 'woken by the refill, not at once');
    assert.equal(pacer.waitingCount, 0);

    pace.take(pace.grant(1_000_000));
    const leaving = new AbortController();
    const waiting = pace.ready(leaving.signal);
    assert.equal(pacer.waitingCount, 1);
    leaving.abort(new Error('gone'));
    await assert.rejects(waiting, /gone/);
    assert.equal(pacer.waitingCount, 0);

    const other = pacer.listener();
    other.take(other.grant(1_000_000));
    const closing = other.ready(new AbortController().signal);
    other.close();
    await closing; // a closed pace lets its reader go (to see it is destroyed)
    assert.equal(pacer.waitingCount, 0);
    await sleep(0);
  });

  it('refuses settings that could never grant a byte', () => {
    assert.throws(() => new ListenerPacer({ burstBytes: 0, bytesPerSecond: 1 }), RangeError);
    assert.throws(() => new ListenerPacer({ burstBytes: 1, bytesPerSecond: 0 }), RangeError);
  });
});
