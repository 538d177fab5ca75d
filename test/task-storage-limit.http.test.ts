// The stored audio of an account's tasks is bounded (ACCOUNT_MAX_TASK_BYTES): every stored MP3 —
// the merged audio and each content's — counts once, account info reports it, a new task (and a
// one-shot, which is a task) is refused with 403 BILLING_QUOTA_EXCEEDED before anything is written
// once the stored audio has reached the limit, and deleting a task frees its bytes.
import assert from 'node:assert/strict';
import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadConfig } from '../src/config/config.js';
import {
  bearer,
  createTask,
  createVoice,
  startTestApp,
  waitForTask,
  type TestApp,
} from './helpers/test-app.js';

interface ErrorBody {
  status: number;
  code: string;
  message: string;
}

/** Far below two short contents of 320 kbps MP3 (each tens of KB). */
const LIMIT = 20_000;

describe('stored task audio per account', () => {
  let t: TestApp;
  before(async () => {
    t = await startTestApp({ env: { ACCOUNT_MAX_TASK_BYTES: String(LIMIT) } });
  });
  after(async () => t.close());

  const info = async (key: string) =>
    (await t.app.http.inject({ method: 'GET', url: '/api/account/info', headers: bearer(key) })).json<{
      data: { limits: Record<string, number | null>; usage: Record<string, number> };
    }>().data;

  /** Bytes of a stored blob of the embedded (filesystem) blob store. */
  const blobBytes = async (key: string): Promise<number> =>
    (await stat(join(t.app.config.dataDir, 'blobs', key))).size;

  const taskCount = async (accountId: string): Promise<number> =>
    Number(
      (
        await t.app.services.database.db
          .selectFrom('tasks')
          .select((eb) => eb.fn.countAll<string>().as('n'))
          .where('account_id', '=', accountId)
          .executeTakeFirstOrThrow()
      ).n,
    );

  it('counts every stored MP3 once, refuses new tasks at the limit without writing, and frees bytes on delete', async () => {
    const { key, accountId } = await t.newAccount();
    const voiceId = await createVoice(t.app, key);
    const before = await info(key);
    assert.equal(before.limits.taskBytes, LIMIT);
    assert.equal(before.usage.taskBytes, 0);

    // Under the limit (nothing stored): admitted, and it may take the account past the limit.
    const id = await createTask(t.app, key, [
      { text: 'The first content of a task.', voiceId },
      { text: 'And its second content.', voiceId },
    ]);
    await waitForTask(t.app, accountId, id);
    const stored =
      (await blobBytes(`tasks/${id}/audio.mp3`)) +
      (await blobBytes(`tasks/${id}/contents/0.mp3`)) +
      (await blobBytes(`tasks/${id}/contents/1.mp3`));
    const after = await info(key);
    assert.equal(after.usage.taskBytes, stored, 'the merged and both content MP3s');
    assert.ok(stored > LIMIT);

    // At the limit: refused, nothing written (no task, no characters counted).
    const tasks = await taskCount(accountId);
    const refused = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/generate',
      headers: bearer(key),
      payload: { contents: [{ text: 'One more, please.', voiceId }] },
    });
    assert.equal(refused.statusCode, 403, refused.body);
    const body = refused.json<ErrorBody>();
    assert.equal(body.status, 403);
    assert.equal(body.code, 'BILLING_QUOTA_EXCEEDED');
    assert.match(body.message, new RegExp(`${stored} bytes of stored task audio, at most ${LIMIT}`));
    const oneShot = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/simple-generate',
      headers: bearer(key),
      payload: { text: 'A one-shot is a task too.', voiceId },
    });
    assert.equal(oneShot.statusCode, 403, oneShot.body);
    assert.equal(oneShot.json<ErrorBody>().code, 'BILLING_QUOTA_EXCEEDED');
    assert.equal(await taskCount(accountId), tasks, 'no task was written');
    assert.equal((await info(key)).usage.charactersToday, after.usage.charactersToday);

    // Another account is not affected.
    const other = await t.newAccount();
    const otherVoice = await createVoice(t.app, other.key);
    await createTask(t.app, other.key, [{ text: 'Someone else.', voiceId: otherVoice }]);

    // Deleting the task frees its bytes: new tasks are accepted again.
    const del = await t.app.http.inject({
      method: 'DELETE',
      url: `/api/tts/generate/${id}`,
      headers: bearer(key),
    });
    assert.equal(del.statusCode, 200);
    assert.equal((await info(key)).usage.taskBytes, 0);
    await createTask(t.app, key, [{ text: 'Room again.', voiceId }]);
  });

  it('counts a one-content task once: its merged audio is its content audio', async () => {
    const { key, accountId } = await t.newAccount();
    const voiceId = await createVoice(t.app, key);
    const id = await createTask(t.app, key, [{ text: 'Only one content here.', voiceId }]);
    await waitForTask(t.app, accountId, id);
    assert.equal((await info(key)).usage.taskBytes, await blobBytes(`tasks/${id}/contents/0.mp3`));
  });

  it('defaults to 10 GiB; 0 is unlimited (null in account info)', async () => {
    assert.equal(loadConfig({ DATA_DIR: '/nonexistent' }).storageLimits.taskBytes, 10 * 1024 ** 3);
    assert.equal(
      loadConfig({ DATA_DIR: '/nonexistent', ACCOUNT_MAX_TASK_BYTES: '0' }).storageLimits.taskBytes,
      0,
    );
    const unlimited = await startTestApp({ env: { ACCOUNT_MAX_TASK_BYTES: '0' } });
    try {
      const res = await unlimited.app.http.inject({
        method: 'GET',
        url: '/api/account/info',
        headers: bearer(unlimited.key),
      });
      const data = res.json<{ data: { limits: Record<string, number | null> } }>().data;
      assert.equal(data.limits.taskBytes, null);
    } finally {
      await unlimited.close();
    }
  });
});
