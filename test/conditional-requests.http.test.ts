// Conditional requests per RFC 9110 on the audio routes, in the order of its
// section 13.2.2 (as @fastify/send does): If-Match / If-Unmodified-Since → 412, If-None-Match /
// If-Modified-Since → 304, then If-Range, then 416 or 206. On a listening app with a real client:
// the stored finished audio (whole task and per content, GET and HEAD), the stream endpoints'
// 302 to it (a redirect ignores preconditions, RFC 9110 section 13.2.1), and live and finished stream sessions.
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TaskDetailView } from '../src/tasks/task-service.js';
import { send, type Reply } from './helpers/http-client.js';
import {
  createTask,
  createVoice,
  finishedWithAudio,
  speechMp3,
  startTestApp,
  waitForTask,
  type TestApp,
} from './helpers/test-app.js';

const REQUEST_ID = 'x-service-app-request-id';
/** Generous bound for the espeak task to finish on a busy machine. */
const SETUP_DEADLINE_MS = 120_000;

let t: TestApp;
let task: TaskDetailView;

before(async () => {
  t = await startTestApp({ listen: true, env: { STREAM_RATE_LIMIT_MAX: '100000' } });
  const voiceId = await createVoice(t.app, t.key);
  const id = await createTask(t.app, t.key, [
    { type: 'text', text: 'One.', voiceId },
    { type: 'text', text: 'Two.', voiceId },
  ]);
  task = await waitForTask(t.app, t.accountId, id, finishedWithAudio, SETUP_DEADLINE_MS);
});

after(async () => t.close());

interface ErrorBody {
  status: number;
  code: string;
  message: string;
  requestId?: string;
}

/** A 304: no body, the validator and Cache-Control, the request id; nothing of the representation. */
function assertNotModified(reply: Reply, etag: string, what: string): void {
  assert.equal(reply.status, 304, `${what}: ${reply.body.toString()}`);
  assert.equal(reply.body.length, 0, what);
  assert.equal(reply.headers.etag, etag, what);
  assert.equal(reply.headers['cache-control'], 'private, max-age=86400', what);
  assert.match(String(reply.headers[REQUEST_ID]), /^[0-9a-f-]{36}$/, what);
  assert.equal(reply.headers['content-range'], undefined, what);
  assert.equal(reply.headers['content-type'], undefined, what);
}

/** A 412 with the spec's error body (not reportable: no requestId) and the request-id header. */
function assertPreconditionFailed(reply: Reply, what: string): void {
  assert.equal(reply.status, 412, `${what}: ${reply.body.toString()}`);
  const body = JSON.parse(reply.body.toString('utf8')) as ErrorBody;
  assert.equal(body.status, 412, what);
  assert.equal(body.code, 'PRECONDITION_FAILED', what);
  assert.equal(typeof body.message, 'string', what);
  assert.equal(body.requestId, undefined, what);
  assert.match(String(reply.headers[REQUEST_ID]), /^[0-9a-f-]{36}$/, what);
  assert.match(String(reply.headers['content-type']), /^application\/json/, what);
  assert.equal(reply.headers.etag, undefined, what);
}

/** The finished-audio URL the task detail hands out: the whole task's, or content `index`'s. */
function finishedAudioUrl(index: number | null): string {
  const url = index === null ? task.metadata.audio : task.metadata.contents[index]?.audio;
  return new URL(url ?? assert.fail('no finished audio'), t.baseUrl).toString();
}

/** An HTTP-date `deltaSeconds` away from `date` (second resolution). */
function httpDate(date: string, deltaSeconds: number): string {
  return new Date(Date.parse(date) + deltaSeconds * 1000).toUTCString();
}

