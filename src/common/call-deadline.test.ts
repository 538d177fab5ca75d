import assert from 'node:assert/strict';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { CallDeadline, DeadlineExceededError, untilAborted } from './call-deadline.js';

describe('CallDeadline', () => {
  it('aborts with a DeadlineExceededError naming the limit that passed', async () => {
    const deadline = new CallDeadline(new AbortController().signal, 20);
    await once(deadline.signal, 'abort');
    assert.ok(deadline.signal.reason instanceof DeadlineExceededError);
    assert.equal(deadline.exceeded?.limit, 'total');
    assert.equal(deadline.exceeded.ms, 20);
    deadline.clear();
  });

  it('aborts with the parent reason when a parent aborts first; exceeded stays undefined', () => {
    const parent = new AbortController();
    const other = new AbortController();
    const deadline = new CallDeadline([parent.signal, other.signal], 60_000);
    const reason = new Error('cancelled');
    other.abort(reason);
    assert.equal(deadline.signal.reason, reason);
    assert.equal(deadline.exceeded, undefined);
    deadline.clear();
  });

  it('runs extra limits that can be stopped; a stopped limit never fires', async () => {
    const deadline = new CallDeadline([]);
    const stopConnect = deadline.limit('connect', 10);
    stopConnect();
    deadline.limit('first byte', 30);
    await once(deadline.signal, 'abort');
    assert.equal(deadline.exceeded?.limit, 'first byte');
    deadline.clear();
  });

  it('clear() stops every timer: the signal never aborts afterwards', async () => {
    const deadline = new CallDeadline([], 10);
    deadline.limit('connect', 5);
    deadline.clear();
    // Longer than both limits: neither fires once cleared.
    await new Promise((resolve) => setTimeout(resolve, 40));
    assert.equal(deadline.signal.aborted, false);
  });

  it('an already aborted parent aborts at once and starts no timer', () => {
    const parent = new AbortController();
    parent.abort(new Error('gone'));
    const deadline = new CallDeadline(parent.signal, 10);
    assert.equal(deadline.signal.aborted, true);
    assert.equal(deadline.exceeded, undefined);
    deadline.clear();
  });
});

describe('untilAborted', () => {
  it('resolves and rejects as the work does while the signal is not aborted', async () => {
    const signal = new AbortController().signal;
    assert.equal(await untilAborted(Promise.resolve(7), signal), 7);
    await assert.rejects(untilAborted(Promise.reject(new Error('work failed')), signal), /work failed/);
  });

  it('rejects with the abort reason at once, and a later failure of the work is not unhandled', async () => {
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      for (const abortFirst of [true, false]) {
        const controller = new AbortController();
        let fail: (err: Error) => void = () => undefined;
        const work = new Promise<number>((_resolve, reject) => (fail = reject));
        if (abortFirst) controller.abort(new Error('stopped'));
        const waiting = untilAborted(work, controller.signal);
        if (!abortFirst) controller.abort(new Error('stopped'));
        await assert.rejects(waiting, /stopped/);
        fail(new Error('the work failed later'));
        await new Promise((resolve) => setImmediate(resolve));
      }
      assert.deepEqual(unhandled, []);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });
});
