// Generation tasks through HTTP on the real app: real espeak, real encoder, real
// storage. Covers the audio of a 3-piece task, the task record, list, delete rules, foreign
// accounts, validation, the worker concurrency bound, restart recovery, stored-audio serving and
// the remote OpenAI-compatible engine against a local upstream.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildApp, type App } from '../src/app.js';
import { concatPcm, samplesFor, silence } from '../src/audio/pcm.js';
import { loadConfig } from '../src/config/config.js';
import type { TaskDetailView, TaskSummaryView, TaskView } from '../src/tasks/task-service.js';
import {
  decodeToPcm,
  ffmpegErrors,
  probeAudio,
  rmsDbfs,
  silentRuns,
  type SampleRange,
} from './helpers/audio-check.js';
import { bearer, speechMp3, startTestApp, type TestApp } from './helpers/test-app.js';

interface ErrorBody {
  status: number;
  code: string;
  message: string;
}

/** Two MP3 frames at 44.1 kHz: the duration tolerance of the issue. */
const TWO_FRAMES = (2 * 1152) / 44100;
const AUTH = /^[0-9a-f]{32}$/;

// ---------------------------------------------------------------------------------------------
// A tiny OpenAI-compatible upstream (`POST /v1/audio/speech`) whose behaviour each test sets.

type Handler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;
let upstreamHandler: Handler = (_req, res) => void res.writeHead(404).end();
const upstreamRequests: { path: string | undefined; body: Record<string, unknown> }[] = [];
const upstream = createServer((req, res) => {
  const parts: Buffer[] = [];
  req.on('data', (c: Buffer) => parts.push(c));
  req.on('end', () => {
    upstreamRequests.push({
      path: req.url,
      body: JSON.parse(Buffer.concat(parts).toString('utf8')) as Record<string, unknown>,
    });
    void upstreamHandler(req, res);
  });
});
/** Real MP3 speech, made by our own encoder from espeak PCM (set in before()). */
let upstreamMp3: Buffer = Buffer.alloc(0);

function serveMp3(): Handler {
  return (_req, res) => {
    res.writeHead(200, { 'content-type': 'audio/mpeg' });
    for (let o = 0; o < upstreamMp3.length; o += 8192) res.write(upstreamMp3.subarray(o, o + 8192));
    res.end();
  };
}

/** An upstream that holds every request until `release()`; `arrived` resolves at the first request. */
function gatedUpstream(): { arrived: Promise<void>; release(): void } {
  let arrive!: () => void;
  let open!: () => void;
  const arrived = new Promise<void>((resolve) => (arrive = resolve));
  const gate = new Promise<void>((resolve) => (open = resolve));
  const serve = serveMp3();
  upstreamHandler = async (req, res) => {
    arrive();
    await gate;
    await serve(req, res);
  };
  return { arrived, release: () => open() };
}

// ---------------------------------------------------------------------------------------------

let t: TestApp;
let voiceId = '';
let remoteVoiceId = '';

before(async () => {
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  t = await startTestApp({
    listen: true,
    env: {
      GENERATION_CONCURRENCY: '1',
      // One slot in the short lane too: these tests hold the only slot with a short task.
      SHORT_TASK_CONCURRENCY: '1',
      MAX_CONTENTS: '8',
      MAX_TEXT_LENGTH: '3000',
      REMOTE_ENGINES: JSON.stringify({
        local: { baseUrl: `http://127.0.0.1:${port}`, apiKey: 'sk-upstream' },
      }),
    },
  });
  voiceId = await createVoice(t.key, { name: 'Narrator' });
  remoteVoiceId = await createVoice(t.key, {
    name: 'Alloy',
    engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' },
  });
  // The upstream's audio: espeak speech encoded by our own encoder, as a real service would send MP3.
  upstreamMp3 = await speechMp3(t.app, 'This sentence comes from the remote engine.');
});

after(async () => {
  await t.close();
  await new Promise((resolve) => upstream.close(resolve));
});

async function createVoice(key: string, payload: object): Promise<string> {
  const res = await t.app.http.inject({ method: 'POST', url: '/api/voice', headers: bearer(key), payload });
  assert.equal(res.statusCode, 200, res.body);
  return res.json<{ data: { id: string } }>().data.id;
}

async function api(method: 'GET' | 'POST' | 'DELETE', url: string, payload?: unknown, key = t.key) {
  return t.app.http.inject({
    method,
    url,
    headers: bearer(key),
    ...(payload !== undefined && { payload: payload as object }),
  });
}

async function createTask(payload: unknown, key = t.key): Promise<TaskDetailView> {
  const res = await api('POST', '/api/tts/generate', payload, key);
  assert.equal(res.statusCode, 200, res.body);
  return res.json<{ data: TaskDetailView }>().data;
}

async function detail(id: string, key = t.key, query = ''): Promise<TaskDetailView> {
  const res = await api('GET', `/api/tts/generate/${id}${query}`, undefined, key);
  assert.equal(res.statusCode, 200, res.body);
  return res.json<{ data: TaskDetailView }>().data;
}