describe('conditional requests on stored finished audio (RFC 9110 §13)', () => {
  for (const [name, index] of [
    ['whole task', null],
    ['content 0', 0],
  ] as const) {
    describe(name, () => {
      let audioUrl = '';
      let full: Reply;
      let etag = '';
      let lastModified = '';

      before(async () => {
        audioUrl = finishedAudioUrl(index);
        full = await send(audioUrl);
        assert.equal(full.status, 200);
        etag = String(full.headers.etag);
        lastModified = String(full.headers['last-modified']);
        assert.match(etag, /^"[^"]+"$/);
        assert.ok(full.body.length > 100);
      });

      it('If-None-Match that matches → 304 without a body (GET and HEAD; strong, weak, *, in a list)', async () => {
        for (const method of ['GET', 'HEAD'] as const) {
          for (const value of [etag, `W/${etag}`, '*', `"nope", ${etag}`]) {
            const reply = await send(audioUrl, { method, headers: { 'if-none-match': value } });
            assertNotModified(reply, etag, `${method} If-None-Match: ${value}`);
          }
        }
      });

      it('If-None-Match that does not match (or cannot be parsed) → the full 200', async () => {
        for (const value of ['"nope"', 'not-quoted', `${etag}, *`]) {
          const reply = await send(audioUrl, { headers: { 'if-none-match': value } });
          assert.equal(reply.status, 200, value);
          assert.equal(reply.headers.etag, etag);
          assert.deepEqual(reply.body, full.body, value);
        }
      });

      it('If-Match that does not hold → 412 with the JSON error body (GET and HEAD)', async () => {
        for (const value of ['"nope"', `W/${etag}`, 'not-quoted']) {
          const get = await send(audioUrl, { headers: { 'if-match': value } });
          assertPreconditionFailed(get, `GET If-Match: ${value}`);
          const head = await send(audioUrl, { method: 'HEAD', headers: { 'if-match': value } });
          assert.equal(head.status, 412, `HEAD If-Match: ${value}`);
          assert.equal(head.body.length, 0);
          assert.match(String(head.headers[REQUEST_ID]), /^[0-9a-f-]{36}$/);
        }
      });

      it('If-Match that holds + Range → 206', async () => {
        for (const value of [etag, '*', `"nope", ${etag}`]) {
          const reply = await send(audioUrl, { headers: { 'if-match': value, range: 'bytes=10-99' } });
          assert.equal(reply.status, 206, value);
          assert.equal(reply.headers['content-range'], `bytes 10-99/${String(full.body.length)}`);
          assert.deepEqual(reply.body, full.body.subarray(10, 100));
        }
      });

      it('the order 412 → 304 → If-Range → 416 → 206', async () => {
        const size = full.body.length;
        const beyond = `bytes=${String(size + 10)}-`;
        // If-Match fails and If-None-Match matches: 412 first.
        assertPreconditionFailed(
          await send(audioUrl, { headers: { 'if-match': '"nope"', 'if-none-match': etag } }),
          '412 before 304',
        );
        // If-None-Match matches and the Range is unsatisfiable: 304 first.
        assertNotModified(
          await send(audioUrl, { headers: { 'if-none-match': etag, range: beyond } }),
          etag,
          '304 before 416',
        );
        // If-Range does not match: Range is ignored, the full 200 (even for an unsatisfiable range).
        for (const range of ['bytes=0-9', beyond]) {
          const reply = await send(audioUrl, { headers: { 'if-range': '"old"', range } });
          assert.equal(reply.status, 200, range);
          assert.deepEqual(reply.body, full.body);
        }
        // Every precondition holds, If-Range matches, the Range is unsatisfiable: 416.
        const unsatisfiable = await send(audioUrl, {
          headers: { 'if-match': etag, 'if-none-match': '"nope"', 'if-range': etag, range: beyond },
        });
        assert.equal(unsatisfiable.status, 416);
        assert.equal(unsatisfiable.headers['content-range'], `bytes */${String(size)}`);
        // …and a satisfiable one: 206.
        const partial = await send(audioUrl, {
          headers: { 'if-match': etag, 'if-none-match': '"nope"', 'if-range': etag, range: 'bytes=-10' },
        });
        assert.equal(partial.status, 206);
        assert.deepEqual(partial.body, full.body.subarray(size - 10));
      });

      it('If-Modified-Since / If-Unmodified-Since against Last-Modified, each after its ETag field', async () => {
        assertNotModified(
          await send(audioUrl, { headers: { 'if-modified-since': lastModified } }),
          etag,
          'If-Modified-Since = Last-Modified',
        );
        const older = httpDate(lastModified, -1);
        assert.equal((await send(audioUrl, { headers: { 'if-modified-since': older } })).status, 200);
        // If-None-Match takes precedence: a mismatch means 200 whatever the date says.
        const both = await send(audioUrl, {
          headers: { 'if-none-match': '"nope"', 'if-modified-since': lastModified },
        });
        assert.equal(both.status, 200);
        assertPreconditionFailed(
          await send(audioUrl, { headers: { 'if-unmodified-since': older } }),
          'If-Unmodified-Since before Last-Modified',
        );
        // If-Match takes precedence over If-Unmodified-Since.
        const matched = await send(audioUrl, { headers: { 'if-match': etag, 'if-unmodified-since': older } });
        assert.equal(matched.status, 200);
        // Not an HTTP-date: ignored.
        assert.equal((await send(audioUrl, { headers: { 'if-modified-since': 'yesterday' } })).status, 200);
      });

      it('errors that come before the preconditions win (wrong auth → 403, not 304)', async () => {
        const u = new URL(audioUrl);
        u.searchParams.set('auth', 'wrong');
        const reply = await send(u.toString(), { headers: { 'if-none-match': etag } });
        assert.equal(reply.status, 403);
      });
    });
  }
});

