// `response-content-disposition` survives the 302 from a stream endpoint to finished audio: the
// redirect carries it, and the finished-audio routes honour it (validated the
// same way as on the stream endpoints).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { normaliseContentDisposition } from '../src/stream/content-disposition.js';
import type { TaskDetailView } from '../src/tasks/task-service.js';
import { createTask, createVoice, startTestApp, waitForTask, type TestApp } from './helpers/test-app.js';

let t: TestApp;
let task: TaskDetailView;

before(async () => {
  t = await startTestApp();
  const voiceId = await createVoice(t.app, t.key);
  const id = await createTask(t.app, t.key, [
    { type: 'text', text: 'One.', voiceId },
    { type: 'text', text: 'Two.', voiceId },
  ]);
  task = await waitForTask(t.app, t.accountId, id);
});

after(async () => t.close());

const DISPOSITION = 'attachment; filename="dialogue.mp3"';
const param = `response-content-disposition=${encodeURIComponent(DISPOSITION)}`;

/** Path and query of a URL the service handed out. */
function local(url: string): string {
  const u = new URL(url);
  return `${u.pathname}${u.search}`;
}

describe('response-content-disposition across the 302 to finished audio', () => {
  it('the full stream redirect keeps it, and the finished audio answers with it', async () => {
    const streamUrl = local(task.streamUrl ?? assert.fail('no streamUrl'));
    const redirect = await t.app.http.inject({ url: `${streamUrl}&${param}` });
    assert.equal(redirect.statusCode, 302);
    const location = String(redirect.headers.location);
    assert.equal(new URL(location).searchParams.get('response-content-disposition'), DISPOSITION);

    for (const method of ['GET', 'HEAD'] as const) {
      const audio = await t.app.http.inject({ method, url: local(location) });
      assert.equal(audio.statusCode, 200);
      // The same header the stream endpoints send for this parameter.
      assert.equal(audio.headers['content-disposition'], normaliseContentDisposition(DISPOSITION));
    }
    const ranged = await t.app.http.inject({ url: local(location), headers: { range: 'bytes=0-99' } });
    assert.equal(ranged.statusCode, 206);
    assert.match(String(ranged.headers['content-disposition']), /^attachment; filename="dialogue\.mp3"/);

    // Without the parameter the redirect and the audio carry none.
    const plain = await t.app.http.inject({ url: streamUrl });
    assert.equal(
      new URL(String(plain.headers.location)).searchParams.has('response-content-disposition'),
      false,
    );
    const plainAudio = await t.app.http.inject({
      method: 'HEAD',
      url: local(String(plain.headers.location)),
    });
    assert.equal(plainAudio.headers['content-disposition'], undefined);
  });

  it('the per-content stream and pseudo-stream redirects keep it too', async () => {
    const streamUrl = new URL(task.streamUrl ?? assert.fail('no streamUrl'));
    for (const path of ['1/stream.mp3', '1/pseudo/stream.mp3']) {
      const url = `${streamUrl.pathname.replace(/stream\.mp3$/, path)}${streamUrl.search}&${param}`;
      const redirect = await t.app.http.inject({ url });
      assert.equal(redirect.statusCode, 302, `${path}: ${redirect.body}`);
      const audio = await t.app.http.inject({
        method: 'HEAD',
        url: local(String(redirect.headers.location)),
      });
      assert.match(
        String(audio.headers['content-disposition']),
        /^attachment; filename="dialogue\.mp3"/,
        path,
      );
    }
  });

  it('the finished-audio route validates it like the stream endpoints', async () => {
    const audioUrl = local(task.metadata.audio ?? assert.fail('no audio'));
    const bad = await t.app.http.inject({
      url: `${audioUrl}&response-content-disposition=${encodeURIComponent('attachment; filename="a\nb.mp3"')}`,
    });
    assert.equal(bad.statusCode, 400);
    assert.equal(bad.json<{ code: string }>().code, 'VALIDATION_INVALID_VALUE');
    assert.equal(bad.headers['content-disposition'], undefined);
  });
});
