// Drop-in compatibility: the request shapes, download rules and polling loops of public
// clients of the hosted voice API, replayed request for request against the real app over HTTP.
// Each `describe` names the client and the file its behaviour was read from; the requests are
// written here from what those files do (no code of theirs is copied). What they depend on is
// summarised in docs/compatibility.md.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { createVoice, startTestApp, type TestApp } from './helpers/test-app.js';

let t: TestApp;
let voiceId = '';

before(async () => {
  t = await startTestApp({ listen: true });
  voiceId = await createVoice(t.app, t.key, { name: 'Compat narrator' });
});
after(() => t.close());

interface Envelope<T> {
  status: number;
  message?: string;
  data: T;
}

/** A JSON API call as the clients send it: bearer, JSON body on POST only unless `headers` say otherwise. */
async function api(
  method: string,
  path: string,
  body?: unknown,
  headers: Record<string, string> = {},
): Promise<Response> {
  return fetch(`${t.baseUrl}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${t.key}`,
      ...(body !== undefined && { 'content-type': 'application/json' }),
      ...headers,
    },
    ...(body !== undefined && { body: typeof body === 'string' ? body : JSON.stringify(body) }),
  });
}

/** The envelope of a JSON answer, with the gates most clients apply: JSON content type, status 200, object data. */
async function envelope<T>(res: Response): Promise<T> {
  const text = await res.text();
  assert.equal(res.status, 200, text);
  assert.match(String(res.headers.get('content-type')), /^application\/json/);
  const parsed = JSON.parse(text) as Envelope<T>;
  assert.equal(parsed.status, 200, text);
  assert.ok(Number.isInteger(parsed.status));
  assert.equal(typeof parsed.data, 'object');
  assert.ok(parsed.data !== null);
  return parsed.data;
}

/** An MP3's first bytes: an ID3 tag or a frame sync. */
function isMp3(bytes: Uint8Array): boolean {
  if (bytes[0] === 0x49 && bytes[1] === 0x44 && bytes[2] === 0x33) return true;
  return bytes[0] === 0xff && ((bytes[1] ?? 0) & 0xe0) === 0xe0;
}

interface Download {
  status: number;
  type: string;
  length: string | null;
  bytes: Uint8Array;
}

/** An audio download: following redirects or not, with the bearer or without credentials. */
async function download(
  url: string,
  options: { followRedirects: boolean; bearer: boolean },
): Promise<Download> {
  const res = await fetch(url, {
    redirect: options.followRedirects ? 'follow' : 'manual',
    headers: options.bearer ? { authorization: `Bearer ${t.key}` } : {},
  });
  return {
    status: res.status,
    type: String(res.headers.get('content-type')),
    length: res.headers.get('content-length'),
    bytes: new Uint8Array(await res.arrayBuffer()),
  };
}

/** The strictest download gate among the clients: 200 exactly, audio/mpeg, MP3 at byte 0, integer Content-Length. */
function assertAudio(d: Download, what: string): void {
  assert.equal(d.status, 200, `${what}: status ${String(d.status)}`);
  assert.match(d.type, /^audio\/mpeg/, what);
  assert.ok(d.bytes.length > 128, `${what}: ${String(d.bytes.length)} bytes`);
  assert.ok(isMp3(d.bytes), `${what}: not MP3 at byte 0`);
  if (d.length !== null) {
    assert.match(d.length, /^\d+$/, what);
    assert.equal(Number(d.length), d.bytes.length, what);
  }
}

interface TaskRecord {
  id: string;
  status: string;
  metadata: {
    audio?: string;
    contents?: { audio?: string; text?: string }[];
    voices: { id: string; name?: string; idForGenerate?: string }[];
  };
  streamUrl?: string;
}

/**
 * A client's polling loop: GET the task every `intervalMs` until `generated` (or `failed`, for
 * the clients that stop on it), each answer gated like theirs. The clients poll every 1–3 s; the
 * interval is shorter here, the loop is theirs. `deadlineMs` is a bound for a busy machine.
 */
async function poll(
  id: string,
  options: { intervalMs: number; query?: string; deadlineMs?: number },
): Promise<TaskRecord> {
  const deadline = Date.now() + (options.deadlineMs ?? 120_000);
  for (;;) {
    const task = await envelope<TaskRecord>(
      await api('GET', `/api/tts/generate/${id}${options.query ?? ''}`),
    );
    assert.equal(task.id, id);
    assert.ok(['pending', 'processing', 'generated', 'failed'].includes(task.status), task.status);
    if (task.status === 'generated' || task.status === 'failed') return task;
    assert.ok(Date.now() < deadline, `task ${id} still ${task.status}`);
    await sleep(options.intervalMs);
  }
}

