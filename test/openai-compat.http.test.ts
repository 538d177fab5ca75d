// The OpenAI-compatible route through real clients on the real app over HTTP: the official
// `openai` SDK (every format checked with ffprobe, SSE events, its error classes), Open WebUI's
// request sequence, Home Assistant's OpenAI-integration requests, and the limits of the tenant API.
import assert from 'node:assert/strict';
import { readdir, readlink } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import OpenAI from 'openai';
import { decodeToPcm, ffmpegErrors, probeAudio, rmsDbfs } from './helpers/audio-check.js';
import { bearer, speechMp3, startTestApp, type TestApp } from './helpers/test-app.js';

// About five seconds of speech: long enough that 2 % (100 ms) exceeds the MP3's encoder delay and padding.
const TEXT =
  'The quick brown fox jumps over the lazy dog, and then it runs back home across the quiet field.';
const VOICE = 'espeak:en-us';

let t: TestApp;
let client: OpenAI;

interface OpenAiError {
  error: { message: string; type: string; param: string | null; code: string };
}

// A local OpenAI-compatible endpoint behind the remote engine: records what it is asked.
const upstreamBodies: Record<string, unknown>[] = [];
let upstreamMp3: Buffer = Buffer.alloc(0);
const upstream = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => chunks.push(chunk));
  req.on('end', () => {
    upstreamBodies.push(JSON.parse(Buffer.concat(chunks).toString('utf8')) as Record<string, unknown>);
    res.writeHead(200, { 'content-type': 'audio/mpeg' }).end(upstreamMp3);
  });
});

before(async () => {
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const { port } = upstream.address() as AddressInfo;
  t = await startTestApp({
    listen: true,
    env: { REMOTE_ENGINES: JSON.stringify({ local: { baseUrl: `http://127.0.0.1:${port}` } }) },
  });
  client = new OpenAI({ apiKey: t.key, baseURL: `${t.baseUrl}/v1`, maxRetries: 0 });
  upstreamMp3 = await speechMp3(t.app, 'The remote endpoint answers with this sentence.');
});

after(async () => {
  await t.close();
  await new Promise((resolve) => upstream.close(resolve));
});

async function speak(
  params: Partial<OpenAI.Audio.SpeechCreateParams>,
): Promise<{ bytes: Buffer; contentType: string; audioId: string }> {
  const response = await client.audio.speech
    .create({ model: 'tts-1', voice: VOICE, input: TEXT, ...params })
    .asResponse();
  return {
    bytes: Buffer.from(await response.arrayBuffer()),
    contentType: response.headers.get('content-type') ?? '',
    audioId: response.headers.get('x-service-audio-id') ?? '',
  };
}

/** Seconds of audio ffmpeg decodes from `bytes` (raw s16le mono 24 kHz for `pcm`). */
async function decodedSeconds(bytes: Buffer, format: string): Promise<number> {
  if (format === 'pcm') return bytes.length / 2 / 24_000;
  return (await decodeToPcm(bytes, 24_000)).length / 24_000;
}

