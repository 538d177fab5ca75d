// Finished audio answered before routing, in the service's process (FINISHED_AUDIO_PROCESS=off; the
// process of its own has its test): over real HTTP, a plain `?auth=` request of a remembered
// finished task gets the very answer, counters, access line and metrics the routes give, and
// everything it does not decide (a wrong token, a deleted task, 304/412/416, the rate limit's 429)
// is still answered by the routes.
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
import {
  assertAccessLineAsRoutes,
  errorCode,
  finishedAudio,
  get,
  routed,
  VOLATILE,
} from './helpers/audio-answers.js';

const LIMIT = 40;

describe('finished audio answered before routing', () => {
  let t: TestApp;
  const lines: string[] = [];
  let audio = '';
  let contentAudio = '';
  let taskId = '';
  const consulted: string[] = [];

  before(async () => {
    t = await startTestApp({
      listen: true,
      env: {
        FINISHED_AUDIO_PROCESS: 'off',
        LOG_LEVEL: 'info',
        STREAM_RATE_LIMIT_MAX: String(LIMIT),
        RATE_LIMIT_WINDOW_MS: '3600000',
      },
      logger: { stream: { write: (line: string) => lines.push(line) } },
    });
    const voiceId = await createVoice(t.app, t.key);
    taskId = await createTask(t.app, t.key, [
      { text: 'Served before routing.', voiceId },
      { text: 'A second piece.', voiceId },
    ]);
    const task = await waitForTask(t.app, t.accountId, taskId);
    const url = new URL(String(task.metadata.audio));
    audio = `${url.pathname}${url.search}`;
    contentAudio = audio.replace('/audio.mp3', '/1/audio.mp3');
    // Count what the shortcut asks of the task service (the real method still answers).
    const tasks = t.app.services.tasks;
    const remembered = tasks.rememberedAudioKey.bind(tasks);
    tasks.rememberedAudioKey = (id, idx, auth) => {
      consulted.push(`${id}/${String(idx)}`);
      return remembered(id, idx, auth);
    };
  });

  after(async () => {
    await t.close();
  });

  it('answers ranges and whole files exactly as the routes do', async () => {
    for (const path of [audio, contentAudio]) {
      for (const headers of [{ range: 'bytes=10-4009' }, { range: 'bytes=-100' }, {}] as Record<
        string,
        string
      >[]) {
        // The routes' answer first: it also makes the task remembered and its audio held.
        const viaRoutes = await get(t.baseUrl, routed(path), headers);
        const before = consulted.length;
        const direct = await get(t.baseUrl, path, headers);
        assert.ok(consulted.length > before, 'the shortcut was asked');
        assert.equal(direct.status, viaRoutes.status);
        assert.equal(direct.status, headers.range === undefined ? 200 : 206);
        assert.deepEqual(direct.body, viaRoutes.body);
        assert.deepEqual(direct.names, viaRoutes.names);
        for (const name of direct.names.filter((n) => !VOLATILE.has(n)))
          assert.equal(direct.headers[name], viaRoutes.headers[name], name);
        assert.match(String(direct.headers['x-service-app-request-id']), /^[0-9a-f-]{36}$/);
      }
    }
  });

  it('writes the routes’ access line, the token redacted, and counts the routes’ metrics', async () => {
    lines.length = 0;
    const direct = await get(t.baseUrl, audio, { range: 'bytes=0-99' });
    const viaRoutes = await get(t.baseUrl, routed(audio), { range: 'bytes=0-99' });
    await assertAccessLineAsRoutes(lines, direct, viaRoutes, audio);

    const metrics = await t.app.http.inject({ method: 'GET', url: '/metrics' });
    assert.match(
      metrics.body,
      /voicegen_http_requests_total\{method="GET",route="\/api\/tts\/generate\/:id\/audio\.mp3",status="206"\} \d+/,
    );
    assert.match(
      metrics.body,
      /voicegen_http_response_bytes_total\{route="\/api\/tts\/generate\/:id\/:contentIndex\/audio\.mp3"\} \d+/,
    );
  });

  it('leaves conditional answers, wrong tokens and unknown contents to the routes', async () => {
    const whole = await get(t.baseUrl, audio);
    const etag = String(whole.headers.etag);
    assert.equal((await get(t.baseUrl, audio, { 'if-none-match': etag })).status, 304);
    assert.equal((await get(t.baseUrl, audio, { 'if-match': '"other"' })).status, 412);
    const unsatisfiable = await get(t.baseUrl, audio, { range: 'bytes=99999999-' });
    assert.equal(unsatisfiable.status, 416);
    assert.equal(errorCode(unsatisfiable), 'RANGE_NOT_SATISFIABLE');
    const partial = await get(t.baseUrl, audio, { range: 'bytes=0-9', 'if-range': etag });
    assert.equal(partial.status, 206);
    const stale = await get(t.baseUrl, audio, { range: 'bytes=0-9', 'if-range': '"stale"' });
    assert.equal(stale.status, 200);
    const wrong = await get(t.baseUrl, audio.replace(/auth=[^&]+/, 'auth=0123456789abcdef'));
    assert.equal(wrong.status, 403);
    assert.equal(errorCode(wrong), 'AUTH_FORBIDDEN');
    const missing = await get(t.baseUrl, audio.replace('/audio.mp3', '/7/audio.mp3'));
    assert.equal(missing.status, 404);
  });

  it('counts in the routes’ rate-limit window, and the routes answer the 429', async () => {
    // A fresh window: the address's earlier requests are in the current one.
    const first = await get(t.baseUrl, audio, { range: 'bytes=0-9' });
    let remaining = Number(first.headers['x-ratelimit-remaining']);
    assert.equal(first.headers['x-ratelimit-limit'], String(LIMIT));
    // Alternate the shortcut and the routes: one count per request, whichever answers.
    for (let i = 0; remaining > 0; i++) {
      const next = await get(t.baseUrl, i % 2 === 0 ? routed(audio) : audio, { range: 'bytes=0-9' });
      assert.equal(next.status, 206);
      assert.equal(Number(next.headers['x-ratelimit-remaining']), remaining - 1);
      remaining -= 1;
    }
    const refused = await get(t.baseUrl, audio, { range: 'bytes=0-9' });
    assert.equal(refused.status, 429);
    assert.equal(errorCode(refused), 'RATE_LIMIT_EXCEEDED');
    assert.ok(refused.headers['retry-after'] !== undefined);
  });

  it('a deleted task is forgotten: its audio answers 404 at once', async () => {
    // A new address would have a new budget; this one is spent, so a second app answers.
    const other = await startTestApp({ listen: true, env: { FINISHED_AUDIO_PROCESS: 'off' } });
    try {
      const { id, path } = await finishedAudio(other, 'Deleted soon.');
      assert.equal((await get(other.baseUrl, path)).status, 200);
      assert.equal((await get(other.baseUrl, path, { range: 'bytes=0-9' })).status, 206);
      const deleted = await other.app.http.inject({
        method: 'DELETE',
        url: `/api/tts/generate/${id}`,
        headers: bearer(other.key),
      });
      assert.equal(deleted.statusCode, 200);
      assert.equal((await get(other.baseUrl, path, { range: 'bytes=0-9' })).status, 404);
    } finally {
      await other.close();
    }
  });
});
