// One-shot synthesis (the hosted API's sync endpoints) through real HTTP on the real app:
// POST /api/tts/simple-generate (JSON, or MP3 with direct_stream) and GET /api/tts/simple-generate.mp3.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { OneShotAudioInfo, OneShotResult } from '../src/tasks/one-shot/one-shot.js';
import type { TaskDetailView } from '../src/tasks/task-service.js';
import { decodeToPcm, ffmpegErrors, probeAudio, rmsDbfs } from './helpers/audio-check.js';
import { bearer, speechMp3, startTestApp, type TestApp } from './helpers/test-app.js';

interface ErrorBody {
  status: number;
  code: string;
  message: string;
  requestId?: string;
}

const TWO_FRAMES = (2 * 1152) / 44100;

// A local OpenAI-compatible upstream for the remote voice; each test sets its behaviour.
type Handler = (req: IncomingMessage, res: ServerResponse) => void | Promise<void>;
let upstreamHandler: Handler = (_req, res) => void res.writeHead(404).end();
const upstream = createServer((req, res) => {
  req.resume();
  req.on('end', () => void upstreamHandler(req, res));
});
let upstreamMp3: Buffer = Buffer.alloc(0);

let t: TestApp;
let voiceId = '';
let remoteVoiceId = '';

before(async () => {
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  t = await startTestApp({
    listen: true,
    env: {
      REMOTE_ENGINES: JSON.stringify({ local: { baseUrl: `http://127.0.0.1:${port}` } }),
      MAX_TEXT_LENGTH: '500',
    },
  });
  voiceId = await createVoice({ name: 'Narrator' });
  remoteVoiceId = await createVoice({
    name: 'Alloy',
    engine: { engine: 'remote', endpoint: 'local', voice: 'alloy' },
  });
  // Real MP3 for the upstream: espeak speech through our own encoder.
  upstreamMp3 = await speechMp3(
    t.app,
    'The remote engine sends this sentence back as MP3, a few seconds of speech in all.',
  );
});

after(async () => {
  await t.close();
  await new Promise((resolve) => upstream.close(resolve));
});

async function createVoice(payload: object): Promise<string> {
  const res = await t.app.http.inject({ method: 'POST', url: '/api/voice', headers: bearer(t.key), payload });
  assert.equal(res.statusCode, 200, res.body);
  return res.json<{ data: { id: string } }>().data.id;
}

/** Makes the upstream send half of its MP3 and hold the rest until the returned function is called. */
function holdUpstreamAfterHalf(): () => void {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  upstreamHandler = async (_req, res) => {
    res.writeHead(200, { 'content-type': 'audio/mpeg' });
    res.write(upstreamMp3.subarray(0, upstreamMp3.length >> 1));
    await gate;
    res.end(upstreamMp3.subarray(upstreamMp3.length >> 1));
  };
  return release;
}

function post(body: unknown, key = t.key, signal?: AbortSignal): Promise<Response> {
  return fetch(`${t.baseUrl}/api/tts/simple-generate`, {
    method: 'POST',
    headers: { ...bearer(key), 'content-type': 'application/json' },
    body: JSON.stringify(body),
    ...(signal !== undefined && { signal }),
  });
}

function getMp3(query: Record<string, string>, key: string | null = t.key): Promise<Response> {
  return fetch(`${t.baseUrl}/api/tts/simple-generate.mp3?${new URLSearchParams(query).toString()}`, {
    headers: key === null ? {} : bearer(key),
  });
}

async function waitTask(id: string): Promise<TaskDetailView> {
  for (;;) {
    const task = await t.app.services.tasks.get(t.accountId, id);
    if (task.status === 'failed' || (task.status === 'generated' && task.metadata.audio !== undefined))
      return task;
    await sleep(20);
  }
}

async function fetchBytes(url: string): Promise<Buffer> {
  const res = await fetch(url);
  assert.equal(res.status, 200);
  return Buffer.from(await res.arrayBuffer());
}

