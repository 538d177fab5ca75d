// Only cluster nodes may relay a stream session. A client that sent the internal relay header on a
// finished task's stream URL once got a fresh pipeline instead of the 302 (30 requests of 100
// bytes each cost ~36 CPU-s and 16 MB cache files each), and a stream opened that way kept
// delivering a deleted task's audio. The header now carries a proof signed with the cluster's
// secret; without a valid one the request is an ordinary client's. Deleting a task ends its live
// sessions.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { clusterSecret } from '../src/storage/cluster-secret.js';
import { signRelay } from '../src/stream/relay-proof.js';
import {
  bearer,
  createTask,
  createVoice,
  startTestApp,
  waitForTask,
  type TestApp,
} from './helpers/test-app.js';

describe('the relay header needs the cluster secret', () => {
  let t: TestApp;
  /** The app's error lines: an unexpected status names its cause in the assertion message. */
  const errors: string[] = [];
  let streamUrl = '';
  let taskId = '';

  before(async () => {
    t = await startTestApp({
      listen: true,
      env: { LOG_LEVEL: 'error' },
      logger: { stream: { write: (line: string) => void errors.push(line) } },
    });
    const voiceId = await createVoice(t.app, t.key);
    taskId = await createTask(t.app, t.key, [
      { text: 'The relay header is for cluster nodes only, and this task is finished.', voiceId },
    ]);
    await waitForTask(t.app, t.accountId, taskId);
    const res = await t.app.http.inject({
      method: 'GET',
      url: `/api/tts/generate/${taskId}?stream=true`,
      headers: bearer(t.key),
    });
    streamUrl = res.json<{ data: { streamUrl: string } }>().data.streamUrl;
  });
  after(async () => t.close());

  const get = (headers: Record<string, string>) => fetch(streamUrl, { headers, redirect: 'manual' });

  it('a client sending the header gets the 302 to the finished audio, and no pipeline starts', async () => {
    const before = t.app.services.stream.pipelineRuns();
    const { pathname, search } = new URL(streamUrl);
    const forged = [
      '1',
      'true',
      `${String(Math.floor(Date.now() / 1000) + 30)}.${'A'.repeat(43)}`,
      // Signed with another secret, or for another URL.
      signRelay('not-the-cluster-secret', `${pathname}${search}`),
      signRelay(await clusterSecret(t.app.services.database.db, 'stream-relay'), `${pathname}?auth=other`),
    ];
    for (const proof of forged) {
      const res = await get({ 'x-voicegen-relay': proof, range: 'bytes=0-99' });
      assert.equal(res.status, 302, proof);
      await res.body?.cancel();
    }
    assert.equal(t.app.services.stream.pipelineRuns(), before);
    assert.equal(t.app.services.stream.liveSessions(), 0);
  });

  it('a node signing with the cluster secret reads the session, which ends when the task is deleted', async () => {
    const secret = await clusterSecret(t.app.services.database.db, 'stream-relay');
    const { pathname, search } = new URL(streamUrl);
    const res = await get({ 'x-voicegen-relay': signRelay(secret, `${pathname}${search}`) });
    if (res.status !== 200)
      assert.fail(`status ${String(res.status)}: ${await res.text()}\n${errors.join('')}`);
    assert.equal(t.app.services.stream.liveSessions(), 1);
    const reader = (res.body ?? assert.fail('no body')).getReader();
    const first = (await reader.read()) as { value?: Uint8Array };
    assert.ok((first.value?.length ?? 0) > 0);
    const deleted = await t.app.http.inject({
      method: 'DELETE',
      url: `/api/tts/generate/${taskId}`,
      headers: bearer(t.key),
    });
    assert.equal(deleted.statusCode, 200, deleted.body);
    for (let i = 0; i < 100 && t.app.services.stream.liveSessions() > 0; i++) await sleep(20);
    assert.equal(t.app.services.stream.liveSessions(), 0, 'the deleted task has no live session');
    // The reader is cut (or, if everything was already sent, ends): it never hangs.
    await (async () => {
      for (;;) if ((await reader.read()).done) return;
    })().catch(() => undefined);
  });
});