describe('speechswitch/client (sdk/providers/vocu/index.ts, sdks/go/providers/vocu/vocu.go)', () => {
  const base = () => ({
    voiceId,
    text: 'Hello from a provider-neutral SDK.',
    promptId: 'default',
    preset: 'balance',
    language: 'auto',
    vivid: false,
    speechRate: 0.8,
    seed: -1,
    flash: false,
    srt: false,
  });

  it('stream mode: the POST answers MP3 with X-Reecho-Response-Data', async () => {
    const res = await api('POST', '/api/tts/simple-generate', {
      ...base(),
      stream: true,
      direct_stream: true,
      emo_switch: [5, 0, 0, 2, 0],
      break_clone: true,
      infinite_mode: false,
      post_processing: 'chain',
      instruct_mode: false,
      reference_mode: 'balanced',
    });
    assert.equal(res.status, 200);
    assert.match(String(res.headers.get('content-type')), /^audio\/mpeg/);
    const meta = JSON.parse(String(res.headers.get('x-reecho-response-data'))) as { id: string };
    assert.match(meta.id, /^[A-Za-z0-9_-]+$/);
    assert.equal(res.headers.get('x-reecho-audio-id'), meta.id);
    const bytes = new Uint8Array(await res.arrayBuffer());
    assert.ok(bytes.length > 0 && isMp3(bytes));
  });

  it('http mode: downloads streamUrl (else audio) without credentials, redirects refused', async () => {
    const data = await envelope<{ id: string; audio: string; streamUrl?: string; credit_used: number }>(
      await api('POST', '/api/tts/simple-generate', { ...base(), stream: true, direct_stream: false }),
    );
    assert.ok(data.credit_used > 0);
    for (const url of [data.streamUrl ?? data.audio, data.audio]) {
      assertAudio(await download(url, { followRedirects: false, bearer: false }), url);
    }
  });

  it('async mode: contents with type text, polls with only Authorization, reads metadata.audio', async () => {
    const { id } = await envelope<{ id: string }>(
      await api('POST', '/api/tts/generate', {
        contents: [{ type: 'text', ...base(), language: 'en-us', text: 'Async from the SDK.' }],
        srt: false,
      }),
    );
    assert.match(id, /^[A-Za-z0-9_-]+$/);
    const task = await poll(id, { intervalMs: 200 });
    assert.equal(task.status, 'generated');
    assertAudio(
      await download(String(task.metadata.audio), { followRedirects: false, bearer: false }),
      'metadata.audio',
    );
  });

  it('async splitter mode: an inline splitter with a "__proto__" marker key is plain data', async () => {
    const splitter =
      `{"<Alice>":{"voiceId":"${voiceId}","speechRate":0.8},"__proto__":{"voiceId":"${voiceId}"},` +
      `"splitterMarks":["[]"],"fallbackConfig":{"voiceId":"${voiceId}"}}`;
    const res = await api(
      'POST',
      '/api/tts/generate',
      `{"text":"<Alice>Hello there. __proto__ Bye now.","splitter":${splitter},"srt":false}`,
    );
    const { id } = await envelope<{ id: string }>(res);
    assert.equal(({} as Record<string, unknown>).voiceId, undefined, 'no prototype pollution');
    assert.equal((await poll(id, { intervalMs: 200 })).status, 'generated');
  });
});

describe('RicterZ/Momoi (aiohttp, simple-generate)', () => {
  it('POST without following redirects, then GET audio without the key: 200 and audio/*', async () => {
    for (const stream of [false, true]) {
      const res = await fetch(`${t.baseUrl}/api/tts/simple-generate`, {
        method: 'POST',
        redirect: 'manual',
        headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          voiceId,
          text: 'A companion speaks.',
          language: 'auto',
          speechRate: 1.0,
          stream,
        }),
      });
      const data = await envelope<{ audio: string; streamUrl?: string }>(res);
      const url = stream ? String(data.streamUrl) : data.audio;
      assertAudio(await download(url, { followRedirects: true, bearer: false }), url);
    }
  });
});