/** A task is finished once failed, or generated with its merged audio stored. */
const finished = (task: TaskView | TaskSummaryView): boolean =>
  task.status === 'failed' || (task.status === 'generated' && task.metadata.audio !== undefined);

/**
 * Waits until `done(task)` holds. Polls the service directly (not HTTP, so the per-account rate
 * limit is not spent); the test runner's timeout is the only bound, nothing asserts timing.
 */
async function waitTask(
  app: App,
  accountId: string,
  id: string,
  done: (task: TaskDetailView) => boolean = finished,
): Promise<TaskDetailView> {
  for (;;) {
    const task = await app.services.tasks.get(accountId, id);
    if (done(task)) return task;
    await sleep(20);
  }
}

async function fetchBytes(url: string, init?: RequestInit): Promise<{ res: Response; bytes: Buffer }> {
  const res = await fetch(url, init);
  return { res, bytes: Buffer.from(await res.arrayBuffer()) };
}

const text = (n: number, sentence = 'The quick brown fox jumps over the lazy dog. ') =>
  sentence.repeat(n).trim();

// ---------------------------------------------------------------------------------------------

describe('a 3-piece task', () => {
  const TEXTS = [
    'The quick brown fox jumps over the lazy dog.',
    'A second voice answers, a little later.',
    'And the third piece closes the dialogue.',
  ];
  const INTERVALS = [0.5, 1.0, 7];
  let created: TaskDetailView;
  let task: TaskDetailView;
  let merged: Buffer;
  /** Samples of each piece as the service synthesised them (its canonical PCM files). */
  let pieceSamples: number[] = [];

  before(async () => {
    created = await createTask({
      contents: TEXTS.map((text, i) => ({ type: 'text', text, voiceId, interval: INTERVALS[i] })),
    });
    task = await waitTask(t.app, t.accountId, created.id);
    assert.equal(task.status, 'generated', task.error);
    const { res, bytes } = await fetchBytes(String(task.metadata.audio));
    assert.equal(res.status, 200);
    merged = bytes;
    const dir = join(t.app.config.dataDir, 'work', 'tasks', task.id);
    pieceSamples = await Promise.all(TEXTS.map(async (_, i) => (await stat(join(dir, `${i}.pcm`))).size / 2));
  });

  it('answers the create request with the pending task and its estimate', () => {
    assert.match(created.id, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.equal(created.status, 'pending');
    assert.equal(created.userId, t.accountId);
    assert.equal(created.type, 'contents');
    assert.equal(created.credit_used, 0, 'nothing is charged before the audio exists');
    const characters = TEXTS.join('').length;
    assert.deepEqual(created.billing, { unit: 'character', characters, credits: characters });
    // Before any audio exists: characters / 14 per second × speechRate, plus the intervals between pieces.
    assert.ok(
      Math.abs(created.estimatedDuration - (characters / 14 + INTERVALS[0]! + INTERVALS[1]!)) < 0.01,
      String(created.estimatedDuration),
    );
    assert.equal(created.metadata.audio, undefined);
    assert.equal(created.streamUrl, undefined);
  });

  it('reports the finished task: billing, duration, per-piece and merged audio URLs', async () => {
    const characters = TEXTS.join('').length;
    assert.equal(task.credit_used, characters);
    assert.deepEqual(task.billing, { unit: 'character', characters, credits: characters });
    assert.equal(task.metadata.characters, characters);
    // Voice objects, as the hosted API's clients read them (name, idForGenerate).
    assert.deepEqual(
      task.metadata.voices.map((v) => ({ id: v.id, idForGenerate: v.idForGenerate })),
      [{ id: voiceId, idForGenerate: voiceId }],
    );
    assert.equal((task.metadata.voices[0] as { name?: string }).name, 'Narrator');
    // Once generated, the estimate is the real duration: the samples of the pieces and the silences.
    const real =
      (pieceSamples.reduce((a, b) => a + b, 0) + samplesFor(INTERVALS[0]!) + samplesFor(INTERVALS[1]!)) /
      44100;
    assert.ok(Math.abs(task.estimatedDuration - real) < 0.001, `${task.estimatedDuration} vs ${real}`);
    assert.match(String(task.metadata.generatedAt), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    const audio = new URL(String(task.metadata.audio));
    assert.equal(`${audio.origin}${audio.pathname}`, `${t.baseUrl}/api/tts/generate/${task.id}/audio.mp3`);
    const auth = audio.searchParams.get('auth') ?? '';
    assert.match(auth, AUTH);
    task.metadata.contents.forEach((c, i) => {
      assert.equal(c.index, i);
      assert.equal(c.type, 'text');
      assert.equal(c.text, TEXTS[i]);
      assert.equal(c.voiceId, voiceId);
      assert.equal(c.speechRate, 1);
      assert.equal(c.interval, INTERVALS[i]);
      assert.equal(c.audio, `${t.baseUrl}/api/tts/generate/${task.id}/${i}/audio.mp3?auth=${auth}`);
      assert.match(String(c.generatedAt), /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);
    });

    // ?stream=true adds the full stream URL (PUBLIC_URL, here the listening address), with the same token.
    const streamed = await detail(task.id, t.key, '?stream=true');
    assert.equal(streamed.streamUrl, `${t.baseUrl}/api/tts/generate/${task.id}/stream.mp3?auth=${auth}`);
    assert.equal((await detail(task.id, t.key, '?stream=false')).streamUrl, undefined);
  });

  it('stores one clean 320 kbps 44.1 kHz stereo MP3 lasting the pieces plus the silences', async () => {
    assert.equal(await ffmpegErrors(merged), '');
    const info = await probeAudio(merged);
    assert.deepEqual([info.codec, info.sampleRate, info.channels, info.bitRate], ['mp3', 44100, 2, 320000]);
    // Expected duration from what the service synthesised: each piece's canonical PCM (44.1 kHz
    // mono s16, so bytes / 2 samples) plus the first two intervals; the last piece's interval is
    // never added. The encoder may add at most two frames of priming and padding.
    const expected =
      (pieceSamples.reduce((a, b) => a + b, 0) + samplesFor(INTERVALS[0]!) + samplesFor(INTERVALS[1]!)) /
      44100;
    const extra = info.durationSeconds - expected;
    assert.ok(extra >= 0 && extra <= TWO_FRAMES, `duration ${info.durationSeconds}, expected ${expected}`);
  });

  it('is speech in the speech regions and silence of the expected length between pieces', async () => {
    const decoded = await decodeToPcm(merged);
    // The reference is what the encoder was fed: the pieces' PCM with digital silence between them.
    const dir = join(t.app.config.dataDir, 'work', 'tasks', task.id);
    const { readFile } = await import('node:fs/promises');
    const pieces = await Promise.all(
      TEXTS.map(async (_, i) => new Int16Array(new Uint8Array(await readFile(join(dir, `${i}.pcm`))).buffer)),
    );
    const source = concatPcm([
      pieces[0]!,
      silence(INTERVALS[0]!),
      pieces[1]!,
      silence(INTERVALS[1]!),
      pieces[2]!,
    ]);
    const win = samplesFor(0.02);

    let at = 0;
    for (const [i, p] of pieces.entries()) {
      assert.ok(rmsDbfs(decoded, at, at + p.length) > -35, `piece ${i} is audible`);
      at += p.length + samplesFor(INTERVALS[i] ?? 0);
    }
    // Silent stretches at the joins: espeak's own pauses plus the interval, the same length as in
    // the source within two analysis windows; the decoder delay only shifts them.
    const gaps = (pcm: Int16Array): SampleRange[] =>
      silentRuns(pcm, win, -60).filter((r) => r.end - r.start >= samplesFor(0.4));
    const want = gaps(source);
    const got = gaps(decoded);
    assert.equal(want.length, 2);
    assert.equal(got.length, 2, `two long gaps in the decoded audio: ${JSON.stringify(got)}`);
    for (const [i, w] of want.entries()) {
      const g = got[i]!;
      assert.ok(w.end - w.start >= samplesFor(INTERVALS[i]!) - 2 * win, 'the gap is at least the interval');
      assert.ok(
        Math.abs(g.end - g.start - (w.end - w.start)) <= 2 * win,
        `gap ${i}: ${g.end - g.start} vs ${w.end - w.start}`,
      );
      assert.ok(Math.abs(g.start - w.start) <= 3 * win, `gap ${i} position: ${g.start} vs ${w.start}`);
    }
  });

  it('stores each piece as its own clean MP3', async () => {
    for (const [i, c] of task.metadata.contents.entries()) {
      const { res, bytes } = await fetchBytes(String(c.audio));
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'audio/mpeg');
      assert.equal(await ffmpegErrors(bytes), '');
      const info = await probeAudio(bytes);
      assert.deepEqual([info.sampleRate, info.channels, info.bitRate], [44100, 2, 320000]);
      const extra = info.durationSeconds - pieceSamples[i]! / 44100;
      assert.ok(
        extra >= 0 && extra <= TWO_FRAMES,
        `piece ${i}: ${info.durationSeconds} s for ${pieceSamples[i]} samples`,
      );
    }
  });

  it('serves stored audio with Range, HEAD, 416 and the task token', async () => {
    const url = String(task.metadata.audio);
    const size = merged.length;
    const full = await fetchBytes(url);
    assert.equal(full.res.headers.get('content-length'), String(size));
    assert.equal(full.res.headers.get('accept-ranges'), 'bytes');
    const etag = full.res.headers.get('etag');
    assert.ok(etag !== null && etag.startsWith('"'), 'strong ETag');

    const head = await fetchBytes(url, { method: 'HEAD' });
    assert.equal(head.res.status, 200);
    assert.equal(head.res.headers.get('content-length'), String(size));
    assert.equal(head.bytes.length, 0);

    const part = await fetchBytes(url, { headers: { range: 'bytes=100-1099' } });
    assert.equal(part.res.status, 206);
    assert.equal(part.res.headers.get('content-range'), `bytes 100-1099/${size}`);
    assert.deepEqual(part.bytes, merged.subarray(100, 1100));

    const suffix = await fetchBytes(url, { headers: { range: 'bytes=-500' } });
    assert.equal(suffix.res.status, 206);
    assert.deepEqual(suffix.bytes, merged.subarray(size - 500));

    const headPart = await fetchBytes(url, { method: 'HEAD', headers: { range: 'bytes=0-9' } });
    assert.equal(headPart.res.status, 206);
    assert.equal(headPart.res.headers.get('content-range'), `bytes 0-9/${size}`);
    assert.equal(headPart.bytes.length, 0);

    const beyond = await fetchBytes(url, { headers: { range: `bytes=${size}-` } });
    assert.equal(beyond.res.status, 416);
    assert.equal(beyond.res.headers.get('content-range'), `bytes */${size}`);

    const piece = await fetchBytes(String(task.metadata.contents[1]?.audio), {
      headers: { range: 'bytes=0-3' },
    });
    assert.equal(piece.res.status, 206);
    assert.equal(piece.bytes.length, 4);

    const base = url.slice(0, url.indexOf('?'));
    const wrong = await fetchBytes(`${base}?auth=${'0'.repeat(32)}`);
    assert.equal(wrong.res.status, 403);
    assert.equal((JSON.parse(wrong.bytes.toString()) as ErrorBody).code, 'AUTH_FORBIDDEN');
    const missing = await fetchBytes(base);
    assert.equal(missing.res.status, 401);
    assert.equal((JSON.parse(missing.bytes.toString()) as ErrorBody).code, 'AUTH_UNAUTHORIZED');
    const unknown = await fetchBytes(
      `${t.baseUrl}/api/tts/generate/00000000-0000-4000-8000-000000000000/audio.mp3?auth=x`,
    );
    assert.equal(unknown.res.status, 404);
    assert.equal((JSON.parse(unknown.bytes.toString()) as ErrorBody).code, 'GENERATE_NOT_FOUND');
    // Stored-audio responses are not the direct-return branch: no billing headers.
    assert.equal(full.res.headers.get('x-service-audio-id'), null);
    assert.equal(full.res.headers.get('x-service-response-data'), null);
  });
});

describe('a 1-piece task', () => {
  it('stores its piece audio as its merged audio: one clean MP3, the same bytes at both URLs', async () => {
    const created = await createTask({ contents: [{ text: text(2), voiceId }] });
    const done = await waitTask(t.app, t.accountId, created.id);
    assert.equal(done.status, 'generated', done.error);
    const merged = await fetchBytes(String(done.metadata.audio));
    const piece = await fetchBytes(String(done.metadata.contents[0]?.audio));
    assert.equal(merged.res.status, 200);
    assert.equal(piece.res.status, 200);
    assert.ok(merged.bytes.equals(piece.bytes), 'the merged audio is the piece audio');
    assert.equal(await ffmpegErrors(merged.bytes), '');
    const info = await probeAudio(merged.bytes);
    assert.deepEqual([info.sampleRate, info.channels, info.bitRate], [44100, 2, 320000]);
    assert.ok(
      Math.abs(info.durationSeconds - done.estimatedDuration) <= TWO_FRAMES,
      `${info.durationSeconds} s`,
    );
  });
});

describe('listing', () => {
  it('lists newest first with limit, offset, status filter and total', async () => {
    const acct = await t.newAccount();
    const voice = await createVoice(acct.key, { name: 'v' });
    const ids: string[] = [];
    for (const word of ['one', 'two', 'three']) {
      ids.push((await createTask({ contents: [{ text: `Number ${word}.`, voiceId: voice }] }, acct.key)).id);
    }
    upstreamHandler = (_req, res) => void res.writeHead(503).end('down');
    const remote = await createVoice(acct.key, {
      name: 'r',
      engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' },
    });
    const failedId = (
      await createTask({ contents: [{ text: 'This one fails.', voiceId: remote }] }, acct.key)
    ).id;
    for (const id of [...ids, failedId]) await waitTask(t.app, acct.accountId, id);

    const list = async (query: string) => {
      const res = await api('GET', `/api/tts/generate${query}`, undefined, acct.key);
      assert.equal(res.statusCode, 200, res.body);
      return res.json<{ status: number; message: string; data: TaskSummaryView[]; total: number }>();
    };
    const all = await list('');
    assert.equal(all.status, 200);
    assert.equal(all.total, 4);
    assert.deepEqual(
      all.data.map((x) => x.id),
      [failedId, ids[2], ids[1], ids[0]],
    );
    assert.ok(
      all.data.every((x) => x.streamUrl === undefined && !('credit_used' in x)),
      'billing only on the detail endpoint',
    );
    assert.ok(
      all.data.every(
        (x) =>
          x.metadata.contentsCount === 1 &&
          x.metadata.voices.length === 1 &&
          x.metadata.contents.length === 1 &&
          !('request' in x.metadata),
      ),
      'lists carry summaries: counts and the first contents, never the request echo',
    );

    const page = await list('?limit=2&offset=1');
    assert.equal(page.total, 4);
    assert.deepEqual(
      page.data.map((x) => x.id),
      [ids[2], ids[1]],
    );

    const generated = await list('?status=generated');
    assert.equal(generated.total, 3);
    assert.deepEqual(
      generated.data.map((x) => x.id),
      [ids[2], ids[1], ids[0]],
    );
    const failed = await list('?status=failed&stream=true');
    assert.equal(failed.total, 1);
    assert.equal(failed.data[0]?.id, failedId);
    // Generic for the tenant: the upstream's status and body are only logged.
    assert.match(String(failed.data[0]?.error), /: the speech engine failed \(engine error\)$/);
    assert.match(
      String(failed.data[0]?.streamUrl),
      new RegExp(`/api/tts/generate/${failedId}/stream\\.mp3\\?auth=[0-9a-f]{32}$`),
    );
    assert.equal((await list('?status=pending')).total, 0);

    for (const query of ['?status=done', '?limit=0', '?limit=51', '?offset=-1']) {
      const res = await api('GET', `/api/tts/generate${query}`, undefined, acct.key);
      assert.equal(res.statusCode, 400, query);
      assert.equal(res.json<ErrorBody>().code, 'VALIDATION_INVALID_VALUE', query);
    }
  });
});

describe('delete rules and foreign accounts', () => {
  it('refuses to delete pending and processing tasks, deletes finished ones with their audio', async () => {
    // A remote task held at the upstream keeps the single worker busy: it is processing, and a task
    // queued behind it stays pending (GENERATION_CONCURRENCY=1) — deterministic, no timing involved.
    const gate = gatedUpstream();
    const held = await createTask({ contents: [{ text: 'Held at the upstream.', voiceId: remoteVoiceId }] });
    await gate.arrived;
    const queued = await createTask({ contents: [{ text: 'Queued behind it.', voiceId }] });
    assert.equal((await detail(held.id)).status, 'processing');
    assert.equal((await detail(queued.id)).status, 'pending');
    for (const [id, status] of [
      [held.id, 'processing'],
      [queued.id, 'pending'],
    ] as const) {
      const res = await api('DELETE', `/api/tts/generate/${id}`);
      assert.equal(res.statusCode, 403);
      const body = res.json<ErrorBody>();
      assert.equal(body.code, 'GENERATE_DELETE_IN_PROGRESS');
      assert.match(body.message, new RegExp(status));
    }
    gate.release();
    const done = await waitTask(t.app, t.accountId, held.id);
    await waitTask(t.app, t.accountId, queued.id);
    assert.equal(done.status, 'generated', done.error);

    const res = await api('DELETE', `/api/tts/generate/${held.id}`);
    assert.equal(res.statusCode, 200);
    assert.deepEqual(res.json(), { status: 200, message: 'OK' });
    const gone = await api('GET', `/api/tts/generate/${held.id}`);
    assert.equal(gone.statusCode, 404);
    assert.equal(gone.json<ErrorBody>().code, 'GENERATE_NOT_FOUND');
    assert.equal((await api('DELETE', `/api/tts/generate/${held.id}`)).statusCode, 404);
    assert.equal((await fetch(String(done.metadata.audio))).status, 404, 'the stored audio is gone too');
    assert.equal(
      existsSync(join(t.app.config.dataDir, 'work', 'tasks', held.id)),
      false,
      'and the work files',
    );
    assert.equal(existsSync(join(t.app.config.dataDir, 'blobs', 'tasks', held.id, 'audio.mp3')), false);
  });

  it("answers 404 GENERATE_NOT_FOUND for another account's task, on get and delete", async () => {
    const task = await createTask({ contents: [{ text: 'Mine.', voiceId }] });
    await waitTask(t.app, t.accountId, task.id);
    const other = await t.newAccount();
    for (const method of ['GET', 'DELETE'] as const) {
      const res = await api(method, `/api/tts/generate/${task.id}`, undefined, other.key);
      assert.equal(res.statusCode, 404, method);
      assert.equal(res.json<ErrorBody>().code, 'GENERATE_NOT_FOUND', method);
    }
    const list = await api('GET', '/api/tts/generate', undefined, other.key);
    assert.equal(list.json<{ total: number }>().total, 0);
    assert.equal(
      (await api('GET', `/api/tts/generate/${task.id}`)).statusCode,
      200,
      'still there for its owner',
    );
    const unknown = await api('GET', '/api/tts/generate/not-a-task');
    assert.equal(unknown.json<ErrorBody>().code, 'GENERATE_NOT_FOUND');
    const noKey = await t.app.http.inject({ method: 'GET', url: `/api/tts/generate/${task.id}` });
    assert.equal(noKey.statusCode, 401);
  });
});

describe('validation', () => {
  it('rejects bad requests with the catalogue code and a message naming the problem', async () => {
    const ok = { type: 'text', text: 'Hello.', voiceId: '' };
    const item = (extra: Record<string, unknown>) => ({ ...ok, voiceId, ...extra });
    const cases: [unknown, number, string, RegExp?][] = [
      [{}, 400, 'VALIDATION_MISSING_FIELD', /contents/],
      [{ contents: null }, 400, 'VALIDATION_MISSING_FIELD', /contents/],
      [{ contents: [] }, 400, 'TTS_CONTENTS_INVALID', /empty/],
      [{ contents: 'Hello.' }, 400, 'TTS_CONTENTS_INVALID', /array/],
      [{ contents: { 0: item({}) } }, 400, 'TTS_CONTENTS_INVALID', /array/],
      [{ contents: Array.from({ length: 9 }, () => item({})) }, 400, 'TTS_CONTENTS_INVALID', /at most 8/],
      [{ contents: [item({ type: 'image' })] }, 400, 'TTS_CONTENTS_INVALID', /type/],
      [{ contents: ['Hello.'] }, 400, 'TTS_CONTENTS_INVALID', /object/],
      [{ contents: [item({}), item({ text: '  \n ' })] }, 400, 'TTS_TEXT_EMPTY', /contents\[1\]\.text/],
      [{ contents: [item({ text: '' })] }, 400, 'TTS_TEXT_EMPTY'],
      [{ contents: [{ type: 'text', voiceId }] }, 400, 'VALIDATION_MISSING_FIELD', /text/],
      [{ contents: [{ type: 'text', text: 'Hello.' }] }, 400, 'VALIDATION_MISSING_FIELD', /voiceId/],
      // Inside contents[] a bad value is TTS_CONTENTS_INVALID naming the field.
      [{ contents: [item({ speechRate: 3 })] }, 400, 'TTS_CONTENTS_INVALID', /speechRate/],
      [{ contents: [item({ speechRate: 0.4 })] }, 400, 'TTS_CONTENTS_INVALID', /speechRate/],
      [{ contents: [item({ speechRate: 'fast' })] }, 400, 'TTS_CONTENTS_INVALID', /speechRate/],
      [{ contents: [item({ interval: 11 })] }, 400, 'TTS_CONTENTS_INVALID', /interval/],
      [{ contents: [item({ preset: 'wild' })] }, 400, 'TTS_CONTENTS_INVALID', /preset/],
      [{ contents: [item({ seed: -2 })] }, 400, 'TTS_CONTENTS_INVALID', /seed/],
      [{ contents: [item({ seed: 2 ** 31 })] }, 400, 'TTS_CONTENTS_INVALID', /seed/],
      [{ contents: [item({ vivid: 'yes' })] }, 400, 'TTS_CONTENTS_INVALID', /vivid/],
      [{ contents: [item({ language: 'klingon' })] }, 400, 'TTS_CONTENTS_INVALID', /language/],
      [{ contents: [item({ language: 'xx' })] }, 400, 'TTS_CONTENTS_INVALID', /language/],
      [{ contents: [item({ reference_mode: true })] }, 400, 'TTS_CONTENTS_INVALID', /reference_mode/],
      [{ contents: [item({ emo_switch: [1, 2, 3, 4] })] }, 400, 'TTS_CONTENTS_INVALID', /emo_switch/],
      [{ contents: [item({ emo_switch: [1, 2, 3, 4, 11] })] }, 400, 'TTS_CONTENTS_INVALID', /emo_switch/],
      [{ contents: [item({ text: 'a'.repeat(3001) })] }, 400, 'VALIDATION_TOO_LONG', /3000/],
      [{ contents: [item({})], splitterId: 'x' }, 400, 'VALIDATION_CONFLICT'],
      [{ text: 'Hello.' }, 400, 'VALIDATION_CONFLICT'],
      [[item({})], 400, 'VALIDATION_INVALID_FORMAT'],
      [{ contents: [item({ voiceId: 'no-such-voice' })] }, 404, 'VOICE_NOT_FOUND'],
    ];
    for (const [payload, status, code, message] of cases) {
      const res = await api('POST', '/api/tts/generate', payload);
      const what = JSON.stringify(payload).slice(0, 120);
      assert.equal(res.statusCode, status, `${what}: ${res.body}`);
      const body = res.json<ErrorBody>();
      assert.equal(body.code, code, what);
      assert.equal(body.status, status, what);
      if (message) assert.match(body.message, message, what);
    }
    const other = await t.newAccount();
    const foreignVoice = await createVoice(other.key, { name: 'theirs' });
    const foreign = await api('POST', '/api/tts/generate', { contents: [item({ voiceId: foreignVoice })] });
    assert.equal(foreign.statusCode, 404);
    assert.equal(foreign.json<ErrorBody>().code, 'VOICE_NOT_FOUND');
    const malformed = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/generate',
      headers: { ...bearer(t.key), 'content-type': 'application/json' },
      payload: '{"contents":',
    });
    assert.equal(malformed.json<ErrorBody>().code, 'VALIDATION_INVALID_FORMAT');
    assert.equal((await api('GET', '/api/tts/generate')).statusCode, 200);
  });

  it('a dialogue names the first voice it cannot speak; the voices of a task it can are listed once each', async () => {
    const second = await createVoice(t.key, { name: 'Second' });
    const creating = await t.app.services.voices.importVoice(t.accountId, {
      name: 'still creating',
      version: 'v2.0',
      status: 'creating',
    });
    const missing = '00000000-0000-0000-0000-000000000000';
    const dialogue = (ids: string[]) => ({
      contents: ids.map((id, i) => ({ type: 'text', text: `Line ${i}.`, voiceId: id })),
    });
    const notFound = await api('POST', '/api/tts/generate', dialogue([voiceId, missing, creating.id]));
    assert.equal(notFound.statusCode, 404, notFound.body);
    assert.equal(notFound.json<ErrorBody>().code, 'VOICE_NOT_FOUND');
    assert.match(notFound.json<ErrorBody>().message, new RegExp(missing));
    const stillCreating = await api('POST', '/api/tts/generate', dialogue([voiceId, creating.id, missing]));
    assert.equal(stillCreating.statusCode, 409, stillCreating.body);
    assert.equal(stillCreating.json<ErrorBody>().code, 'VOICE_CREATING');
    assert.match(stillCreating.json<ErrorBody>().message, new RegExp(creating.id));
    const task = await createTask(dialogue([second, voiceId, second, voiceId]));
    assert.deepEqual(
      task.metadata.voices.map((v) => [v.id, 'name' in v ? v.name : undefined]),
      [
        [second, 'Second'],
        [voiceId, 'Narrator'],
      ],
    );
    assert.deepEqual(
      task.metadata.contents.map((c) => c.voiceId),
      [second, voiceId, second, voiceId],
    );
    // The answer of the creation is what a later read of the task says.
    assert.deepEqual((await detail(task.id)).metadata.voices, task.metadata.voices);
  });

  it("drops unknown keys and keeps the hosted API's known ones", async () => {
    const task = await createTask({
      contents: [
        {
          type: 'text',
          text: '  Trimmed.  ',
          voiceId,
          speechRate: 1.5,
          seed: 7,
          preset: 'stable',
          vivid: true,
          colour: 'blue',
        },
      ],
      somethingElse: { a: 1 },
    });
    const c = task.metadata.contents[0];
    assert.ok(c);
    assert.equal(c.text, 'Trimmed.');
    assert.equal(c.colour, undefined);
    assert.deepEqual(
      { speechRate: c.speechRate, seed: c.seed, preset: c.preset, vivid: c.vivid, interval: c.interval },
      { speechRate: 1.5, seed: 7, preset: 'stable', vivid: true, interval: 0.5 },
    );
    assert.equal(JSON.stringify(task).includes('somethingElse'), false);
    const done = await waitTask(t.app, t.accountId, task.id);
    assert.equal(done.status, 'generated', done.error);
  });
});