describe('POST /v1/audio/speech with the openai SDK', () => {
  let mp3Seconds = 0;

  it('mp3 (the default): the service MP3, audio/mpeg', async () => {
    const { bytes, contentType } = await speak({});
    assert.equal(contentType, 'audio/mpeg');
    const info = await probeAudio(bytes);
    assert.equal(info.codec, 'mp3');
    assert.equal(info.sampleRate, 44_100);
    assert.equal(await ffmpegErrors(bytes), '');
    mp3Seconds = await decodedSeconds(bytes, 'mp3');
    assert.ok(mp3Seconds > 3, `${mp3Seconds} s of speech`);
  });

  const formats: { format: string; contentType: string; codec?: string; rate?: number }[] = [
    { format: 'opus', contentType: 'audio/ogg; codecs=opus', codec: 'opus', rate: 48_000 },
    { format: 'flac', contentType: 'audio/flac', codec: 'flac', rate: 24_000 },
    { format: 'wav', contentType: 'audio/wav', codec: 'pcm_s16le', rate: 24_000 },
    { format: 'pcm', contentType: 'audio/pcm' },
  ];
  for (const { format, contentType, codec, rate } of formats) {
    it(`${format}: ${contentType}${codec === undefined ? '' : `, ${codec}`}, as long as the mp3 (± 2 %)`, async () => {
      const { bytes, contentType: got } = await speak({ response_format: format as 'mp3' });
      assert.equal(got, contentType);
      if (codec !== undefined) {
        const info = await probeAudio(bytes);
        assert.equal(info.codec, codec);
        // Ogg Opus decodes at 48 kHz whatever was encoded (24 kHz here).
        assert.equal(info.sampleRate, rate);
        assert.equal(info.channels, 1);
        assert.equal(await ffmpegErrors(bytes), '');
      } else {
        assert.equal(bytes.length % 2, 0);
        assert.ok(rmsDbfs(new Int16Array(new Uint8Array(bytes).buffer)) > -40, 'speech, not silence');
      }
      const seconds = await decodedSeconds(bytes, format);
      assert.ok(
        Math.abs(seconds - mp3Seconds) <= mp3Seconds * 0.02,
        `${format}: ${seconds} s, mp3: ${mp3Seconds} s`,
      );
    });
  }

  it('aac: a 400 listing the formats it can produce, through the SDK error class', async () => {
    await assert.rejects(speak({ response_format: 'aac' }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError);
      assert.equal(err.status, 400);
      assert.match(err.message, /aac/);
      assert.match(err.message, /mp3, opus, flac, wav, pcm/);
      assert.equal((err.error as OpenAiError['error']).param, 'response_format');
      assert.equal(err.code, 'VALIDATION_INVALID_VALUE');
      assert.ok(err.requestID !== undefined || err.headers.get('x-service-app-request-id') !== null);
      return true;
    });
  });

  it('refuses an unknown format, a speed out of range and a missing input, naming the field', async () => {
    for (const [params, param] of [
      [{ response_format: 'ogg' }, 'response_format'],
      [{ speed: 5 }, 'speed'],
      [{ input: '' }, 'input'],
      [{ model: 'whisper-1' }, 'model'],
    ] as const) {
      await assert.rejects(speak(params as Partial<OpenAI.Audio.SpeechCreateParams>), (err: unknown) => {
        assert.ok(err instanceof OpenAI.BadRequestError, `${JSON.stringify(params)}: ${String(err)}`);
        assert.equal((err.error as OpenAiError['error']).param, param);
        return true;
      });
    }
  });

  it('a wrong key is the SDK AuthenticationError; an unknown voice its NotFoundError', async () => {
    const stranger = new OpenAI({ apiKey: 'sk-wrong', baseURL: `${t.baseUrl}/v1`, maxRetries: 0 });
    await assert.rejects(
      stranger.audio.speech.create({ model: 'tts-1', voice: 'alloy', input: 'Hello.' }),
      (err: unknown) => err instanceof OpenAI.AuthenticationError && err.status === 401,
    );
    await assert.rejects(speak({ voice: 'nobody-of-that-name' }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.NotFoundError);
      assert.match(err.message, /nobody-of-that-name/);
      assert.equal(err.code, 'VOICE_NOT_FOUND');
      return true;
    });
  });

  it('stream_format sse: speech.audio.delta events with base64 audio, then speech.audio.done with usage', async () => {
    const response = await client.audio.speech
      .create({ model: 'tts-1', voice: VOICE, input: TEXT, response_format: 'wav', stream_format: 'sse' })
      .asResponse();
    assert.equal(response.headers.get('content-type'), 'text/event-stream');
    const { Stream } = await import('openai/core/streaming');
    const events: { type: string; audio?: string; usage?: { input_tokens: number; total_tokens: number } }[] =
      [];
    for await (const event of Stream.fromSSEResponse<(typeof events)[number]>(
      response,
      new AbortController(),
    ))
      events.push(event);
    const deltas = events.filter((e) => e.type === 'speech.audio.delta');
    assert.ok(deltas.length > 1, `${deltas.length} delta events`);
    const done = events.at(-1);
    assert.equal(done?.type, 'speech.audio.done');
    assert.equal(done.usage?.input_tokens, [...TEXT].length);
    const wav = Buffer.concat(deltas.map((e) => Buffer.from(e.audio ?? '', 'base64')));
    assert.equal((await probeAudio(wav)).codec, 'pcm_s16le');
    assert.equal(await ffmpegErrors(wav), '');
  });

  it('is recorded and billed like a one-shot: its task is listed with the characters', async () => {
    const { audioId } = await speak({ voice: 'alloy', input: 'Counted like any other synthesis.' });
    const res = await t.app.http.inject({ url: `/api/tts/generate/${audioId}`, headers: bearer(t.key) });
    assert.equal(res.statusCode, 200);
    const task = res.json<{ data: { billing: { characters: number } } }>().data;
    assert.equal(task.billing.characters, [...'Counted like any other synthesis.'].length);
  });
});

