// The per-node lookup caches of the hot paths: a key
// that authenticated and a finished task's audio are answered without a database lookup per
// request for AUTH_CACHE_MS, and forgotten at once when revoked or deleted through the node.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import {
  bearer,
  createTask,
  createVoice,
  startTestApp,
  waitForTask,
  type TestApp,
} from './helpers/test-app.js';

let t: TestApp;

before(async () => {
  t = await startTestApp(); // embedded: AUTH_CACHE_MS defaults to 60 s
});

after(async () => {
  await t.close();
});

/** The path and query of an absolute URL the service returned. */
const pathOf = (url: string): string => {
  const parsed = new URL(url);
  return `${parsed.pathname}${parsed.search}`;
};

describe('finished tasks are served from memory once looked up', () => {
  it('serves finished audio and the stream 302 after the rows are gone behind its back', async () => {
    const voiceId = await createVoice(t.app, t.key);
    const id = await createTask(t.app, t.key, [{ text: 'Remembered once finished.', voiceId }]);
    const task = await waitForTask(t.app, t.accountId, id);
    const audio = pathOf(String(task.metadata.audio));
    const stream = pathOf(String(task.streamUrl));
    const first = await t.app.http.inject({ method: 'GET', url: audio });
    assert.equal(first.statusCode, 200);
    assert.equal((await t.app.http.inject({ method: 'GET', url: stream })).statusCode, 302);

    // Removed behind the service's back (as another node's delete would): still remembered here.
    const db = t.app.services.database.db;
    await db.deleteFrom('task_contents').where('task_id', '=', id).execute();
    await db.deleteFrom('tasks').where('id', '=', id).execute();
    const again = await t.app.http.inject({ method: 'GET', url: audio, headers: { range: 'bytes=0-99' } });
    assert.equal(again.statusCode, 206);
    assert.deepEqual(again.rawPayload, first.rawPayload.subarray(0, 100));
    const redirect = await t.app.http.inject({ method: 'GET', url: stream });
    assert.equal(redirect.statusCode, 302);
    assert.equal(redirect.headers.location, String(task.metadata.audio));
    // A wrong token is still refused from the cache.
    const wrong = await t.app.http.inject({ method: 'GET', url: audio.replace(/auth=[^&]+/, 'auth=wrong') });
    assert.equal(wrong.statusCode, 403);
  });

  it('a task deleted through the API is forgotten at once', async () => {
    const voiceId = await createVoice(t.app, t.key);
    const id = await createTask(t.app, t.key, [{ text: 'Deleted through the API.', voiceId }]);
    const task = await waitForTask(t.app, t.accountId, id);
    const audio = pathOf(String(task.metadata.audio));
    assert.equal((await t.app.http.inject({ method: 'GET', url: audio })).statusCode, 200);
    const deleted = await t.app.http.inject({
      method: 'DELETE',
      url: `/api/tts/generate/${id}`,
      headers: bearer(t.key),
    });
    assert.equal(deleted.statusCode, 200, deleted.body);
    const gone = await t.app.http.inject({ method: 'GET', url: audio });
    assert.equal(gone.statusCode, 404);
    assert.equal(gone.json<{ code: string }>().code, 'GENERATE_NOT_FOUND');
  });
});

describe('authenticated keys are remembered', () => {
  it('a key revoked through the admin API stops at once', async () => {
    const { key, accountId } = await t.newAccount();
    const info = () => t.app.http.inject({ method: 'GET', url: '/api/account/info', headers: bearer(key) });
    assert.equal((await info()).statusCode, 200);
    const [issued] = await t.app.services.accounts.listKeys(accountId);
    assert.ok(issued);
    const revoked = await t.app.http.inject({
      method: 'POST',
      url: `/admin/keys/${issued.id}/revoke`,
      headers: bearer(String(t.app.adminToken)),
    });
    assert.equal(revoked.statusCode, 200, revoked.body);
    assert.equal((await info()).statusCode, 401);
  });
});
