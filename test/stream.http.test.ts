// The stream endpoints through HTTP on the real app (listening server, node:http client):
// byte stability under 50 concurrent readers, Range/If-Range/416/HEAD, every status and auth
// branch, header rules, `i` sessions, mid-stream failure, reclaim, rate limit, MP3 validity.
// Generation runs for real: the embedded espeak engine, and a local OpenAI-compatible upstream
// (remote engine) whose pacing and failures each test controls.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { createServer, request as httpRequest, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { App } from '../src/app.js';
import { encodePiece } from '../src/audio/continuous-encoder.js';
import { CANONICAL_RATE } from '../src/audio/pcm.js';
import type { TaskDetailView } from '../src/tasks/task-service.js';
import { ffmpegErrors, probeAudio } from './helpers/audio-check.js';
import { send, type Reply, type RequestOptions } from './helpers/http-client.js';
import { bearer, startTestApp, type TestApp } from './helpers/test-app.js';

/** Two MP3 frames at 44.1 kHz: the duration tolerance of the issue. */
const TWO_FRAMES = (2 * 1152) / 44100;
const FORBIDDEN_HEADERS = ['x-service-audio-id', 'x-service-response-data'];
const REQUEST_ID = 'x-service-app-request-id';

const json = <T>(reply: Reply): T => JSON.parse(reply.body.toString('utf8')) as T;
const sha = (b: Uint8Array): string => createHash('sha256').update(b).digest('hex');

interface ErrorBody {
  status: number;
  code: string;
  message: string;
  requestId?: string;
}

function assertError(reply: Reply, status: number, code: string, reportable = false): ErrorBody {
  assert.equal(reply.status, status, reply.body.toString());
  const body = json<ErrorBody>(reply);
  assert.equal(body.status, status);
  assert.equal(body.code, code);
  if (reportable) assert.equal(body.requestId, reply.headers[REQUEST_ID]);
  else assert.equal(body.requestId, undefined);
  assertHeaderRules(reply);
  return body;
}

/** Headers every stream answer obeys. */
function assertHeaderRules(reply: Reply): void {
  for (const name of FORBIDDEN_HEADERS)
    assert.equal(reply.headers[name], undefined, `${name} must never be sent`);
  assert.match(String(reply.headers[REQUEST_ID]), /^[0-9a-f-]{36}$/);
}

/** A 200/206 audio answer: audio/mpeg, byte ranges, an ETag; live = chunked without length. */
function assertAudio(reply: Reply, live: boolean): void {
  assertHeaderRules(reply);
  assert.equal(reply.headers['content-type'], 'audio/mpeg');
  assert.equal(reply.headers['accept-ranges'], 'bytes');
  assert.match(String(reply.headers.etag), /^"[A-Za-z0-9_-]+"$/);
  if (live) {
    assert.equal(reply.headers['content-length'], undefined);
    assert.equal(reply.headers['transfer-encoding'], 'chunked');
    assert.equal(reply.headers['cache-control'], 'no-store');
  } else {
    assert.ok(reply.headers['content-length'] !== undefined);
  }
}

/**
 * HEAD of a live stream that no GET has started: the live headers, and no ETag because no build
 * exists yet (HEAD never starts a pipeline).
 */
function assertLiveHeadWithoutBuild(reply: Reply): void {
  assertHeaderRules(reply);
  assert.equal(reply.headers['content-type'], 'audio/mpeg');
  assert.equal(reply.headers['accept-ranges'], 'bytes');
  assert.equal(reply.headers['content-length'], undefined);
  assert.equal(reply.headers['transfer-encoding'], 'chunked');
  assert.equal(reply.headers['cache-control'], 'no-store');
  assert.equal(reply.headers.etag, undefined);
}

/** Start offset of a 206's Content-Range. */
function rangeStart(reply: Reply): number {
  const m = /^bytes (\d+)-(\d+)\/(\d+|\*)$/.exec(String(reply.headers['content-range']));
  assert.ok(m, `Content-Range ${String(reply.headers['content-range'])}`);
  return Number(m[1]);
}

// ---------------------------------------------------------------------------------------------
// A local OpenAI-compatible upstream. The request's `input` text says what to answer:
//   "tone <hz> <seconds> [paced]"  a sine tone as MP3 (paced: 4 KiB every 25 ms)
//   "break <hz> <seconds>"         half of the tone's MP3, then the connection is cut
//   "refuse"                       HTTP 500 after 300 ms
//   "hold"                         nothing until releaseHeld()