describe('voices', () => {
  it('takes a voice id, an engine voice, the model as engine, a stock name and a unique name', async () => {
    const created = await t.app.http.inject({
      method: 'POST',
      url: '/api/voice',
      headers: bearer(t.key),
      payload: { name: 'Solo Narrator', engine: { engine: 'espeak', voice: 'en-gb' } },
    });
    const id = created.json<{ data: { id: string } }>().data.id;
    for (const request of [
      { voice: id },
      { voice: 'espeak:en-gb+f3' },
      { model: 'espeak', voice: 'en-gb' },
      { voice: 'nova' },
      { voice: 'Solo Narrator' },
    ]) {
      const { bytes } = await speak({ input: 'Hello there.', ...request });
      assert.equal((await probeAudio(bytes)).codec, 'mp3', JSON.stringify(request));
    }
  });

  it('an ambiguous voice name is a 400 naming the ids', async () => {
    const ids: string[] = [];
    for (let n = 0; n < 2; n++) {
      const res = await t.app.http.inject({
        method: 'POST',
        url: '/api/voice',
        headers: bearer(t.key),
        payload: { name: 'Twin', engine: { engine: 'espeak', voice: 'en-us' } },
      });
      ids.push(res.json<{ data: { id: string } }>().data.id);
    }
    await assert.rejects(speak({ voice: 'Twin' }), (err: unknown) => {
      assert.ok(err instanceof OpenAI.BadRequestError);
      for (const id of ids) assert.match(err.message, new RegExp(id));
      return true;
    });
  });
});