describe('worker concurrency', () => {
  it('never generates more tasks at once than GENERATION_CONCURRENCY (1), in queue order', async () => {
    const acct = await t.newAccount();
    const voice = await createVoice(acct.key, { name: 'v' });
    const remote = await createVoice(acct.key, {
      name: 'r',
      engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' },
    });
    const gate = gatedUpstream();
    const first = await createTask({ contents: [{ text: 'Held.', voiceId: remote }] }, acct.key);
    await gate.arrived;
    const rest: string[] = [];
    for (let i = 0; i < 4; i++)
      rest.push(
        (
          await createTask(
            {
              contents: [
                { text: text(2), voiceId: voice },
                { text: `Task ${i}.`, voiceId: voice },
              ],
            },
            acct.key,
          )
        ).id,
      );

    // While the first task holds the only worker, every other task waits.
    assert.equal(t.app.services.runner.active, 1);
    for (const id of rest) assert.equal((await detail(id, acct.key)).status, 'pending');

    // Sample the runner and the statuses until everything is finished.
    let maxActive = 0;
    const sampler = setInterval(() => (maxActive = Math.max(maxActive, t.app.services.runner.active)), 1);
    gate.release();
    let maxProcessing = 0;
    try {
      for (;;) {
        const { items } = await t.app.services.tasks.list(acct.accountId, { limit: '50' });
        maxProcessing = Math.max(maxProcessing, items.filter((x) => x.status === 'processing').length);
        // `generated` means complete: the merged audio is stored before the status says so.
        for (const x of items)
          if (x.status === 'generated')
            assert.ok(x.metadata.audio !== undefined, `${x.id} generated without audio`);
        maxActive = Math.max(maxActive, t.app.services.runner.active);
        if (items.every(finished)) break;
        await sleep(5);
      }
    } finally {
      clearInterval(sampler);
    }
    assert.equal(maxActive, 1);
    assert.equal(maxProcessing, 1);
    const done = await Promise.all([first.id, ...rest].map((id) => detail(id, acct.key)));
    assert.ok(
      done.every((x) => x.status === 'generated'),
      JSON.stringify(done.map((x) => x.status)),
    );
    // One worker takes the oldest pending task first: tasks finish in creation order.
    const times = done.map((x) => Date.parse(String(x.metadata.generatedAt)));
    assert.deepEqual(
      [...times].sort((a, b) => a - b),
      times,
    );
  });
});