let t: TestApp;
let app: App;
let remoteVoice = '';
const mp3Cache = new Map<string, Promise<Buffer>>();
let releaseHeld: () => void = () => undefined;
let held = new Promise<void>((resolve) => (releaseHeld = resolve));

function sine(seconds: number, hz: number): Int16Array {
  const pcm = new Int16Array(Math.round(seconds * CANONICAL_RATE));
  for (let n = 0; n < pcm.length; n++)
    pcm[n] = Math.round(9000 * Math.sin((2 * Math.PI * hz * n) / CANONICAL_RATE));
  return pcm;
}

function toneMp3(hz: number, seconds: number): Promise<Buffer> {
  const key = `${String(hz)}/${String(seconds)}`;
  let mp3 = mp3Cache.get(key);
  if (mp3 === undefined) {
    mp3 = (async () => {
      const parts: Uint8Array[] = [];
      for await (const b of encodePiece([sine(seconds, hz)], app.services.encoders.open())) parts.push(b);
      return Buffer.concat(parts);
    })();
    mp3Cache.set(key, mp3);
  }
  return mp3;
}

async function answerUpstream(input: string, res: ServerResponse): Promise<void> {
  const [verb, hz, seconds, mode] = input.split(' ');
  if (verb === 'hold') await held;
  if (verb === 'refuse' || verb === 'hold') {
    if (verb === 'refuse') await sleep(300);
    res.writeHead(500, { 'content-type': 'text/plain' }).end('upstream says no');
    return;
  }
  const mp3 = await toneMp3(Number(hz), Number(seconds));
  res.writeHead(200, { 'content-type': 'audio/mpeg' });
  const end = verb === 'break' ? Math.floor(mp3.length / 2) : mp3.length;
  for (let o = 0; o < end; o += 4096) {
    if (!res.write(mp3.subarray(o, Math.min(end, o + 4096)))) await new Promise((r) => res.once('drain', r));
    if (mode === 'paced') await sleep(25);
  }
  if (verb === 'break') res.destroy();
  else res.end();
}

const upstream = createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    const { input } = JSON.parse(Buffer.concat(parts).toString('utf8')) as { input: string };
    answerUpstream(input, res).catch(() => res.destroy());
  });
});

before(async () => {
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  t = await startTestApp({
    listen: true,
    env: {
      GENERATION_CONCURRENCY: '1',
      // One slot in the short lane too: these tests hold the only slot with a short task.
      SHORT_TASK_CONCURRENCY: '1',
      STREAM_RATE_LIMIT_MAX: '100000',
      // forgetFinishedAudio edits task rows behind the service: no per-node lookup cache.
      AUTH_CACHE_MS: '0',
      REMOTE_ENGINES: JSON.stringify({ local: { baseUrl: `http://127.0.0.1:${String(port)}` } }),
    },
  });
  app = t.app;
  remoteVoice = await createVoice({
    name: 'Tone',
    engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' },
  });
});

after(async () => {
  releaseHeld();
  await t.close();
  await new Promise((resolve) => upstream.close(resolve));
});

