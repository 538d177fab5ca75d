// The voice catalogue API (our extension) on the real app: engines with their availability, every
// engine voice with its fields, filters by language and engine, the spec's error body for bad ones.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { decodeToPcm, ffmpegErrors, probeAudio, rmsDbfs } from './helpers/audio-check.js';
import { runCli } from './helpers/cli.js';
import { bearer, createVoice, startTestApp, type TestApp } from './helpers/test-app.js';

interface Answer<T> {
  status: number;
  code?: string;
  message?: string;
  data: T;
}
interface Engine {
  id: string;
  provider: string;
  available: boolean;
  reason?: string;
  options: { field: string; values?: { id: string }[] }[];
}
interface Voice {
  id: string;
  name: string;
  engine: string;
  languages: string[];
  gender?: string;
  sampleRate?: number;
  quality: string;
  binding: Record<string, unknown>;
}

describe('voice catalogue API', () => {
  let t: TestApp;
  const REMOTES = {
    studio: {
      baseUrl: 'http://127.0.0.1:9/secret-path',
      apiKey: 'sk-upstream-secret',
      voices: [{ id: 'nova', name: 'Nova', languages: ['en-us'], gender: 'female' }],
    },
    // An endpoint named like the built-in engine cannot take its name.
    espeak: { baseUrl: 'http://127.0.0.1:9' },
  };
  before(async () => {
    t = await startTestApp({ listen: true, env: { REMOTE_ENGINES: JSON.stringify(REMOTES) } });
  });
  after(async () => t.close());

  /** A GET with the account's key, or with `headers` (none: no credential). */
  const get = async <T>(url: string, headers: Record<string, string> = bearer(t.key)) => {
    const res = await t.app.http.inject({ method: 'GET', url, headers });
    return { statusCode: res.statusCode, body: res.json<Answer<T>>(), raw: res.body };
  };

  it('lists engines with availability; remote endpoints by name, never their URL', async () => {
    const { statusCode, body, raw } = await get<Engine[]>('/api/engines');
    assert.equal(statusCode, 200);
    const byId = body.data.map((e) => [e.id, e.provider, e.available] as const);
    assert.deepEqual(byId, [
      ['flite', 'flite', true],
      ['espeak', 'espeak', true],
      ['studio', 'remote', true],
      ['espeak', 'remote', false],
    ]);
    assert.match(body.data[3]?.reason ?? '', /taken by another engine/);
    assert.ok(!raw.includes('127.0.0.1') && !raw.includes('secret'), 'no URL or key');
    const variants = body.data[1]?.options.find((o) => o.field === 'variant')?.values?.map((v) => v.id);
    assert.ok(variants?.includes('Mr serious') && variants.length > 100, 'every espeak-ng variant');
  });

  it('lists every voice with its fields, filtered by engine and language', async () => {
    const all = (await get<Voice[]>('/api/engines/voices')).body.data;
    assert.ok(all.filter((v) => v.engine === 'espeak').length > 100);
    assert.deepEqual(
      all.find((v) => v.engine === 'studio'),
      {
        id: 'nova',
        name: 'Nova',
        engine: 'studio',
        languages: ['en-us'],
        gender: 'female',
        quality: all.find((v) => v.engine === 'studio')?.quality,
        binding: { engine: 'remote', endpoint: 'studio', voice: 'nova' },
      },
    );
    const espeak = all.find((v) => v.id === 'gmw/en-US');
    assert.equal(espeak?.sampleRate, 22050);
    assert.deepEqual(espeak?.binding, { engine: 'espeak', voice: 'gmw/en-US' });

    const german = (await get<Voice[]>('/api/engines/voices?language=de&engine=espeak')).body.data;
    assert.ok(german.length > 0 && german.every((v) => v.engine === 'espeak'));
    assert.ok(german.every((v) => v.languages.some((l) => l.startsWith('de'))));
    const english = (await get<Voice[]>('/api/engines/voices?language=en-US')).body.data;
    assert.ok(english[0]?.languages.includes('en-us'), 'the exact language first');
    assert.equal(english.find((v) => v.engine === 'espeak')?.id, 'gmw/en-US', 'the exact language first');
    assert.ok(english.some((v) => v.id === 'nova'));
    const remote = (await get<Voice[]>('/api/engines/voices?engine=remote')).body.data;
    assert.deepEqual(
      remote.map((v) => v.id),
      ['nova'],
    );
  });

  it('answers bad filters with the error body; a catalogue voice creates a voice', async () => {
    for (const url of [
      '/api/engines/voices?engine=nowhere',
      '/api/engines/voices?language=not%20a%20language',
    ]) {
      const { statusCode, body } = await get<unknown>(url);
      assert.equal(statusCode, 400, url);
      assert.equal(body.code, 'VALIDATION_INVALID_VALUE');
      assert.equal(body.status, 400);
      assert.ok((body.message ?? '').length > 0);
    }
    assert.equal((await get<unknown>('/api/engines', {})).statusCode, 401);
    const created = await t.app.http.inject({
      method: 'POST',
      url: '/api/voice',
      headers: bearer(t.key),
      payload: { name: 'Serious', engine: { engine: 'espeak', voice: 'gmw/en-US', variant: 'Mr serious' } },
    });
    assert.equal(created.statusCode, 200, created.body);
    const refused = await t.app.http.inject({
      method: 'POST',
      url: '/api/voice',
      headers: bearer(t.key),
      payload: { name: 'Nope', engine: { engine: 'espeak', voice: 'gmw/en-US', variant: 'Mr nobody' } },
    });
    assert.equal(refused.statusCode, 400);
    assert.equal(refused.json<{ code: string }>().code, 'VALIDATION_INVALID_VALUE');
  });

  /** Creates a task of `contents` and reads its full-task stream (live while it is generated). */
  const streamTask = async (contents: object[]): Promise<Buffer> => {
    const res = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/generate',
      headers: bearer(t.key),
      payload: { contents },
    });
    assert.equal(res.statusCode, 200, res.body);
    const id = res.json<{ data: { id: string } }>().data.id;
    const task = await get<{ streamUrl: string }>(`/api/tts/generate/${id}?stream=true`);
    const stream = await fetch(new URL(task.body.data.streamUrl, t.baseUrl));
    assert.equal(stream.status, 200);
    return Buffer.from(await stream.arrayBuffer());
  };

  /** One clean MP3 (ffmpeg decodes it without a complaint) of the pipeline's format, with speech. */
  const assertCleanMp3 = async (bytes: Buffer, minSeconds: number): Promise<void> => {
    assert.equal(await ffmpegErrors(bytes), '');
    const info = await probeAudio(bytes);
    assert.deepEqual([info.codec, info.sampleRate, info.bitRate], ['mp3', 44100, 320000]);
    assert.ok(info.durationSeconds > minSeconds, `${info.durationSeconds} s`);
    assert.ok(rmsDbfs(await decodeToPcm(bytes)) > -35, 'speech, not silence');
  };

  it('a Flite voice is created from the catalogue, and a task with it streams clean MP3', async () => {
    const flite = (await get<Voice[]>('/api/engines/voices?engine=flite')).body.data;
    assert.deepEqual(flite.map((v) => v.id).sort(), ['awb', 'kal', 'kal16', 'rms', 'slt']);
    const slt = flite.find((v) => v.id === 'slt');
    assert.deepEqual(slt?.binding, { engine: 'flite', voice: 'slt' });
    assert.deepEqual([slt?.gender, slt?.sampleRate, slt?.languages[0]], ['female', 16000, 'en-us']);
    const voiceId = await createVoice(t.app, t.key, {
      name: 'Susan',
      engine: { engine: 'flite', voice: 'slt' },
    });
    const refused = await t.app.http.inject({
      method: 'POST',
      url: '/api/voice',
      headers: bearer(t.key),
      payload: { name: 'Nope', engine: { engine: 'flite', voice: 'awb_time' } },
    });
    assert.equal(refused.statusCode, 400);
    assert.equal(refused.json<{ code: string }>().code, 'VALIDATION_INVALID_VALUE');
    const bytes = await streamTask([
      {
        type: 'text',
        text: 'The old bridge, after weeks of delays, will be repaired before the winter. Good news.',
        voiceId,
      },
    ]);
    await assertCleanMp3(bytes, 3);
  });

  it('a dialogue of an espeak and a Flite voice streams as one continuous clean MP3', async () => {
    const espeak = await createVoice(t.app, t.key, {
      name: 'Eve',
      engine: { engine: 'espeak', voice: 'en-us' },
    });
    const flite = await createVoice(t.app, t.key, {
      name: 'Ralph',
      engine: { engine: 'flite', voice: 'rms' },
    });
    const bytes = await streamTask([
      { type: 'text', text: 'Hello Ralph, how was the trip?', voiceId: espeak, interval: 0.3 },
      { type: 'text', text: 'Long, but the mountains were beautiful.', voiceId: flite, interval: 0.3 },
      { type: 'text', text: 'I am glad to hear it.', voiceId: espeak },
    ]);
    await assertCleanMp3(bytes, 4);
  });

  it('the CLI lists the catalogue through the server, or of this machine without a key', async () => {
    const remote = await runCli({}, [
      '--url',
      t.baseUrl,
      'engines',
      '--voices',
      '--engine',
      'studio',
      '--key',
      t.key,
      '--json',
    ]);
    assert.equal(remote.code, 0, remote.stderr);
    assert.deepEqual(
      (JSON.parse(remote.stdout) as Voice[]).map((v) => `${v.engine}:${v.id}`),
      ['studio:nova'],
    );
    const local = await runCli({ REMOTE_ENGINES: JSON.stringify(REMOTES) }, ['engines']);
    assert.equal(local.code, 0, local.stderr);
    assert.match(local.stdout, /^espeak\tespeak\tavailable\t/m);
    assert.match(local.stdout, /^studio\tremote\tavailable\t/m);
    const german = await runCli({}, ['engines', '--voices', '--language', 'de']);
    assert.match(german.stdout, /^espeak:gmw\/de\tGerman\tde\t/m);
    const bad = await runCli({}, [
      '--url',
      t.baseUrl,
      'engines',
      '--voices',
      '--engine',
      'nope',
      '--key',
      t.key,
    ]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /unknown engine "nope"/);
  });
});