describe('remote engine through the service', () => {
  it('generates a task mixing a remote voice and the embedded engine', async () => {
    upstreamHandler = serveMp3();
    upstreamRequests.length = 0;
    const task = await createTask({
      contents: [
        { text: 'Spoken upstream.', voiceId: remoteVoiceId, speechRate: 2 },
        { text: 'Spoken here, by espeak.', voiceId },
      ],
    });
    const done = await waitTask(t.app, t.accountId, task.id);
    assert.equal(done.status, 'generated', done.error);
    assert.deepEqual(upstreamRequests, [
      {
        path: '/v1/audio/speech',
        body: {
          model: 'tts-1',
          input: 'Spoken upstream.',
          voice: 'alloy',
          response_format: 'mp3',
          speed: 0.5,
        },
      },
    ]);
    const { bytes } = await fetchBytes(String(done.metadata.audio));
    assert.equal(await ffmpegErrors(bytes), '');
    const info = await probeAudio(bytes);
    assert.deepEqual([info.sampleRate, info.channels, info.bitRate], [44100, 2, 320000]);
    assert.ok(
      Math.abs(info.durationSeconds - done.estimatedDuration) <= TWO_FRAMES,
      `${info.durationSeconds} vs ${done.estimatedDuration}`,
    );
    // The remote piece is the upstream's speech (decoded, resampled, re-encoded), not silence.
    const decoded = await decodeToPcm(bytes);
    assert.ok(rmsDbfs(decoded, 0, samplesFor(1)) > -35);
  });

  it('fails the task with a clear error when the upstream drops the connection mid-piece', async () => {
    upstreamHandler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg', 'content-length': String(upstreamMp3.length) });
      res.write(upstreamMp3.subarray(0, upstreamMp3.length >> 1), () => res.socket?.destroy());
    };
    const task = await createTask({
      contents: [
        { text: 'This piece is fine.', voiceId },
        { text: 'This one breaks upstream.', voiceId: remoteVoiceId },
        { text: 'Never reached.', voiceId },
      ],
    });
    const failed = await waitTask(t.app, t.accountId, task.id);
    assert.equal(failed.status, 'failed');
    assert.equal(failed.error, `content 1 of task ${task.id}: the speech engine failed (engine error)`);
    assert.equal(String(failed.error).includes('127.0.0.1'), false, 'the upstream URL is not leaked');
    assert.equal(failed.credit_used, 0);
    assert.equal(failed.metadata.audio, undefined);
    assert.ok(failed.metadata.contents[0]?.audio, 'the piece before the failure was stored');
    assert.equal(failed.metadata.contents[1]?.audio, undefined);
    assert.equal(failed.metadata.contents[2]?.audio, undefined);
    // The worker is free again: the next task is generated.
    upstreamHandler = serveMp3();
    const next = await waitTask(
      t.app,
      t.accountId,
      (await createTask({ contents: [{ text: 'Next.', voiceId: remoteVoiceId }] })).id,
    );
    assert.equal(next.status, 'generated', next.error);
  });
});