async function createVoice(payload: object, target: TestApp = t): Promise<string> {
  const res = await target.app.http.inject({
    method: 'POST',
    url: '/api/voice',
    headers: bearer(target.key),
    payload,
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json<{ data: { id: string } }>().data.id;
}

async function createTask(contents: object[], target: TestApp = t): Promise<string> {
  const res = await target.app.http.inject({
    method: 'POST',
    url: '/api/tts/generate',
    headers: bearer(target.key),
    payload: { contents },
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json<{ data: { id: string } }>().data.id;
}

async function detail(id: string, target: TestApp = t): Promise<TaskDetailView> {
  const res = await target.app.http.inject({
    method: 'GET',
    url: `/api/tts/generate/${id}?stream=true`,
    headers: bearer(target.key),
  });
  assert.equal(res.statusCode, 200, res.body);
  return res.json<{ data: TaskDetailView }>().data;
}

/** Waits (polling the service, not HTTP) until the task satisfies `done`. */
async function waitTask(
  id: string,
  done: (task: TaskDetailView) => boolean,
  target: TestApp = t,
): Promise<TaskDetailView> {
  for (;;) {
    const task = await target.app.services.tasks.get(target.accountId, id);
    if (done(task)) return task;
    await sleep(10);
  }
}

const finished = (task: TaskDetailView): boolean =>
  task.status === 'failed' || (task.status === 'generated' && task.metadata.audio !== undefined);

/** A task "generated without finished audio": the stored audio's record is removed. */
async function forgetFinishedAudio(id: string, target: TestApp = t): Promise<void> {
  const { db } = target.app.services.database;
  await db.updateTable('tasks').set({ audio_key: null }).where('id', '=', id).execute();
  await db.updateTable('task_contents').set({ audio_key: null }).where('task_id', '=', id).execute();
}

function pipelineRuns(target: TestApp = t): number {
  return target.app.services.stream.pipelineRuns();
}

/** Replaces the path of a stream URL, keeping its origin and query. */
function withPath(streamUrl: string, path: string, extraQuery = ''): string {
  const u = new URL(streamUrl);
  u.pathname = u.pathname.replace(/\/stream\.mp3$/, path);
  return `${u.toString()}${extraQuery}`;
}

/** Follows one 302 (to the stored finished audio), keeping the request's headers. */
async function sendFollowing(
  url: string,
  options: RequestOptions = {},
): Promise<{ reply: Reply; redirected: boolean }> {
  const first = await send(url, options);
  if (first.status !== 302) return { reply: first, redirected: false };
  assertHeaderRules(first);
  return { reply: await send(String(first.headers.location), options), redirected: true };
}

// ---------------------------------------------------------------------------------------------

describe('a 5-piece task read by 50 concurrent clients while it generates', () => {
  const TONES = [440, 550, 660, 770, 880];
  const INTERVALS = [0.3, 0.5, 0.2, 0.4, 0.5];
  let id = '';
  let streamUrl = '';
  let reference: Buffer = Buffer.alloc(0);
  let task: TaskDetailView;
  let runsBefore = 0;
  const etags = new Set<string>();
  const segments: { offset: number; bytes: Buffer; who: string }[] = [];
  const wholeBodies: Buffer[] = [];
  const headTimes: number[] = [];
  let waitedRange: Reply | undefined;
  let headBeforeBytes: Reply | undefined;

  before(async () => {
    runsBefore = pipelineRuns();
    id = await createTask(
      TONES.map((hz, i) => ({
        type: 'text',
        text: `tone ${String(hz)} 1.5 paced`,
        voiceId: remoteVoice,
        interval: INTERVALS[i],
      })),
    );
    await waitTask(id, (x) => x.status !== 'pending');
    streamUrl = String((await detail(id)).streamUrl);

    const record = (reply: Reply, who: string, redirected: boolean): void => {
      if (reply.status === 200 || reply.status === 206) {
        if (!redirected) etags.add(String(reply.headers.etag));
        const offset = reply.status === 206 ? rangeStart(reply) : 0;
        segments.push({ offset, bytes: reply.body, who });
      } else assert.fail(`${who}: unexpected ${String(reply.status)} ${reply.body.toString()}`);
    };

    // Nothing is produced yet: a HEAD answers at once, a closed range far ahead waits for its bytes.
    const headFirst = send(streamUrl, { method: 'HEAD' });
    const ranged = send(streamUrl, { headers: { range: 'bytes=200000-200999' } });

    const readers = Array.from({ length: 50 }, async (_, n) => {
      await sleep((n * 37) % 1500);
      const who = `reader ${String(n)}`;
      switch (n % 5) {
        case 0: {
          const { reply, redirected } = await sendFollowing(streamUrl);
          record(reply, who, redirected);
          if (reply.status === 200) wholeBodies.push(reply.body);
          return;
        }
        case 1: {
          const start = (n * 7919) % 150_000;
          const { reply, redirected } = await sendFollowing(streamUrl, {
            headers: { range: `bytes=${String(start)}-${String(start + 999 + n * 13)}` },
          });
          record(reply, who, redirected);
          return;
        }
        case 2: {
          // Disconnect after some bytes, then resume with `bytes=N-` as a browser does.
          const { reply: first, redirected: firstRedirected } = await sendFollowing(streamUrl, {
            dropAfter: 5000 + n * 211,
          });
          record(first, `${who} (before the drop)`, firstRedirected);
          const { reply, redirected } = await sendFollowing(streamUrl, {
            headers: { range: `bytes=${String(first.body.length)}-` },
          });
          record(reply, `${who} (resumed)`, redirected);
          return;
        }
        case 3: {
          const reply = await send(streamUrl, { method: 'HEAD' });
          if (reply.status === 302) return;
          assert.equal(reply.body.length, 0);
          assertHeaderRules(reply);
          // HEAD never starts a session: an ETag only once a GET built one.
          if (reply.headers.etag !== undefined) etags.add(String(reply.headers.etag));
          headTimes.push(reply.headersMs);
          return;
        }
        default: {
          const { reply, redirected } = await sendFollowing(streamUrl, {
            headers: { range: `bytes=${String(n * 101)}-` },
          });
          record(reply, who, redirected);
        }
      }
    });
    headBeforeBytes = await headFirst;
    waitedRange = await ranged;
    await Promise.all(readers);
    task = await waitTask(id, finished);
    assert.equal(task.status, 'generated', task.error);
    const { reply } = await sendFollowing(streamUrl);
    assert.equal(reply.status, 200);
    reference = reply.body;
  });

  it('gives every reader the bytes of the finished stream at their offsets; the pipeline ran once, one ETag', () => {
    assert.ok(segments.length >= 40, `${String(segments.length)} segments`);
    for (const s of segments) {
      assert.ok(s.offset + s.bytes.length <= reference.length, `${s.who}: beyond the end`);
      assert.ok(
        s.bytes.equals(reference.subarray(s.offset, s.offset + s.bytes.length)),
        `${s.who}: bytes differ at ${String(s.offset)}`,
      );
    }
    assert.ok(wholeBodies.length > 0);
    for (const body of wholeBodies) assert.equal(sha(body), sha(reference));
    assert.equal(pipelineRuns() - runsBefore, 1);
    assert.equal(etags.size, 1, [...etags].join(' '));
  });

  it('answers HEAD during generation at once with the live headers and no body', () => {
    assert.ok(headBeforeBytes);
    assert.equal(headBeforeBytes.status, 200);
    assertLiveHeadWithoutBuild(headBeforeBytes);
    assert.equal(headBeforeBytes.body.length, 0);
    // Live headers (no Content-Length) prove HEAD was answered while the session still grew.
    assert.ok(headTimes.length > 0);
  });

  it('makes a closed range wait until its bytes exist, then answers 206 bytes a-b/*', () => {
    assert.ok(waitedRange);
    assert.equal(waitedRange.status, 206);
    assert.equal(waitedRange.headers['content-range'], 'bytes 200000-200999/*');
    assert.equal(waitedRange.headers['content-length'], '1000');
    assert.equal(waitedRange.headers['cache-control'], 'no-store');
    assert.ok(waitedRange.body.equals(reference.subarray(200000, 201000)));
  });

  it('is one clean 320 kb/s 44.1 kHz stereo MP3 as long as the pieces and silences', async () => {
    assert.equal(await ffmpegErrors(reference), '');
    const info = await probeAudio(reference);
    assert.deepEqual([info.codec, info.sampleRate, info.channels, info.bitRate], ['mp3', 44100, 2, 320000]);
    const expected = task.estimatedDuration;
    assert.ok(
      Math.abs(info.durationSeconds - expected) <= TWO_FRAMES,
      `duration ${String(info.durationSeconds)}, expected ${String(expected)}`,
    );
  });

  it('redirects to the finished audio once it exists, without the pipeline', async () => {
    const runs = pipelineRuns();
    const reply = await send(streamUrl);
    assert.equal(reply.status, 302);
    assert.equal(reply.headers.location, task.metadata.audio);
    assertHeaderRules(reply);
    const head = await send(streamUrl, { method: 'HEAD' });
    assert.equal(head.status, 302);
    assert.equal(pipelineRuns(), runs);
  });

  describe('finished session without finished audio (generated, metadata.audio absent)', () => {
    let size = 0;
    let etag = '';
    let storedPiece: Buffer = Buffer.alloc(0);
    before(async () => {
      const piece = await send(String(task.metadata.contents[1]?.audio));
      assert.equal(piece.status, 200);
      storedPiece = piece.body;
      await forgetFinishedAudio(id);
      size = reference.length;
      etag = [...etags][0] ?? '';
    });

    it('serves a late joiner from the cache: 200 with Content-Length, same ETag, no new pipeline', async () => {
      const runs = pipelineRuns();
      const reply = await send(streamUrl);
      assert.equal(reply.status, 200);
      assertAudio(reply, false);
      assert.equal(reply.headers['content-length'], String(size));
      assert.equal(reply.headers['transfer-encoding'], undefined);
      assert.equal(reply.headers.etag, etag);
      assert.equal(reply.headers['cache-control'], 'private, no-cache');
      assert.equal(sha(reply.body), sha(reference));
      assert.equal(pipelineRuns(), runs);
    });

    it('honours If-Range only with the current ETag', async () => {
      const match = await send(streamUrl, { headers: { range: 'bytes=100-199', 'if-range': etag } });
      assert.equal(match.status, 206);
      assert.equal(match.headers['content-range'], `bytes 100-199/${String(size)}`);
      assert.ok(match.body.equals(reference.subarray(100, 200)));
      for (const other of ['"not-the-etag"', `W/${etag}`, 'Wed, 21 Oct 2015 07:28:00 GMT']) {
        const full = await send(streamUrl, { headers: { range: 'bytes=100-199', 'if-range': other } });
        assert.equal(full.status, 200, other);
        assert.equal(full.headers['content-length'], String(size));
        assert.equal(sha(full.body), sha(reference));
      }
    });

    it('answers ranges of the finished session: open, suffix, clamped; 416 beyond the end', async () => {
      const open = await send(streamUrl, { headers: { range: `bytes=${String(size - 1000)}-` } });
      assert.equal(open.status, 206);
      assert.equal(
        open.headers['content-range'],
        `bytes ${String(size - 1000)}-${String(size - 1)}/${String(size)}`,
      );
      assert.ok(open.body.equals(reference.subarray(size - 1000)));
      const suffix = await send(streamUrl, { headers: { range: 'bytes=-500' } });
      assert.equal(
        suffix.headers['content-range'],
        `bytes ${String(size - 500)}-${String(size - 1)}/${String(size)}`,
      );
      const clamped = await send(streamUrl, {
        headers: { range: `bytes=${String(size - 10)}-${String(size + 5000)}` },
      });
      assert.equal(clamped.status, 206);
      assert.equal(clamped.body.length, 10);
      const beyond = await send(streamUrl, { headers: { range: `bytes=${String(size)}-` } });
      assertError(beyond, 416, 'RANGE_NOT_SATISFIABLE');
      assert.equal(beyond.headers['content-range'], `bytes */${String(size)}`);
      const headBeyond = await send(streamUrl, {
        method: 'HEAD',
        headers: { range: `bytes=${String(size + 10)}-` },
      });
      assert.equal(headBeyond.status, 416);
    });

    it('answers HEAD with the headers of the same GET and no body', async () => {
      const cases: Record<string, string>[] = [{}, { range: 'bytes=10-99' }, { range: 'bytes=10-' }];
      for (const headers of cases) {
        const get = await send(streamUrl, { headers });
        const head = await send(streamUrl, { method: 'HEAD', headers });
        assert.equal(head.status, get.status);
        assert.equal(head.body.length, 0);
        for (const name of [
          'content-type',
          'content-length',
          'content-range',
          'etag',
          'accept-ranges',
          'cache-control',
        ]) {
          assert.equal(head.headers[name], get.headers[name], name);
        }
      }
    });

    it('sets Content-Disposition from response-content-disposition, and rejects control characters', async () => {
      const q = `&response-content-disposition=${encodeURIComponent('attachment; filename="dialogue.mp3"')}`;
      const reply = await send(`${streamUrl}${q}`, { method: 'HEAD' });
      assert.equal(reply.status, 200);
      assert.equal(reply.headers['content-disposition'], 'attachment; filename="dialogue.mp3"');
      const bad = await send(
        `${streamUrl}&response-content-disposition=${encodeURIComponent('attachment; filename="a\nb.mp3"')}`,
      );
      assertError(bad, 400, 'VALIDATION_INVALID_VALUE');
    });

    it('ignores format, bitrate and sampleRate parameters', async () => {
      const reply = await send(`${streamUrl}&format=wav&bitrate=64&sampleRate=8000`);
      assert.equal(reply.status, 200);
      assert.equal(reply.headers['content-type'], 'audio/mpeg');
      assert.equal(sha(reply.body), sha(reference));
    });

    it('keys sessions by `i`: two values, two pipeline runs, two ETags, the same bytes', async () => {
      const runs = pipelineRuns();
      const a = await send(`${streamUrl}&i=player-a`);
      const b = await send(`${streamUrl}&i=player_b`);
      const a2 = await send(`${streamUrl}&i=player-a`, { method: 'HEAD' });
      assert.equal(pipelineRuns() - runs, 2);
      assert.notEqual(a.headers.etag, b.headers.etag);
      assert.notEqual(a.headers.etag, etag);
      assert.equal(a2.headers.etag, a.headers.etag);
      assert.equal(sha(a.body), sha(reference));
      assert.equal(sha(b.body), sha(reference));
      for (const bad of ['a%20b', 'x'.repeat(65), '%C3%A9', 'a&i=b'])
        assertError(await send(`${streamUrl}&i=${bad}`), 400, 'VALIDATION_INVALID_VALUE');
    });

    it('streams one content alone, encoded like the stored piece audio', async () => {
      const reply = await send(withPath(streamUrl, '/1/stream.mp3'));
      assertAudio(reply, reply.headers['content-length'] === undefined);
      assert.equal(sha(reply.body), sha(storedPiece));
      const info = await probeAudio(reply.body);
      assert.deepEqual([info.sampleRate, info.channels, info.bitRate], [44100, 2, 320000]);
      for (const index of ['5', 'x', '01', '-1']) {
        assertError(await send(withPath(streamUrl, `/${index}/stream.mp3`)), 404, 'RESOURCE_NOT_FOUND');
      }
    });

    it('pseudo-streams redirect to finished piece audio, else STREAM_NOT_READY', async () => {
      assertError(await send(withPath(streamUrl, '/0/pseudo/stream.mp3')), 400, 'STREAM_NOT_READY', true);
      assertError(await send(withPath(streamUrl, '/9/pseudo/stream.mp3')), 404, 'RESOURCE_NOT_FOUND');
    });
  });
});

describe('the full-task stream forwards the encoding generation makes', () => {
  /**
   * Creates a task of `contents`, reads its full-task stream live while it is generated, checks
   * those bytes are its stored audio, and answers the seconds of audio the encoder pool encoded.
   */
  async function streamedLive(contents: object[]): Promise<number> {
    const encodedBefore = app.services.encoders.encoded.audioSeconds;
    const id = await createTask(contents);
    await waitTask(id, (x) => x.status !== 'pending');
    const { reply, redirected } = await sendFollowing(String((await detail(id)).streamUrl));
    assert.equal(redirected, false, 'read live, while the task was generated');
    assert.equal(reply.status, 200);
    const task = await waitTask(id, finished);
    assert.equal(task.status, 'generated', task.error);
    const stored = await send(String(task.metadata.audio));
    assert.equal(stored.status, 200);
    assert.ok(reply.body.equals(stored.body), 'the live stream is the stored audio');
    return app.services.encoders.encoded.audioSeconds - encodedBefore;
  }

  it("a task of one piece: its piece's MP3, encoded once, the same bytes as its stored audio", async () => {
    await toneMp3(330, 8); // the upstream's answer, encoded before counting
    const encoded = await streamedLive([{ type: 'text', text: 'tone 330 8 paced', voiceId: remoteVoice }]);
    assert.ok(
      encoded > 7.5 && encoded < 8.5,
      `${String(encoded)} s encoded for 8 s of audio: once, not twice`,
    );
  });

  it('a task of two pieces: its merged MP3, encoded while generated, the same bytes as its stored audio', async () => {
    await Promise.all([toneMp3(340, 4), toneMp3(350, 4)]);
    const encoded = await streamedLive([
      { type: 'text', text: 'tone 340 4 paced', voiceId: remoteVoice, interval: 0.5 },
      { type: 'text', text: 'tone 350 4 paced', voiceId: remoteVoice },
    ]);
    // Each piece's own MP3 (8 s) and the merged audio (8.5 s with the silence): not a third encode.
    assert.ok(encoded > 16 && encoded < 17.5, `${String(encoded)} s encoded for 8.5 s of audio`);
  });
});

describe('status, auth and lookup branches', () => {
  it('answers STREAM_NOT_READY for a pending task, and HEAD at once for a processing one with no bytes yet', async (t2) => {
    held = new Promise<void>((resolve) => (releaseHeld = resolve));
    // Released in any case, so that a failure here does not leave the single worker held.
    t2.after(() => releaseHeld());
    const busy = await createTask([{ type: 'text', text: 'hold', voiceId: remoteVoice }]);
    await waitTask(busy, (x) => x.status === 'processing');
    const pending = await createTask([{ type: 'text', text: 'tone 440 0.5', voiceId: remoteVoice }]);
    const pendingUrl = String((await detail(pending)).streamUrl);
    const runs = pipelineRuns();
    assertError(await send(pendingUrl), 400, 'STREAM_NOT_READY', true);
    const headPending = await send(pendingUrl, { method: 'HEAD' });
    assert.equal(headPending.status, 400);
    assert.equal(headPending.body.length, 0);
    assertHeaderRules(headPending);
    assertError(await send(withPath(pendingUrl, '/0/stream.mp3')), 400, 'STREAM_NOT_READY', true);
    assertError(await send(withPath(pendingUrl, '/0/pseudo/stream.mp3')), 400, 'STREAM_NOT_READY', true);
    assert.equal(pipelineRuns(), runs);

    const busyUrl = String((await detail(busy)).streamUrl);
    const head = await send(busyUrl, { method: 'HEAD' });
    assert.equal(head.status, 200);
    assertLiveHeadWithoutBuild(head);
    assert.equal(pipelineRuns(), runs, 'HEAD starts no pipeline');
    // A client that gives up while its closed range waits: the server just lets it go.
    await new Promise<void>((resolve) => {
      const req = httpRequest(busyUrl, { headers: { range: 'bytes=0-99' }, agent: false });
      req.on('error', () => resolve());
      req.on('response', () => assert.fail('no answer while the range waits'));
      req.end();
      setTimeout(() => req.destroy(), 200);
    });
    assert.equal((await send(busyUrl, { method: 'HEAD' })).status, 200);
    releaseHeld();
    await waitTask(busy, finished);
    await waitTask(pending, finished);
  });

  it('checks the auth token: missing 401, wrong 403, unknown task 404; a bearer header neither helps nor hurts', async () => {
    const id = await createTask([{ type: 'text', text: 'tone 500 0.3', voiceId: remoteVoice }]);
    await waitTask(id, finished);
    const url = String((await detail(id)).streamUrl);
    const token = new URL(url).searchParams.get('auth') ?? '';
    const bare = url.replace(/\?.*$/, '');
    for (const path of ['/stream.mp3', '/0/stream.mp3', '/0/pseudo/stream.mp3']) {
      const base = bare.replace(/\/stream\.mp3$/, path);
      assertError(await send(base), 401, 'AUTH_UNAUTHORIZED');
      assertError(await send(`${base}?auth=`), 401, 'AUTH_UNAUTHORIZED');
      assertError(await send(base, { headers: bearer(t.key) }), 401, 'AUTH_UNAUTHORIZED');
      assertError(await send(`${base}?auth=${'0'.repeat(32)}`), 403, 'AUTH_FORBIDDEN');
      assertError(await send(`${base}?auth=${token}x`), 403, 'AUTH_FORBIDDEN');
      const unknown = base.replace(id, '00000000-0000-4000-8000-000000000000');
      assertError(await send(`${unknown}?auth=${token}`), 404, 'GENERATE_NOT_FOUND');
      assertError(await send(`${unknown}`), 401, 'AUTH_UNAUTHORIZED');
      const ok = await send(`${base}?auth=${token}`, {
        headers: { authorization: 'Bearer sk-wrongwrongwrongwrongwrongwrongwron' },
      });
      assert.equal(ok.status, 302, 'a wrong bearer header does not hurt');
    }
    assertError(await send(`${bare.replace(/\/stream\.mp3$/, '/stream')}`), 401, 'AUTH_UNAUTHORIZED');
    assertError(
      await send(`${t.baseUrl}/api/tts/generate/not-a-task-id/stream.mp3?auth=${token}`),
      404,
      'GENERATE_NOT_FOUND',
    );
  });

  it('returns the stream URL from …/{id}/stream', async () => {
    const id = await createTask([{ type: 'text', text: 'tone 500 0.3', voiceId: remoteVoice }]);
    const url = String((await detail(id)).streamUrl);
    const reply = await send(url.replace('/stream.mp3?', '/stream?'));
    assert.equal(reply.status, 200);
    assertHeaderRules(reply);
    assert.deepEqual(json(reply), { status: 200, message: 'OK', data: { url } });
    assertError(
      await send(url.replace('/stream.mp3?', '/stream?').replace(/auth=[^&]+/, 'auth=nope')),
      403,
      'AUTH_FORBIDDEN',
    );
    await waitTask(id, finished);
  });
});

describe('failures', () => {
  it('cuts the stream without a JSON body when the engine fails on piece 3 after audio flowed', async () => {
    const id = await createTask([
      { type: 'text', text: 'tone 440 1 paced', voiceId: remoteVoice },
      { type: 'text', text: 'tone 550 1 paced', voiceId: remoteVoice },
      { type: 'text', text: 'break 660 1', voiceId: remoteVoice },
      { type: 'text', text: 'tone 770 1', voiceId: remoteVoice },
      { type: 'text', text: 'tone 880 1', voiceId: remoteVoice },
    ]);
    await waitTask(id, (x) => x.status !== 'pending');
    const url = String((await detail(id)).streamUrl);
    const runs = pipelineRuns();
    const reply = await send(url);
    assert.equal(reply.status, 200);
    assert.equal(reply.truncated, true, 'the connection ends without the terminating chunk');
    assert.ok(reply.body.length > 40_000, `${String(reply.body.length)} bytes flowed first`);
    assert.equal(reply.body.includes(Buffer.from('"code"')), false, 'no JSON appended');
    const failed = await waitTask(id, finished);
    assert.equal(failed.status, 'failed');
    // The broken session is gone; the task is failed now, so the next request is STREAM_NOT_READY.
    assertError(await send(url), 400, 'STREAM_NOT_READY', true);
    assert.equal(pipelineRuns() - runs, 1);
  });

  it('answers a JSON error when generation fails before the first byte of the response', async () => {
    const id = await createTask([{ type: 'text', text: 'refuse', voiceId: remoteVoice }]);
    await waitTask(id, (x) => x.status !== 'pending');
    const url = String((await detail(id)).streamUrl);
    const reply = await send(url, { headers: { range: 'bytes=0-999' } });
    assertError(reply, 500, 'TTS_GENERATE_FAILED', true);
    assert.equal(reply.headers['content-range'], undefined);
    assert.equal(reply.headers.etag, undefined);
    await waitTask(id, finished);
  });
});

describe('the embedded engine, reclaim and rate limit (idle reclaim 500 ms, 20 requests per task)', () => {
  let small: TestApp;
  before(async () => {
    small = await startTestApp({
      listen: true,
      // forgetFinishedAudio edits task rows behind the service: no per-node lookup cache.
      env: { STREAM_IDLE_RECLAIM_MS: '500', STREAM_RATE_LIMIT_MAX: '20', AUTH_CACHE_MS: '0' },
    });
  });
  after(() => small.close());

  it('rebuilds a reclaimed session: new ETag, pipeline again, a valid MP3 of the same duration', async () => {
    const voice = await createVoice({ name: 'Narrator' }, small);
    const id = await createTask(
      [
        { type: 'text', text: 'The stream is built once.', voiceId: voice, interval: 0.4 },
        { type: 'text', text: 'And rebuilt after a rest.', voiceId: voice },
      ],
      small,
    );
    const task = await waitTask(id, finished, small);
    assert.equal(task.status, 'generated', task.error);
    await forgetFinishedAudio(id, small);
    const url = String((await detail(id, small)).streamUrl);
    const runs = pipelineRuns(small);
    const first = await send(url);
    assert.equal(first.status, 200);
    assertAudio(first, first.headers['content-length'] === undefined);
    // Accesses closer together than the idle time keep the session (sliding window).
    for (let k = 0; k < 4; k++) {
      await sleep(150);
      assert.equal((await send(url, { method: 'HEAD' })).headers.etag, first.headers.etag);
    }
    await sleep(1200);
    const second = await send(url);
    assert.equal(second.status, 200);
    assert.notEqual(second.headers.etag, first.headers.etag);
    assert.equal(pipelineRuns(small) - runs, 2);
    assert.equal(await ffmpegErrors(second.body), '');
    const [a, b] = await Promise.all([probeAudio(first.body), probeAudio(second.body)]);
    assert.deepEqual([b.sampleRate, b.channels, b.bitRate], [44100, 2, 320000]);
    assert.ok(Math.abs(a.durationSeconds - b.durationSeconds) < 1e-6);
    assert.ok(
      Math.abs(b.durationSeconds - task.estimatedDuration) <= TWO_FRAMES,
      `${String(b.durationSeconds)} vs ${String(task.estimatedDuration)}`,
    );
    assert.equal(sha(second.body), sha(first.body), 'the encoder is deterministic');
  });

  it('limits requests per client address, whatever the task id, with 429 and Retry-After', async () => {
    const url = (k: number) =>
      `${small.baseUrl}/api/tts/generate/00000000-0000-4000-8000-${String(k).padStart(12, '0')}/stream.mp3`;
    // Earlier tests of this app used part of the address's budget of 20; new task ids add none
    // (a budget per task id would let one client multiply it at will).
    let k = 0;
    for (; k < 20; k++) {
      const res = await send(url(k));
      if (res.status === 429) break;
      assert.equal(res.status, 401);
    }
    const limited = await send(url(k));
    assertError(limited, 429, 'RATE_LIMIT_EXCEEDED', true);
    assert.match(String(limited.headers['retry-after']), /^\d+$/);
    assert.equal((await send(url(99))).status, 429);
  });
});