describe('stream endpoints of a task with finished audio', () => {
  it('answer the 302 whatever the preconditions say (RFC 9110 §13.2.1: only 2xx answers are conditional)', async () => {
    const streamUrl = new URL(task.streamUrl ?? assert.fail('no streamUrl'), t.baseUrl);
    const perContent = new URL(streamUrl);
    perContent.pathname = perContent.pathname.replace(/stream\.mp3$/, '0/stream.mp3');
    const pseudo = new URL(streamUrl);
    pseudo.pathname = pseudo.pathname.replace(/stream\.mp3$/, '0/pseudo/stream.mp3');
    for (const url of [streamUrl, perContent, pseudo]) {
      const preconditions: Record<string, string>[] = [{ 'if-match': '"nope"' }, { 'if-none-match': '*' }];
      for (const headers of preconditions) {
        const reply = await send(url.toString(), { headers });
        assert.equal(reply.status, 302, `${url.pathname} ${JSON.stringify(headers)}`);
      }
    }
  });
});

// ---------------------------------------------------------------------------------------------
// Live stream sessions: the session's ETag is known once its build starts, and the preconditions
// are decided against it before If-Range and Range (a closed range does not wait for a 304/412).
// A local OpenAI-compatible upstream sends the first half of its MP3 and holds the rest until the
// test releases it, so the session stays live with some bytes produced.

/** Response headers (and status) of a request whose body may never end: the connection is dropped. */
function headersOf(
  url: string,
  options: { method?: 'GET' | 'HEAD'; headers?: Record<string, string> } = {},
): Promise<{ status: number; headers: IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: options.method ?? 'GET', headers: options.headers, agent: false });
    req.setTimeout(SETUP_DEADLINE_MS, () => req.destroy(new Error(`no response headers from ${url}`)));
    req.on('error', reject);
    req.on('response', (res) => {
      resolve({ status: res.statusCode ?? 0, headers: res.headers });
      res.on('error', () => undefined);
      req.destroy();
    });
    req.end();
  });
}