describe("Open WebUI's sequence", () => {
  it('voices and models without a key (public entries only), then speech with the key and no format', async () => {
    await t.app.http.inject({
      method: 'POST',
      url: '/api/voice',
      headers: bearer(t.key),
      payload: { name: 'Private Narrator', engine: { engine: 'espeak', voice: 'en-us' } },
    });
    const voices = await fetch(`${t.baseUrl}/v1/audio/voices`);
    assert.equal(voices.status, 200);
    const listed = ((await voices.json()) as { voices: { id: string; name: string }[] }).voices;
    assert.ok(listed.some((v) => v.id === 'espeak:gmw/en-US'));
    assert.ok(listed.some((v) => v.id === 'alloy'));
    assert.ok(!listed.some((v) => v.name === 'Private Narrator'), 'no account voice without its key');
    const models = await fetch(`${t.baseUrl}/v1/audio/models`);
    const modelIds = ((await models.json()) as { models: { id: string }[] }).models.map((m) => m.id);
    assert.ok(['tts-1', 'tts-1-hd', 'gpt-4o-mini-tts', 'espeak', 'flite'].every((m) => modelIds.includes(m)));

    const own = await fetch(`${t.baseUrl}/v1/audio/voices`, { headers: bearer(t.key) });
    const ownVoices = ((await own.json()) as { voices: { name: string }[] }).voices;
    assert.ok(
      ownVoices.some((v) => v.name === 'Private Narrator'),
      'the account voices with its key',
    );

    const speech = await fetch(`${t.baseUrl}/v1/audio/speech`, {
      method: 'POST',
      headers: { ...bearer(t.key), 'content-type': 'application/json' },
      body: JSON.stringify({ input: 'Open WebUI reads this aloud.', voice: 'alloy', model: 'tts-1' }),
    });
    assert.equal(speech.status, 200);
    assert.equal(speech.headers.get('content-type'), 'audio/mpeg');
    assert.equal(speech.headers.get('transfer-encoding'), 'chunked');
    assert.equal((await probeAudio(Buffer.from(await speech.arrayBuffer()))).codec, 'mp3');
  });

  it('GET /v1/models answers the OpenAI list shape', async () => {
    const res = await fetch(`${t.baseUrl}/v1/models`);
    const body = (await res.json()) as {
      object: string;
      data: { id: string; object: string; owned_by: string }[];
    };
    assert.equal(body.object, 'list');
    assert.ok(body.data.every((m) => m.object === 'model' && typeof m.owned_by === 'string'));
    const page = await client.models.list();
    assert.ok(page.data.some((m) => m.id === 'tts-1'));
  });

  it('a wrong key on a list is a 401 in OpenAI shape with the request id', async () => {
    const res = await fetch(`${t.baseUrl}/v1/audio/voices`, { headers: bearer('sk-wrong') });
    assert.equal(res.status, 401);
    assert.ok(res.headers.get('x-service-app-request-id'));
    const body = (await res.json()) as OpenAiError;
    assert.equal(body.error.type, 'authentication_error');
    assert.equal(body.error.code, 'AUTH_UNAUTHORIZED');
  });

  it('an unknown /v1 path and bad JSON answer in OpenAI shape', async () => {
    const missing = await fetch(`${t.baseUrl}/v1/audio/transcriptions`, { method: 'POST' });
    assert.equal(missing.status, 404);
    assert.equal(((await missing.json()) as OpenAiError).error.code, 'RESOURCE_NOT_FOUND');
    const bad = await fetch(`${t.baseUrl}/v1/audio/speech`, {
      method: 'POST',
      headers: { ...bearer(t.key), 'content-type': 'application/json' },
      body: '{"input": ',
    });
    assert.equal(bad.status, 400);
    assert.equal(((await bad.json()) as OpenAiError).error.type, 'invalid_request_error');
  });
});

describe("Home Assistant's OpenAI TTS integration", () => {
  it('wav and pcm with speed and instructions; a faster speed gives shorter audio', async () => {
    const body = { model: 'gpt-4o-mini-tts', voice: VOICE, input: TEXT, instructions: 'Speak cheerfully.' };
    const post = (extra: Record<string, unknown>) =>
      fetch(`${t.baseUrl}/v1/audio/speech`, {
        method: 'POST',
        headers: { ...bearer(t.key), 'content-type': 'application/json' },
        body: JSON.stringify({ ...body, ...extra }),
      });
    const wav = await post({ response_format: 'wav', speed: 1 });
    assert.equal(wav.status, 200);
    assert.equal(wav.headers.get('content-type'), 'audio/wav');
    const wavSeconds = await decodedSeconds(Buffer.from(await wav.arrayBuffer()), 'wav');
    const pcm = await post({ response_format: 'pcm', speed: 1.5 });
    assert.equal(pcm.status, 200);
    assert.equal(pcm.headers.get('content-type'), 'audio/pcm');
    const pcmSeconds = await decodedSeconds(Buffer.from(await pcm.arrayBuffer()), 'pcm');
    assert.ok(pcmSeconds < wavSeconds * 0.85, `speed 1.5: ${pcmSeconds} s, speed 1: ${wavSeconds} s`);
  });
});

/** Descriptors of this process open on the piece audio under DATA_DIR/work (PCM and MP3 readers). */
async function pieceFilesOpen(): Promise<number> {
  const work = `${t.app.config.dataDir}/work/`;
  let open = 0;
  for (const fd of await readdir('/proc/self/fd')) {
    const target = await readlink(`/proc/self/fd/${fd}`).catch(() => '');
    if (target.startsWith(work)) open++;
  }
  return open;
}

