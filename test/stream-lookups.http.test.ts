/**
 * A crowd joining one live session asks for the same task's stream view many times at once: the
 * lookups in flight are shared (one database read), and a lookup after they settled reads again
 * (1,000 listeners' lookups serialised on the database took seconds). The full-task stream's
 * lookups of an unfinished task are kept until its row changes (claimed, finished, cancelled,
 * deleted, a new token), so a crowd arriving over seconds reads it once.
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { randomUUID } from 'node:crypto';
import { newTaskRow, TaskStore } from '../src/tasks/task-store.js';
import { createTask, createVoice, startTestApp, waitForTask, type TestApp } from './helpers/test-app.js';

/** Counts TaskStore.streamRows calls while `body` runs. */
async function countingReads(body: (reads: () => number) => Promise<void>): Promise<void> {
  const prototype = TaskStore.prototype;
  const original = Object.getOwnPropertyDescriptor(prototype, 'streamRows');
  const read = original?.value as TaskStore['streamRows'];
  let reads = 0;
  prototype.streamRows = function (this: TaskStore, taskId: string) {
    reads++;
    return read.call(this, taskId);
  };
  try {
    await body(() => reads);
  } finally {
    if (original !== undefined) Object.defineProperty(prototype, 'streamRows', original);
  }
}

let t: TestApp;
before(async () => {
  // AUTH_CACHE_MS=0: finished tasks are not remembered either, so every settled lookup reads.
  t = await startTestApp({ env: { AUTH_CACHE_MS: '0' } });
});
after(() => t.close());

describe('stream view lookups', () => {
  it('concurrent lookups of one task share one database read; a later lookup reads again', async () => {
    const voiceId = await createVoice(t.app, t.key);
    const id = await createTask(t.app, t.key, [{ text: 'Shared lookups for a crowd.', voiceId }]);
    await countingReads(async (reads) => {
      const views = await Promise.all(Array.from({ length: 50 }, () => t.app.services.tasks.streamView(id)));
      assert.equal(reads(), 1, 'one read for 50 concurrent lookups');
      for (const view of views) assert.equal(view.id, id);
      await t.app.services.tasks.streamView(id);
      assert.equal(reads(), 2, 'a lookup after the shared one settled reads again');
      await assert.rejects(t.app.services.tasks.streamView('00000000-0000-4000-8000-000000000000'));
      await assert.rejects(t.app.services.tasks.streamView('00000000-0000-4000-8000-000000000000'));
      assert.equal(reads(), 4, 'a failed lookup is not remembered');
    });
  });
});

describe('live stream view lookups (AUTH_CACHE_MS default)', () => {
  let live: TestApp;
  before(async () => {
    live = await startTestApp();
  });
  after(() => live.close());

  /** A pending task stored without being queued: nothing claims it, its row changes only here. */
  async function unqueuedTask(): Promise<string> {
    const id = randomUUID();
    const task = newTaskRow({
      id,
      accountId: live.accountId,
      type: 'contents',
      authToken: randomUUID(),
      request: JSON.stringify({ contents: [] }),
      characters: 0,
      at: new Date(),
    });
    await new TaskStore(live.app.services.database.db).insert({ task, pieces: [] });
    return id;
  }

  it("keeps an unfinished task until its row changes; pieces' progress does not end it", async () => {
    const { tasks, events } = live.app.services;
    const id = await unqueuedTask();
    await countingReads(async (reads) => {
      assert.equal((await tasks.liveStreamView(id)).status, 'pending');
      await tasks.liveStreamView(id);
      await tasks.liveStreamView(id);
      assert.equal(reads(), 1, 'one read for three lookups of an unchanged task');
      events.changed(id);
      await tasks.liveStreamView(id);
      assert.equal(reads(), 1, 'a piece started or finished: still kept');
      await tasks.streamView(id);
      assert.equal(reads(), 2, 'streamView (pieces and their audio) still reads each time');
      for (const kind of ['status', 'cancel', 'token', 'deleted'] as const) {
        const before = reads();
        events.changed(id, kind);
        await tasks.liveStreamView(id);
        await tasks.liveStreamView(id);
        assert.equal(reads(), before + 1, `after a ${kind} announcement: read again, then kept`);
      }
    });
  });

  it('a stream asked for while the task generated is redirected once it is generated', async () => {
    const { app, key, accountId } = live;
    const voiceId = await createVoice(app, key);
    // Long enough to be looked up while it is processing.
    const text = Array.from({ length: 30 }, (_, n) => `Sentence ${String(n)} is kept until it is generated.`);
    const id = await createTask(app, key, [{ text: text.join(' '), voiceId }]);
    await waitForTask(app, accountId, id, (task) => task.status !== 'pending');
    const kept = await app.services.tasks.liveStreamView(id);
    assert.equal(kept.status, 'processing', 'looked up while it was processing');
    const done = await waitForTask(app, accountId, id);
    const url = new URL(String(done.streamUrl));
    const res = await app.http.inject({ method: 'GET', url: `${url.pathname}${url.search}` });
    assert.equal(res.statusCode, 302);
    assert.equal(res.headers.location, done.metadata.audio);
  });
});