describe('restart recovery', () => {
  it('resumes a task whose process stopped while generating it; it is never left processing', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-restart-'));
    let second: App | undefined;
    try {
      const first = await startTestApp({ dataDir });
      let taskId = '';
      try {
        const res = await first.app.http.inject({
          method: 'POST',
          url: '/api/voice',
          headers: bearer(first.key),
          payload: { name: 'v' },
        });
        const vid = res.json<{ data: { id: string } }>().data.id;
        const long = {
          contents: Array.from({ length: 3 }, (_, i) => ({
            text: text(12, `Paragraph ${i} goes on and on for a while. `),
            voiceId: vid,
          })),
        };
        const created = await first.app.http.inject({
          method: 'POST',
          url: '/api/tts/generate',
          headers: bearer(first.key),
          payload: long,
        });
        taskId = created.json<{ data: { id: string } }>().data.id;
        const processing = await waitTask(first.app, first.accountId, taskId, (x) => x.status !== 'pending');
        assert.equal(processing.status, 'processing');
      } finally {
        await first.close(); // stops mid-generation: the task stays processing in the database
      }
      // A new process on the same DATA_DIR. (Built directly: the test helper seeds a fresh database
      // from its template, which PGlite refuses over an existing one.)
      second = await buildApp(
        loadConfig({
          DATA_DIR: dataDir,
          PORT: '0',
          LOG_LEVEL: 'silent',
          PUBLIC_URL: 'https://voice.example.test/',
        }),
        {
          logger: false,
        },
      );
      const done = await waitTask(
        second,
        first.accountId,
        taskId,
        (x) => x.status !== 'processing' && x.status !== 'pending' && finished(x),
      );
      assert.equal(done.status, 'generated', done.error);
      const res = await second.http.inject({
        method: 'GET',
        url: `/api/tts/generate/${taskId}?stream=true`,
        headers: bearer(first.key),
      });
      const view = res.json<{ data: TaskDetailView }>().data;
      assert.match(
        String(view.streamUrl),
        new RegExp(
          `^https://voice\\.example\\.test/api/tts/generate/${taskId}/stream\\.mp3\\?auth=[0-9a-f]{32}$`,
        ),
      );
      assert.ok(view.metadata.contents.every((c) => c.audio !== undefined));
      // The merged audio holds all three pieces, resumed or not.
      const key = new URL(String(view.metadata.audio));
      const audio = await second.http.inject({ method: 'GET', url: `${key.pathname}${key.search}` });
      assert.equal(audio.statusCode, 200);
      assert.equal(await ffmpegErrors(audio.rawPayload), '');
      const info = await probeAudio(audio.rawPayload);
      const extra = info.durationSeconds - view.estimatedDuration;
      assert.ok(
        extra >= -0.001 && extra <= TWO_FRAMES,
        `${info.durationSeconds} vs ${view.estimatedDuration}`,
      );
    } finally {
      await second?.close();
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
