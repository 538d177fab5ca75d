/**
 * A crowd joining one live session asks for the same task's stream view many times at once: the
 * lookups in flight are shared (one database read), and a lookup after they settled reads again
 * (1,000 listeners' lookups serialised on the database took seconds).
 */
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { TaskStore } from '../src/tasks/task-store.js';
import { createTask, createVoice, startTestApp, type TestApp } from './helpers/test-app.js';

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
    const prototype = TaskStore.prototype;
    const original = Object.getOwnPropertyDescriptor(prototype, 'streamRows');
    const read = original?.value as TaskStore['streamRows'];
    let reads = 0;
    prototype.streamRows = function (this: TaskStore, taskId: string) {
      reads++;
      return read.call(this, taskId);
    };
    try {
      const views = await Promise.all(Array.from({ length: 50 }, () => t.app.services.tasks.streamView(id)));
      assert.equal(reads, 1, 'one read for 50 concurrent lookups');
      for (const view of views) assert.equal(view.id, id);
      await t.app.services.tasks.streamView(id);
      assert.equal(reads, 2, 'a lookup after the shared one settled reads again');
      await assert.rejects(t.app.services.tasks.streamView('00000000-0000-4000-8000-000000000000'));
      await assert.rejects(t.app.services.tasks.streamView('00000000-0000-4000-8000-000000000000'));
      assert.equal(reads, 4, 'a failed lookup is not remembered');
    } finally {
      if (original !== undefined) Object.defineProperty(prototype, 'streamRows', original);
    }
  });
});