describe('kayky233/AI-Vtuber (httpx: no redirects, raise_for_status)', () => {
  it('simple-generate with v2_balance and legacy Reecho fields; async with contents[i].audio', async () => {
    const data = await envelope<{ audio: string }>(
      await api('POST', '/api/tts/simple-generate', {
        voiceId,
        text: 'Live on stream.',
        promptId: 'default',
        preset: 'v2_balance',
        randomness: 100,
        stability_boost: 1024,
        sharpen: false,
        dictionary: [],
        seed: -1,
      }),
    );
    assertAudio(await download(data.audio, { followRedirects: false, bearer: false }), 'audio');

    const { id } = await envelope<{ id: string }>(
      await api('POST', '/api/tts/generate', {
        contents: [
          { voiceId, text: 'First line.', promptId: 'default', preset: 'v2_balance' },
          { voiceId, text: 'Second line.', promptId: 'default', preset: 'v2_balance' },
        ],
      }),
    );
    const task = await poll(id, { intervalMs: 200 });
    assert.equal(task.status, 'generated');
    for (const [i, content] of (task.metadata.contents ?? []).entries()) {
      assertAudio(
        await download(String(content.audio), { followRedirects: false, bearer: false }),
        `contents[${String(i)}].audio`,
      );
    }
    assert.equal(task.metadata.contents?.length, 2);
  });
});

describe('Cirnouo/STranslate.Plugin.Tts.Vocu (short language codes, account credit)', () => {
  it('short codes, an emo_switch array and seed -1 are accepted; status is the integer 200', async () => {
    // A translator speaks each target language: a voice whose engine speaks them (the default
    // English voice, Flite's, refuses French and Japanese with UNSUPPORTED_LANGUAGE).
    const translator = await createVoice(t.app, t.key, {
      name: 'Translator',
      engine: { engine: 'espeak', voice: 'en-us' },
    });
    for (const [language, text] of [
      ['en', 'Translated into English.'],
      ['fr', 'Traduit en français.'],
      ['ja', 'これは翻訳です。'],
    ] as const) {
      const data = await envelope<{ audio: string }>(
        await api('POST', '/api/tts/simple-generate', {
          voiceId: translator,
          text,
          language,
          emo_switch: [0, 3, 0, 0, 0],
          seed: -1,
        }),
      );
      assertAudio(await download(data.audio, { followRedirects: true, bearer: false }), language);
    }
  });

  it('reads user.credit and user.credits from account info', async () => {
    const res = await api('GET', '/api/account/info');
    const body = (await res.json()) as {
      status: number;
      user: { credit: number; credits: number; quota: Record<string, number> };
    };
    assert.equal(body.status, 200);
    assert.ok(Number.isInteger(body.user.credit) && body.user.credit >= 100);
    assert.ok(Number.isInteger(body.user.credits) && body.user.credits >= 100);
    assert.ok(Number.isInteger(body.user.quota.asyncBaseConcurrent));
  });
});

describe('Salieri-Amadeus/VocuTTS_Astrbot (aiohttp, allow_redirects=False, content-type allowlist)', () => {
  it('lists voices as JSON, then downloads without redirects: status 200, audio/mpeg', async () => {
    const voices = await envelope<{ id: string; name: string }[]>(await api('GET', '/api/voice'));
    assert.ok(voices.some((v) => v.id === voiceId && v.name === 'Compat narrator'));
    const data = await envelope<{ audio: string }>(
      await api('POST', '/api/tts/simple-generate', { voiceId, text: 'A bot replies.', promptId: 'default' }),
    );
    const d = await download(data.audio, { followRedirects: false, bearer: false });
    assertAudio(d, 'audio');
    assert.ok(d.bytes.length < 20 * 1024 * 1024);
  });
});

describe('linglinlinglin/astrbot-wusound-tts (unknown format field, no promptId)', () => {
  it('an unknown field is dropped, not refused', async () => {
    const data = await envelope<{ audio: string }>(
      await api('POST', '/api/tts/simple-generate', { voiceId, text: 'こんにちは、元気？', format: 'mp3' }),
    );
    assertAudio(await download(data.audio, { followRedirects: true, bearer: false }), 'audio');
  });
});