describe('a client leaving mid-audio', () => {
  it('closes its reader of the piece audio; the task still finishes', async () => {
    const response = await fetch(`${t.baseUrl}/v1/audio/speech`, {
      method: 'POST',
      headers: { ...bearer(t.key), 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'tts-1', voice: VOICE, input: TEXT.repeat(6), response_format: 'flac' }),
    });
    assert.equal(response.status, 200);
    const id = String(response.headers.get('x-service-audio-id'));
    const reader = (response.body as ReadableStream<Uint8Array>).getReader();
    assert.ok(((await reader.read()).value?.length ?? 0) > 0, 'audio flowed');
    await reader.cancel(); // closes the connection
    let status = '';
    for (let n = 0; n < 600 && status !== 'generated' && status !== 'failed'; n++) {
      const res = await t.app.http.inject({ url: `/api/tts/generate/${id}`, headers: bearer(t.key) });
      status = res.json<{ data: { status: string } }>().data.status;
      if (status !== 'generated') await sleep(100);
    }
    assert.equal(status, 'generated');
    // Once every task is generated, nothing of this app reads or writes piece audio any more.
    let open = await pieceFilesOpen();
    for (let n = 0; n < 100 && open > 0; n++) {
      await sleep(50);
      open = await pieceFilesOpen();
    }
    assert.equal(open, 0, 'no reader of the piece audio is left open');
  });
});

describe('instructions', () => {
  it('reach a remote OpenAI-compatible engine, and only when given', async () => {
    upstreamBodies.length = 0;
    const { bytes } = await speak({
      model: 'gpt-4o-mini-tts',
      voice: 'local:alloy',
      input: 'Ahoy there.',
      instructions: 'Speak like a pirate.',
      response_format: 'flac',
    });
    assert.equal((await probeAudio(bytes)).codec, 'flac');
    await speak({ voice: 'local:alloy', input: 'Plain words.' });
    assert.equal(upstreamBodies.length, 2);
    assert.equal(upstreamBodies[0]?.instructions, 'Speak like a pirate.');
    assert.equal(upstreamBodies[0]?.voice, 'alloy');
    assert.ok(!('instructions' in (upstreamBodies[1] ?? {})));
  });
});

describe('limits on /v1', () => {
  it('lists off without a key; the daily character quota and the rate limit apply to speech', async () => {
    const limited = await startTestApp({
      env: { OPENAI_PUBLIC_LISTS: 'false', ACCOUNT_DAILY_CHARACTERS: '40', RATE_LIMIT_MAX: '3' },
    });
    try {
      const lists = await limited.app.http.inject({ url: '/v1/audio/voices' });
      assert.equal(lists.statusCode, 401);
      assert.equal(lists.json<OpenAiError>().error.code, 'AUTH_UNAUTHORIZED');
      const keyed = await limited.app.http.inject({ url: '/v1/audio/voices', headers: bearer(limited.key) });
      assert.equal(keyed.statusCode, 200);

      const speech = (input: string) =>
        limited.app.http.inject({
          method: 'POST',
          url: '/v1/audio/speech',
          headers: bearer(limited.key),
          payload: { model: 'tts-1', voice: VOICE, input, response_format: 'pcm' },
        });
      assert.equal((await speech('Thirty characters of speech..')).statusCode, 200);
      const overQuota = await speech('Twenty more characters.');
      assert.equal(overQuota.statusCode, 429);
      assert.equal(overQuota.json<OpenAiError>().error.type, 'rate_limit_error');
      assert.ok(overQuota.headers['retry-after'] !== undefined);
      // The third request of the window is the per-account rate limit's last; the fourth is refused.
      const fourth = await (await speech('x'), speech('y'));
      assert.equal(fourth.statusCode, 429);
      assert.equal(fourth.json<OpenAiError>().error.code, 'RATE_LIMIT_EXCEEDED');
    } finally {
      await limited.close();
    }
  });
});