/** Checks a direct-return MP3 response and returns its announced data and bytes. */
async function directAudio(res: Response): Promise<{ info: OneShotAudioInfo; bytes: Buffer }> {
  assert.equal(res.status, 200);
  assert.equal(res.headers.get('content-type'), 'audio/mpeg');
  assert.equal(res.headers.get('transfer-encoding'), 'chunked');
  assert.equal(res.headers.get('content-length'), null);
  const id = res.headers.get('x-service-audio-id');
  const info = JSON.parse(res.headers.get('x-service-response-data') ?? 'null') as OneShotAudioInfo;
  assert.equal(info.id, id);
  assert.deepEqual(Object.keys(info).sort(), [
    'audio',
    'billing',
    'credit_used',
    'estimatedDuration',
    'id',
    'streamUrl',
  ]);
  return { info, bytes: Buffer.from(await res.arrayBuffer()) };
}

/** The MP3 is clean, 44.1 kHz stereo 320 kbps, as long as the synthesised piece, and speech. */
async function checkMp3(bytes: Buffer, seconds: number): Promise<void> {
  assert.equal(await ffmpegErrors(bytes), '');
  const info = await probeAudio(bytes);
  assert.deepEqual([info.codec, info.sampleRate, info.channels, info.bitRate], ['mp3', 44100, 2, 320000]);
  const extra = info.durationSeconds - seconds;
  assert.ok(extra >= -0.001 && extra <= TWO_FRAMES, `duration ${info.durationSeconds}, expected ${seconds}`);
  assert.ok(rmsDbfs(await decodeToPcm(bytes)) > -35, 'speech, not silence');
}

describe('one-shot synthesis, JSON form', () => {
  it('waits for the audio and answers {id, audio, credit_used}', async () => {
    const text = 'One shot, answered as JSON.';
    const res = await post({ text, voiceId, speechRate: 1.2 });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('x-service-audio-id'), null);
    assert.equal(res.headers.get('x-service-response-data'), null);
    const body = (await res.json()) as { status: number; message: string; data: OneShotResult };
    assert.equal(body.status, 200);
    assert.equal(body.message, 'OK');
    assert.deepEqual(Object.keys(body.data).sort(), ['audio', 'credit_used', 'id']);
    assert.equal(body.data.credit_used, text.length);
    assert.match(
      body.data.audio,
      new RegExp(`^${t.baseUrl}/api/tts/generate/${body.data.id}/audio\\.mp3\\?auth=[0-9a-f]{32}$`),
    );
    // It is an ordinary task, already generated when the answer comes.
    const task = await t.app.services.tasks.get(t.accountId, body.data.id);
    assert.equal(task.status, 'generated');
    assert.equal(task.metadata.audio, body.data.audio);
    assert.equal(task.metadata.contents[0]?.speechRate, 1.2);
    await checkMp3(await fetchBytes(body.data.audio), task.estimatedDuration);
  });

  it('a client leaving while it waits does not stop the task', async () => {
    let arrive!: () => void;
    let release!: () => void;
    const arrived = new Promise<void>((resolve) => (arrive = resolve));
    const gate = new Promise<void>((resolve) => (release = resolve));
    upstreamHandler = async (_req, res) => {
      arrive();
      await gate;
      res.writeHead(200, { 'content-type': 'audio/mpeg' }).end(upstreamMp3);
    };
    const before = (await t.app.services.tasks.list(t.accountId, {})).total;
    const client = new AbortController();
    const pending = post({ text: 'Nobody waits for me.', voiceId: remoteVoiceId }, t.key, client.signal);
    await arrived;
    client.abort();
    await assert.rejects(pending);
    release();
    const { items, total } = await t.app.services.tasks.list(t.accountId, {});
    assert.equal(total, before + 1);
    const task = await waitTask(String(items[0]?.id));
    assert.equal(task.status, 'generated', task.error);
  });

  it('adds streamUrl with stream: true', async () => {
    const res = await post({ text: 'With a stream URL.', voiceId, stream: true });
    const { data } = (await res.json()) as { data: OneShotResult };
    const auth = new URL(data.audio).searchParams.get('auth');
    assert.equal(data.streamUrl, `${t.baseUrl}/api/tts/generate/${data.id}/live.mp3?auth=${auth}`);
  });
});

