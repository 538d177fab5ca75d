// Task lists once carried every task's full texts (8 concurrent list calls pushed RSS to 3.35 GB).
// Lists answer summaries bounded by the page size: each task's first 20 contents with texts cut to
// 200 characters and their audio URLs (clients show a history from them); the detail endpoint
// keeps the whole record; limit is 1–50 (default 20). Tasks run against a remote engine
// that answers 503, so they fail at once instead of synthesising two million characters.
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TaskDetailView, TaskSummaryView } from '../src/tasks/task-service.js';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

const CONTENTS = 200;
const TEXT_LENGTH = 10_000;

const upstream = createServer((req, res) => {
  req.resume();
  req.on('end', () => void res.writeHead(503).end('down'));
});

let t: TestApp;
let voiceId = '';

before(async () => {
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  t = await startTestApp({
    env: {
      MAX_CONTENTS: String(CONTENTS),
      MAX_TEXT_LENGTH: String(TEXT_LENGTH),
      REMOTE_ENGINES: JSON.stringify({ local: { baseUrl: `http://127.0.0.1:${port}` } }),
    },
  });
  const res = await t.app.http.inject({
    method: 'POST',
    url: '/api/voice',
    headers: bearer(t.key),
    payload: { name: 'Down', engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' } },
  });
  assert.equal(res.statusCode, 200, res.body);
  voiceId = res.json<{ data: { id: string } }>().data.id;
});

after(async () => {
  await t.close();
  await new Promise((resolve) => upstream.close(resolve));
});

/** A text of exactly TEXT_LENGTH characters that names its piece, so a leak is findable. */
function pieceText(i: number): string {
  const head = `Piece-${String(i).padStart(3, '0')}-marker `;
  return (head + 'zebra '.repeat(TEXT_LENGTH)).slice(0, TEXT_LENGTH - 1) + '.';
}

async function createTask(contents: object[]): Promise<string> {
  const res = await t.app.http.inject({
    method: 'POST',
    url: '/api/tts/generate',
    headers: bearer(t.key),
    payload: { contents },
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json<{ data: { id: string } }>().data.id;
}

/** Waits (polling the service, not HTTP) until the task has failed against the 503 upstream. */
async function waitFinished(id: string): Promise<void> {
  for (;;) {
    const task = await t.app.services.tasks.get(t.accountId, id);
    if (task.status === 'failed' || task.status === 'generated') return;
    await sleep(20);
  }
}

async function list(query = '') {
  return t.app.http.inject({ method: 'GET', url: `/api/tts/generate${query}`, headers: bearer(t.key) });
}

describe('task list summaries', () => {
  it('lists a task of 200 × 10,000 characters as a small summary; detail keeps every text', async () => {
    const texts = Array.from({ length: CONTENTS }, (_, i) => pieceText(i));
    const id = await createTask(texts.map((text) => ({ type: 'text', text, voiceId })));
    await waitFinished(id);

    const res = await list('?stream=true');
    assert.equal(res.statusCode, 200, res.body);
    assert.ok(res.rawPayload.length < 16 * 1024, `list body is ${res.rawPayload.length} bytes for one task`);
    assert.ok(!res.body.includes('Piece-020-marker'), 'only the first 20 contents are listed');
    const body = res.json<{ data: TaskSummaryView[]; total: number }>();
    assert.equal(body.total, 1);
    const summary = body.data[0];
    assert.ok(summary);
    assert.equal(summary.id, id);
    assert.equal(summary.userId, t.accountId);
    assert.equal(summary.status, 'failed');
    assert.equal(summary.type, 'contents');
    assert.match(summary.createdAt, /^\d{4}-\d\d-\d\dT/);
    assert.match(String(summary.error), /the speech engine failed \(engine error\)/);
    assert.match(String(summary.streamUrl), new RegExp(`/api/tts/generate/${id}/stream\\.mp3\\?auth=`));
    assert.deepEqual(summary.metadata, {
      contents: texts.slice(0, 20).map((text, index) => ({
        index,
        type: 'text',
        text: text.slice(0, 200),
        textTruncated: true,
        voiceId,
      })),
      characters: CONTENTS * TEXT_LENGTH,
      contentsCount: CONTENTS,
      voices: [(await t.app.services.voices.get(t.accountId, voiceId)) as unknown],
    });

    const detail = await t.app.http.inject({
      method: 'GET',
      url: `/api/tts/generate/${id}`,
      headers: bearer(t.key),
    });
    assert.equal(detail.statusCode, 200);
    const task = detail.json<{ data: TaskDetailView }>().data;
    assert.deepEqual(
      task.metadata.contents.map((c) => c.text),
      texts,
    );
    assert.equal(task.metadata.characters, CONTENTS * TEXT_LENGTH);
  });

  it('pages 20 by default, at most 50, and refuses limits outside 1–50', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 21; i++) ids.push(await createTask([{ text: `Task ${i}.`, voiceId }]));
    for (const id of ids) await waitFinished(id);

    const byDefault = (await list()).json<{ data: TaskSummaryView[]; total: number }>();
    assert.equal(byDefault.total, 22);
    assert.equal(byDefault.data.length, 20);
    assert.deepEqual(
      byDefault.data.map((x) => x.id),
      [...ids].reverse().slice(0, 20),
    );
    const max = (await list('?limit=50')).json<{ data: TaskSummaryView[] }>();
    assert.equal(max.data.length, 22);

    for (const query of ['?limit=51', '?limit=0', '?limit=1000000', '?limit=-1', '?limit=2.5']) {
      const res = await list(query);
      assert.equal(res.statusCode, 400, query);
      assert.equal(res.json<{ code: string }>().code, 'VALIDATION_INVALID_VALUE', query);
    }
  });

  it("lists a generated task with its contents' texts and audio URLs, as history views read them", async () => {
    const made = await t.app.http.inject({
      method: 'POST',
      url: '/api/voice',
      headers: bearer(t.key),
      payload: { name: 'Embedded' },
    });
    const embedded = made.json<{ data: { id: string } }>().data.id;
    const long = `${'word '.repeat(60)}end.`;
    const id = await createTask([
      { text: 'Hello there.', voiceId: embedded },
      { text: long, voiceId: embedded },
    ]);
    await waitFinished(id);
    const listed = (await list()).json<{ data: TaskSummaryView[] }>().data.find((x) => x.id === id);
    assert.ok(listed);
    assert.equal(listed.status, 'generated');
    const [first, second] = listed.metadata.contents;
    assert.equal(first?.text, 'Hello there.');
    assert.equal(first?.textTruncated, false);
    assert.equal(second?.text, [...long].slice(0, 200).join(''));
    assert.equal(second?.textTruncated, true);
    assert.equal(listed.metadata.contentsCount, 2);
    for (const content of [first, second]) {
      assert.ok(content?.audio, 'a generated content lists its audio URL');
      assert.ok((content.duration ?? 0) > 0);
      const audio = await t.app.http.inject({
        method: 'GET',
        url: new URL(content.audio).pathname + new URL(content.audio).search,
      });
      assert.equal(audio.statusCode, 200);
      assert.equal(audio.headers['content-type'], 'audio/mpeg');
    }
  });
});