describe('conditional requests on live stream sessions (RFC 9110 §13)', () => {
  let live: TestApp;
  let releaseUpstream: () => void = () => undefined;
  const held = new Promise<void>((resolve) => (releaseUpstream = resolve));
  let mp3: Buffer = Buffer.alloc(0);
  const upstream = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'audio/mpeg' });
      const half = Math.floor(mp3.length / 2);
      res.write(mp3.subarray(0, half));
      void held.then(() => res.end(mp3.subarray(half)));
    });
  });
  let taskId = '';
  let streamUrl = '';

  before(async () => {
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
    const { port } = upstream.address() as AddressInfo;
    live = await startTestApp({
      listen: true,
      env: {
        STREAM_RATE_LIMIT_MAX: '100000',
        // The test edits task rows behind the service (finished audio forgotten): no lookup cache.
        AUTH_CACHE_MS: '0',
        REMOTE_ENGINES: JSON.stringify({ local: { baseUrl: `http://127.0.0.1:${String(port)}` } }),
      },
    });
    mp3 = await speechMp3(live.app, 'A sentence long enough to give the stream some frames to send.');
    const voiceId = await createVoice(live.app, live.key, {
      name: 'Remote',
      engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' },
    });
    taskId = await createTask(live.app, live.key, [{ type: 'text', text: 'Held.', voiceId }]);
    const detail = await live.app.services.tasks.get(live.accountId, taskId, { stream: 'true' });
    streamUrl = new URL(detail.streamUrl ?? assert.fail('no streamUrl'), live.baseUrl).toString();
  });

  after(async () => {
    releaseUpstream();
    await live.close();
    await new Promise((resolve) => upstream.close(resolve));
  });

  /** The stream URL with another path (per content) or another session `i`. */
  const variant = (path: string, i?: string): string => {
    const u = new URL(streamUrl);
    u.pathname = u.pathname.replace(/stream\.mp3$/, path);
    if (i !== undefined) u.searchParams.set('i', i);
    return u.toString();
  };

  it('If-None-Match / If-Match against the live ETag, in the order 412 → 304 → If-Range → Range', async () => {
    const first = await headersOf(streamUrl);
    assert.equal(first.status, 200);
    assert.equal(first.headers['cache-control'], 'no-store');
    const etag = String(first.headers.etag);
    assert.match(etag, /^"[^"]+"$/);
    // A closed range inside the half the upstream sent: 206 once those bytes exist (the session is live).
    const ranged = await send(streamUrl, { headers: { 'if-match': etag, range: 'bytes=0-99' } });
    assert.equal(ranged.status, 206);
    assert.equal(ranged.headers['content-range'], 'bytes 0-99/*');
    assert.equal(ranged.body.length, 100);
    const runs = live.app.services.stream.pipelineRuns();

    for (const method of ['GET', 'HEAD'] as const) {
      for (const value of [etag, `W/${etag}`, '*']) {
        const reply = await send(streamUrl, { method, headers: { 'if-none-match': value } });
        assert.equal(reply.status, 304, `${method} If-None-Match: ${value}`);
        assert.equal(reply.body.length, 0);
        assert.equal(reply.headers.etag, etag);
        assert.equal(reply.headers['cache-control'], 'no-store');
        assert.match(String(reply.headers[REQUEST_ID]), /^[0-9a-f-]{36}$/);
      }
    }
    // A mismatch: the live 200.
    const mismatch = await headersOf(streamUrl, { headers: { 'if-none-match': '"nope"' } });
    assert.equal(mismatch.status, 200);
    assert.equal(mismatch.headers['transfer-encoding'], 'chunked');
    // If-Match fails: 412 JSON, also when If-None-Match would match.
    assertPreconditionFailed(await send(streamUrl, { headers: { 'if-match': '"nope"' } }), 'live If-Match');
    assertPreconditionFailed(
      await send(streamUrl, { headers: { 'if-match': '"nope"', 'if-none-match': etag } }),
      'live 412 before 304',
    );
    // If-None-Match matches: 304 at once, although the closed range would wait for bytes far ahead.
    const far = await send(streamUrl, {
      headers: { 'if-none-match': etag, range: 'bytes=900000000-900000099' },
    });
    assert.equal(far.status, 304);
    // If-Range does not match: the live 200 from byte 0.
    const ifRange = await headersOf(streamUrl, { headers: { 'if-range': '"old"', range: 'bytes=0-99' } });
    assert.equal(ifRange.status, 200);
    assert.equal(ifRange.headers['content-range'], undefined);
    // None of these started another build.
    assert.equal(live.app.services.stream.pipelineRuns(), runs);
  });

  it('the per-content session answers 304 against its own ETag', async () => {
    const url = variant('0/stream.mp3');
    const first = await headersOf(url);
    assert.equal(first.status, 200);
    const etag = String(first.headers.etag);
    const reply = await send(url, { headers: { 'if-none-match': etag } });
    assert.equal(reply.status, 304);
    assert.equal(reply.headers.etag, etag);
    // The whole task's ETag is another session's.
    const other = await headersOf(url, { headers: { 'if-none-match': '"nope"' } });
    assert.equal(other.status, 200);
  });

  it('If-None-Match: * on a key with no session is a 304 that starts no pipeline (GET and HEAD)', async () => {
    const runs = live.app.services.stream.pipelineRuns();
    for (const method of ['GET', 'HEAD'] as const) {
      const reply = await send(variant('stream.mp3', `fresh-${method}`), {
        method,
        headers: { 'if-none-match': '*' },
      });
      assert.equal(reply.status, 304, method);
      assert.equal(reply.body.length, 0);
      assert.equal(reply.headers.etag, undefined);
      assert.match(String(reply.headers[REQUEST_ID]), /^[0-9a-f-]{36}$/);
    }
    assert.equal(live.app.services.stream.pipelineRuns(), runs);
  });

  it('a finished session: 304 with its final Cache-Control, If-Match + Range → 206 with the size', async () => {
    releaseUpstream();
    const deadline = Date.now() + SETUP_DEADLINE_MS;
    for (;;) {
      const task = await live.app.services.tasks.get(live.accountId, taskId);
      if (task.status === 'failed') assert.fail(task.error);
      if (task.status === 'generated' && task.metadata.audio !== undefined) break;
      if (Date.now() > deadline) assert.fail('the task did not finish in time');
      await sleep(20);
    }
    // A task "generated without finished audio": the stream endpoint answers from its session.
    const { db } = live.app.services.database;
    await db.updateTable('tasks').set({ audio_key: null }).where('id', '=', taskId).execute();
    await db.updateTable('task_contents').set({ audio_key: null }).where('task_id', '=', taskId).execute();
    const full = await send(streamUrl);
    assert.equal(full.status, 200);
    const etag = String(full.headers.etag);
    const notModified = await send(streamUrl, { headers: { 'if-none-match': etag } });
    assert.equal(notModified.status, 304);
    assert.equal(notModified.headers['cache-control'], 'private, no-cache');
    assert.equal(notModified.body.length, 0);
    const ranged = await send(streamUrl, { headers: { 'if-match': etag, range: 'bytes=0-99' } });
    assert.equal(ranged.status, 206);
    assert.equal(ranged.headers['content-range'], `bytes 0-99/${String(full.body.length)}`);
    assert.deepEqual(ranged.body, full.body.subarray(0, 100));
    const beyond = `bytes=${String(full.body.length + 1)}-`;
    assert.equal((await send(streamUrl, { headers: { 'if-none-match': etag, range: beyond } })).status, 304);
    assert.equal((await send(streamUrl, { headers: { range: beyond } })).status, 416);
    const ifRange = await send(streamUrl, { headers: { 'if-range': '"old"', range: 'bytes=0-99' } });
    assert.equal(ifRange.status, 200);
    assert.deepEqual(ifRange.body, full.body);
  });
});