describe('AndersonBY/vector-vein (httpx, bearer sent on the download)', () => {
  it('stream: true gives a streamUrl that answers 200 audio with the bearer and no redirect', async () => {
    const data = await envelope<{ streamUrl?: string }>(
      await api('POST', '/api/tts/simple-generate', {
        voiceId,
        text: 'A workflow node speaks.',
        origin_audio: false,
        randomness: 95,
        flash: true,
        stream: true,
      }),
    );
    assertAudio(
      await download(String(data.streamUrl), { followRedirects: false, bearer: true }),
      'streamUrl',
    );
  });

  it('the one-shot streamUrl answers the same MP3 while the task generates and once it is stored', async () => {
    const res = await api('POST', '/api/tts/simple-generate', {
      voiceId,
      text: 'A longer line, so that the live stream is read while the task is still being generated here.',
      stream: true,
      direct_stream: true,
    });
    const info = JSON.parse(String(res.headers.get('x-reecho-response-data'))) as { streamUrl: string };
    // Read the URL while the direct answer is still streaming (the task may or may not be done by then).
    const live = await download(info.streamUrl, { followRedirects: false, bearer: true });
    await res.arrayBuffer();
    assertAudio(live, 'live streamUrl');
    const stored = await download(info.streamUrl, { followRedirects: false, bearer: false });
    assertAudio(stored, 'stored streamUrl');
    assert.deepEqual(live.bytes.length, stored.bytes.length);
  });
});

describe('fllesser/nonebot-plugin-vocu (bearer on every request, idForGenerate, voice objects)', () => {
  it('voices via /api/tts/voice?showMarket=true carry idForGenerate; tasks name their voices', async () => {
    const voices = await envelope<
      { id: string; idForGenerate: string | null; name: string; status: string }[]
    >(await api('GET', '/api/tts/voice?showMarket=true'));
    const mine = voices.find((v) => v.id === voiceId);
    assert.ok(mine !== undefined && 'idForGenerate' in mine && typeof mine.status === 'string');
    const generateId = mine.idForGenerate ?? mine.id;

    const sync = await envelope<{ audio: string }>(
      await api('POST', '/api/tts/simple-generate', {
        voiceId: generateId,
        text: 'A QQ bot says hi.',
        promptId: 'default',
        preset: 'v2_creative',
        flash: false,
        stream: false,
        srt: false,
        seed: -1,
      }),
    );
    const d = await download(sync.audio, { followRedirects: true, bearer: true });
    assertAudio(d, 'sync audio');
    assert.ok(Number.isInteger(Number(d.length)));

    const { id } = await envelope<{ id: string }>(
      await api('POST', '/api/tts/generate', {
        contents: [{ voiceId: generateId, text: 'An async bot line.', promptId: 'default' }],
        break_clone: true,
        sharpen: false,
        temperature: 1,
        top_k: 1024,
        top_p: 1,
        srt: false,
        seed: -1,
      }),
    );
    const task = await poll(id, { intervalMs: 300, query: '?stream=true' });
    assert.equal(task.status, 'generated');
    assert.equal(task.metadata.voices[0]?.name, 'Compat narrator');
    assertAudio(
      await download(String(task.metadata.contents?.[0]?.audio), { followRedirects: true, bearer: true }),
      'contents[0].audio',
    );

    const history = await envelope<TaskRecord[]>(
      await api('GET', '/api/tts/generate?offset=0&limit=20&stream=true'),
    );
    const listed = history.find((x) => x.id === id);
    assert.equal(listed?.metadata.voices[0]?.name, 'Compat narrator');
  });

  it('DELETE without a body or content type, and with a JSON content type and no body', async () => {
    for (const headers of [{}, { 'content-type': 'application/json' }] as Record<string, string>[]) {
      const doomed = await createVoice(t.app, t.key, { name: 'Doomed' });
      const res = await api('DELETE', `/api/tts/voice/${doomed}`, undefined, headers);
      // Their gate: JSON with status 200.
      assert.equal(res.status, 200);
      assert.equal(((await res.json()) as { status: number }).status, 200);
    }
  });
});

describe('OgalinLabM0/Kumiko-Amadeus (fetch: follows redirects, res.ok, ≥ 128 bytes)', () => {
  it('a made-up preset ("vivid") is dropped by simple-generate, not refused', async () => {
    const data = await envelope<{ audio: string }>(
      await api('POST', '/api/tts/simple-generate', {
        voiceId,
        text: 'A companion on the phone.',
        preset: 'vivid',
        seed: -1,
        speechRate: Math.min(2, Math.max(0.5, 1.25)),
      }),
    );
    const d = await download(data.audio, { followRedirects: true, bearer: false });
    assert.ok(d.status >= 200 && d.status < 300 && d.bytes.length >= 128);
  });
});

describe('presets', () => {
  it('GET /api/tts/presets lists keys with i18n names and a config', async () => {
    const presets = await envelope<{ key: string; i18n_name: unknown; config: { temperature: number } }[]>(
      await api('GET', '/api/tts/presets'),
    );
    assert.ok(presets.some((p) => p.key === 'v2_creative'));
    assert.ok(presets.every((p) => typeof p.config.temperature === 'number' && p.i18n_name !== undefined));
  });
});
