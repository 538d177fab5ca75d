// A task's stream token can be rotated by its owner (`POST /api/tts/generate/{id}/rotate-token`,
// our extension): every URL carrying the old token then answers 403 AUTH_FORBIDDEN — the stream
// 302, the per-content stream, the stored audio files — even where the finished task's view is
// remembered (AUTH_CACHE_MS, 60 s embedded), and the new URLs work. Another account cannot rotate.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import type { TaskDetailView } from '../src/tasks/task-service.js';
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

let t: TestApp;
let voiceId: string;

before(async () => {
  t = await startTestApp(); // embedded: finished tasks are remembered for 60 s
  voiceId = await createVoice(t.app, t.key);
});

after(async () => {
  await t.close();
});

/** The path and query of an absolute URL the service returned. */
const pathOf = (url: string): string => {
  const parsed = new URL(url);
  return `${parsed.pathname}${parsed.search}`;
};

/** Every URL of a finished task that carries its token: stream, per-content stream, stream URL, audio files. */
function tokenUrls(task: TaskDetailView): string[] {
  const stream = pathOf(String(task.streamUrl));
  const auth = new URL(String(task.streamUrl)).searchParams.get('auth') ?? assert.fail('no auth');
  const base = `/api/tts/generate/${task.id}`;
  return [
    stream,
    `${base}/0/stream.mp3?auth=${auth}`,
    `${base}/0/pseudo/stream.mp3?auth=${auth}`,
    `${base}/stream?auth=${auth}`,
    pathOf(String(task.metadata.audio)),
    pathOf(String(task.metadata.contents[0]?.audio)),
  ];
}

const get = (url: string) => t.app.http.inject({ method: 'GET', url });

const rotate = (id: string, key = t.key) =>
  t.app.http.inject({ method: 'POST', url: `/api/tts/generate/${id}/rotate-token`, headers: bearer(key) });

async function finishedTask(text: string): Promise<TaskDetailView> {
  const id = await createTask(t.app, t.key, [
    { text, voiceId },
    { text: 'And a second content.', voiceId },
  ]);
  return waitForTask(t.app, t.accountId, id);
}

describe('rotating a stream token', () => {
  it('ends every old URL with 403 AUTH_FORBIDDEN, remembered or not, and the new URLs work', async () => {
    const task = await finishedTask('Rotate my token.');
    const old = tokenUrls(task);
    // Each old URL works, and the finished task is now remembered by this node.
    for (const url of old) assert.ok([200, 302].includes((await get(url)).statusCode), url);

    const res = await rotate(task.id);
    assert.equal(res.statusCode, 200, res.body);
    const rotated = res.json<{ data: TaskDetailView }>().data;
    assert.equal(rotated.id, task.id);
    assert.equal(rotated.status, 'generated');
    assert.ok(rotated.streamUrl, 'the answer carries the new stream URL');
    const fresh = tokenUrls(rotated);
    for (let i = 0; i < fresh.length; i++) assert.notEqual(fresh[i], old[i]);

    for (const url of old) {
      const refused = await get(url);
      assert.equal(refused.statusCode, 403, url);
      assert.equal(refused.json<ErrorBody>().code, 'AUTH_FORBIDDEN', url);
    }
    const ranged = await t.app.http.inject({
      method: 'GET',
      url: old[4] ?? '',
      headers: { range: 'bytes=0-9' },
    });
    assert.equal(ranged.statusCode, 403, 'the old token cannot range-read either');

    for (const url of fresh) assert.ok([200, 302].includes((await get(url)).statusCode), url);
    const redirect = await get(fresh[0] ?? '');
    assert.equal(redirect.statusCode, 302);
    assert.equal(
      redirect.headers.location,
      rotated.metadata.audio,
      'the stream redirects to the new audio URL',
    );
    const detail = await t.app.http.inject({
      method: 'GET',
      url: `/api/tts/generate/${task.id}?stream=true`,
      headers: bearer(t.key),
    });
    assert.equal(detail.json<{ data: TaskDetailView }>().data.streamUrl, rotated.streamUrl);
  });

  it("is refused for another account's task and an unknown one (404), and needs a key", async () => {
    const task = await finishedTask('Not yours to rotate.');
    const other = await t.newAccount();
    for (const [id, key] of [
      [task.id, other.key],
      ['not-a-task', t.key],
    ] as const) {
      const res = await rotate(id, key);
      assert.equal(res.statusCode, 404, id);
      assert.equal(res.json<ErrorBody>().code, 'GENERATE_NOT_FOUND');
    }
    const noKey = await t.app.http.inject({
      method: 'POST',
      url: `/api/tts/generate/${task.id}/rotate-token`,
    });
    assert.equal(noKey.statusCode, 401);
    // Nothing changed: the owner's URLs still work.
    for (const url of tokenUrls(task)) assert.ok([200, 302].includes((await get(url)).statusCode), url);
  });

  it('forgets a token rotated on another node when that node announces it', async () => {
    const task = await finishedTask('Rotated elsewhere.');
    const audio = pathOf(String(task.metadata.audio));
    assert.equal((await get(audio)).statusCode, 200); // remembered here from now on
    // Another node's rotation: the row changes behind this node's back, then the announcement.
    const db = t.app.services.database.db;
    await db
      .updateTable('tasks')
      .set({ auth_token: 'f'.repeat(32) })
      .where('id', '=', task.id)
      .execute();
    assert.equal((await get(audio)).statusCode, 200, 'still remembered before the announcement');
    t.app.services.events.changed(task.id, 'token');
    assert.equal((await get(audio)).statusCode, 403);
    assert.equal((await get(audio.replace(/auth=[^&]+/, `auth=${'f'.repeat(32)}`))).statusCode, 200);
  });
});