describe('one-shot synthesis, direct MP3', () => {
  it('POST with direct_stream answers the MP3 itself, chunked, with X-Service-* headers', async () => {
    const text = 'Direct stream: the bytes come back in the response itself.';
    const sessionsBefore = t.app.services.stream.pipelineRuns();
    const { info, bytes } = await directAudio(
      await post({ text, voiceId, direct_stream: true, stream: false }),
    );
    const task = await waitTask(info.id);
    assert.equal(task.status, 'generated', task.error);
    // The node generating it answers from the piece's own MP3: no stream session is started.
    assert.equal(t.app.services.stream.pipelineRuns(), sessionsBefore);
    // The announced data matches the task as the detail endpoint reports it once generated.
    assert.equal(info.audio, task.metadata.audio);
    assert.equal(
      info.streamUrl,
      `${t.baseUrl}/api/tts/generate/${info.id}/live.mp3?auth=${new URL(info.audio).searchParams.get('auth')}`,
    );
    assert.equal(info.credit_used, text.length);
    assert.equal(task.credit_used, text.length);
    assert.deepEqual(info.billing, { unit: 'character', characters: text.length, credits: text.length });
    assert.ok(
      Math.abs(info.estimatedDuration - text.length / 14) < 0.01,
      'the estimate before the audio exists',
    );
    await checkMp3(bytes, task.estimatedDuration);
    // One encoder over the same PCM in the same blocks: the streamed bytes are the stored audio.
    assert.deepEqual(bytes, await fetchBytes(String(task.metadata.audio)));
  });

  it('GET /api/tts/simple-generate.mp3 takes the fields as query parameters', async () => {
    const text = 'Asked for with a plain GET.';
    const { info, bytes } = await directAudio(
      await getMp3({ text, voiceId, speechRate: '1.5', seed: '3', vivid: 'true', unknown: 'x' }),
    );
    const task = await waitTask(info.id);
    assert.equal(task.status, 'generated', task.error);
    const c = task.metadata.contents[0];
    assert.deepEqual(
      { text: c?.text, speechRate: c?.speechRate, seed: c?.seed, vivid: c?.vivid, unknown: c?.unknown },
      { text, speechRate: 1.5, seed: 3, vivid: true, unknown: undefined },
    );
    await checkMp3(bytes, task.estimatedDuration);
  });

  it('streamUrl answers live bytes while generating and the stored file afterwards, never a redirect', async () => {
    const release = holdUpstreamAfterHalf();
    const res = await post({ text: 'Held upstream.', voiceId: remoteVoiceId, direct_stream: true });
    const info = JSON.parse(String(res.headers.get('x-reecho-response-data'))) as OneShotAudioInfo;
    const direct = (async () => Buffer.from(await res.arrayBuffer()))();
    // While the upstream holds: 200, live (chunked, no Content-Length), MP3 bytes already there.
    const live = await fetch(info.streamUrl, { redirect: 'manual' });
    assert.equal(live.status, 200);
    assert.equal(live.headers.get('content-type'), 'audio/mpeg');
    assert.equal(live.headers.get('content-length'), null);
    const reader = (live.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    assert.ok(first.value !== undefined && first.value.length > 0);
    assert.equal((await t.app.services.tasks.get(t.accountId, info.id)).status, 'processing');
    release();
    const parts: Uint8Array[] = [first.value];
    for (let r = await reader.read(); !r.done; r = await reader.read()) parts.push(r.value);
    await direct;
    const task = await waitTask(info.id);
    assert.equal(task.status, 'generated', task.error);
    // Afterwards the same URL answers the stored file itself: 200 with a length, no redirect.
    const stored = await fetch(info.streamUrl, { redirect: 'manual' });
    assert.equal(stored.status, 200);
    assert.equal(stored.headers.get('content-type'), 'audio/mpeg');
    const storedBytes = Buffer.from(await stored.arrayBuffer());
    assert.equal(Number(stored.headers.get('content-length')), storedBytes.length);
    assert.ok(Buffer.concat(parts).equals(storedBytes), 'the live bytes are the stored file');
    const ranged = await fetch(info.streamUrl, { redirect: 'manual', headers: { range: 'bytes=0-99' } });
    assert.equal(ranged.status, 206);
    assert.equal(Buffer.from(await ranged.arrayBuffer()).length, 100);
  });

  it('streams while the piece is still being synthesised', async () => {
    // The upstream sends half of its MP3 and holds the rest: the client already has audio while
    // the task is processing.
    const release = holdUpstreamAfterHalf();
    const res = await getMp3({ text: 'Held upstream.', voiceId: remoteVoiceId });
    assert.equal(res.status, 200);
    const id = String(res.headers.get('x-service-audio-id'));
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    assert.ok(first.value !== undefined && first.value.length > 0);
    assert.equal((await t.app.services.tasks.get(t.accountId, id)).status, 'processing');
    release();
    const parts: Uint8Array[] = [first.value];
    for (let r = await reader.read(); !r.done; r = await reader.read()) parts.push(r.value);
    const bytes = Buffer.concat(parts);
    const task = await waitTask(id);
    assert.equal(task.status, 'generated', task.error);
    await checkMp3(bytes, task.estimatedDuration);
  });

  it('a client leaving mid-stream stops its encoding, not the task', async () => {
    const release = holdUpstreamAfterHalf();
    const res = await getMp3({ text: 'Abandoned.', voiceId: remoteVoiceId });
    const id = String(res.headers.get('x-service-audio-id'));
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    assert.ok(((await reader.read()).value?.length ?? 0) > 0);
    await reader.cancel(); // closes the connection
    release();
    const task = await waitTask(id);
    assert.equal(task.status, 'generated', task.error);
    assert.equal(await ffmpegErrors(await fetchBytes(String(task.metadata.audio))), '');
  });

  it('cuts the stream when generation fails after the first byte', async () => {
    // The upstream sends half of its MP3, then (once the client holds audio) drops the connection.
    let drop!: () => void;
    const dropped = new Promise<void>((resolve) => (drop = resolve));
    upstreamHandler = async (_req, res) => {
      res.writeHead(200, { 'content-type': 'audio/mpeg', 'content-length': String(upstreamMp3.length) });
      res.write(upstreamMp3.subarray(0, upstreamMp3.length >> 1));
      await dropped;
      res.socket?.destroy();
    };
    const res = await post({ text: 'Breaks halfway.', voiceId: remoteVoiceId, direct_stream: true });
    assert.equal(res.status, 200);
    const id = String(res.headers.get('x-service-audio-id'));
    const reader = (res.body as ReadableStream<Uint8Array>).getReader();
    const first = await reader.read();
    assert.ok(first.value !== undefined && first.value.length > 0, 'audio flowed before the failure');
    drop();
    // No JSON error appended: the chunked body just ends without its terminating chunk.
    await assert.rejects(async () => {
      for (let r = await reader.read(); !r.done; r = await reader.read());
    });
    const task = await waitTask(id);
    assert.equal(task.status, 'failed');
    assert.equal(task.error, `content 0 of task ${id}: the speech engine failed (engine error)`);
  });
});

describe('one-shot synthesis, errors before the first byte', () => {
  const cases: [string, unknown, number, string, RegExp][] = [
    ['missing text', { voiceId: 'x' }, 400, 'VALIDATION_MISSING_FIELD', /^text is required$/],
    ['empty text', { text: '   ', voiceId: 'x' }, 400, 'TTS_TEXT_EMPTY', /^text is empty$/],
    [
      'text too long',
      { text: 'a'.repeat(501), voiceId: 'x' },
      400,
      'VALIDATION_TOO_LONG',
      /^text must be at most 500/,
    ],
    ['missing voiceId', { text: 'Hi.' }, 400, 'VALIDATION_MISSING_FIELD', /voiceId/],
    // Lenient: an out-of-range speechRate is dropped, but an emo_switch of
    // the wrong length is refused.
    [
      'emo_switch of 3 numbers',
      { text: 'Hi.', voiceId: 'VOICE', emo_switch: [1, 2, 3] },
      400,
      'TTS_CONTENTS_INVALID',
      /^emo_switch/,
    ],
    [
      'type not text',
      { type: 'audio', text: 'Hi.', voiceId: 'VOICE' },
      400,
      'TTS_CONTENTS_INVALID',
      /^type must be "text"/,
    ],
    [
      'stream not boolean',
      { text: 'Hi.', voiceId: 'VOICE', stream: 'yes' },
      400,
      'VALIDATION_INVALID_VALUE',
      /stream/,
    ],
    [
      'direct_stream not boolean',
      { text: 'Hi.', voiceId: 'VOICE', direct_stream: 1 },
      400,
      'VALIDATION_INVALID_VALUE',
      /direct_stream/,
    ],
    ['unknown voice', { text: 'Hi.', voiceId: 'nope', direct_stream: true }, 404, 'VOICE_NOT_FOUND', /nope/],
    ['not an object', ['Hi.'], 400, 'VALIDATION_INVALID_FORMAT', /object/],
  ];
  for (const [name, body, status, code, message] of cases) {
    it(`${name} → ${status} ${code}`, async () => {
      const payload = JSON.parse(JSON.stringify(body).replace('"VOICE"', JSON.stringify(voiceId))) as unknown;
      for (const directStream of [false, true]) {
        const withMode =
          typeof payload === 'object' &&
          payload !== null &&
          !Array.isArray(payload) &&
          !('direct_stream' in payload)
            ? { ...payload, direct_stream: directStream }
            : payload;
        const res = await post(withMode);
        assert.equal(res.status, status);
        assert.match(String(res.headers.get('content-type')), /^application\/json/);
        assert.equal(res.headers.get('x-service-audio-id'), null);
        const err = (await res.json()) as ErrorBody;
        assert.equal(err.code, code);
        assert.match(err.message, message);
      }
    });
  }

  it('GET form: bad query values, missing or wrong bearer key', async () => {
    const bad = await getMp3({ text: 'Hi.', voiceId, emo_switch: '1,2' });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as ErrorBody).code, 'TTS_CONTENTS_INVALID');
    const twice = await fetch(`${t.baseUrl}/api/tts/simple-generate.mp3?text=a&text=b&voiceId=${voiceId}`, {
      headers: bearer(t.key),
    });
    assert.equal(((await twice.json()) as ErrorBody).code, 'VALIDATION_INVALID_VALUE');
    const missing = await getMp3({ text: 'Hi.', voiceId }, null);
    assert.equal(missing.status, 401);
    assert.equal(((await missing.json()) as ErrorBody).code, 'AUTH_UNAUTHORIZED');
    const wrong = await getMp3({ text: 'Hi.', voiceId }, `sk-${'0'.repeat(32)}`);
    assert.equal(wrong.status, 401);
    const other = await t.newAccount();
    const foreign = await getMp3({ text: 'Hi.', voiceId }, other.key);
    assert.equal(foreign.status, 404);
    assert.equal(((await foreign.json()) as ErrorBody).code, 'VOICE_NOT_FOUND');
  });

  it('HEAD does not start a synthesis', async () => {
    const before = (await t.app.services.tasks.list(t.accountId, {})).total;
    const res = await fetch(`${t.baseUrl}/api/tts/simple-generate.mp3?text=Hi.&voiceId=${voiceId}`, {
      method: 'HEAD',
      headers: bearer(t.key),
    });
    assert.equal(res.status, 404);
    assert.equal((await t.app.services.tasks.list(t.accountId, {})).total, before);
  });

  it("a generation failure before any audio is a JSON 500 with the task's error", async () => {
    upstreamHandler = (_req, res) =>
      void res.writeHead(500, { 'content-type': 'application/json' }).end('{"error":"model overloaded"}');
    for (const send of [
      () => post({ text: 'Fails.', voiceId: remoteVoiceId }),
      () => post({ text: 'Fails.', voiceId: remoteVoiceId, direct_stream: true }),
      () => getMp3({ text: 'Fails.', voiceId: remoteVoiceId }),
    ]) {
      const res = await send();
      assert.equal(res.status, 500);
      assert.match(String(res.headers.get('content-type')), /^application\/json/);
      assert.equal(res.headers.get('x-service-audio-id'), null);
      assert.equal(res.headers.get('x-service-response-data'), null);
      const err = (await res.json()) as ErrorBody;
      assert.equal(err.code, 'TTS_GENERATE_FAILED');
      // Generic for the tenant: the upstream's status and body are only logged.
      assert.match(
        err.message,
        /^generation failed: content 0 of task [0-9a-f-]+: the speech engine failed \(engine error\)$/,
      );
      assert.ok(!err.message.includes('overloaded') && !err.message.includes('HTTP 500'));
      assert.match(String(err.requestId), /^[0-9a-f-]{36}$/);
    }
  });
});
