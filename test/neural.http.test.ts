// Neural voices on the real app with the tests' own tiny VITS model (real sherpa-onnx, in worker
// threads): the model folders of MODELS_DIR in the catalogue (broken ones unavailable with the
// reason, never fatal), a voice bound to the model streamed as MP3 in a task, in a one-shot and in
// a splitter dialogue beside espeak-ng, a model sherpa-onnx cannot load failing its piece and
// leaving the service up, models added and removed through the admin API and the CLI, and a folder
// added while it runs appearing after a rescan.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { readFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ffmpegErrors, probeAudio, decodeToPcm, rmsDbfs } from './helpers/audio-check.js';
import { runCli } from './helpers/cli.js';
import { bearer, createVoice, startTestApp, type TestApp } from './helpers/test-app.js';
import { makeTinyVits, TINY_VITS_RATE, TINY_VITS_SAMPLES_PER_TOKEN } from './helpers/tiny-vits.js';

interface Engine {
  id: string;
  provider: string;
  available: boolean;
  reason?: string;
}
interface Voice {
  id: string;
  engine: string;
  languages: string[];
  sampleRate?: number;
  binding: Record<string, unknown>;
}

describe('neural voices (sherpa-onnx)', () => {
  let t: TestApp;
  const logLines: string[] = [];
  const modelsDir = mkdtempSync(join(tmpdir(), 'voicegen-models-'));

  before(async () => {
    const tiny = makeTinyVits(modelsDir, 'tiny', 2);
    // Truncated model file: not an ONNX model.
    mkdirSync(join(modelsDir, 'truncated'));
    const whole = await readFile(join(tiny, 'model.onnx'));
    writeFileSync(join(modelsDir, 'truncated', 'model.onnx'), whole.subarray(0, whole.length >> 1));
    copyFileSync(join(tiny, 'tokens.txt'), join(modelsDir, 'truncated', 'tokens.txt'));
    // Partial: a tokens file and nothing else.
    mkdirSync(join(modelsDir, 'partial'));
    copyFileSync(join(tiny, 'tokens.txt'), join(modelsDir, 'partial', 'tokens.txt'));
    // Reads as a model here, but sherpa-onnx refuses its tokens (a symbol twice) and ends its process.
    mkdirSync(join(modelsDir, 'dup-tokens'));
    copyFileSync(join(tiny, 'model.onnx'), join(modelsDir, 'dup-tokens', 'model.onnx'));
    writeFileSync(join(modelsDir, 'dup-tokens', 'tokens.txt'), 'a 1\nb 2\na 3\n');
    t = await startTestApp({
      listen: true,
      env: { MODELS_DIR: modelsDir, LOG_LEVEL: 'info', SYNTHESIS_THREADS: '1' },
      logger: { stream: { write: (line: string) => void logLines.push(line) } },
    });
  });
  after(async () => {
    await t.close();
    rmSync(modelsDir, { recursive: true, force: true });
  });

  const get = async <T>(url: string): Promise<T> => {
    const res = await t.app.http.inject({ method: 'GET', url, headers: bearer(t.key) });
    assert.equal(res.statusCode, 200, res.body);
    return res.json<{ data: T }>().data;
  };
  /** Creates a task and reads its full-task stream. */
  const streamTask = async (payload: object): Promise<Buffer> => {
    const res = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/generate',
      headers: bearer(t.key),
      payload,
    });
    assert.equal(res.statusCode, 200, res.body);
    const id = res.json<{ data: { id: string } }>().data.id;
    const task = await get<{ streamUrl: string }>(`/api/tts/generate/${id}?stream=true`);
    const stream = await fetch(new URL(task.streamUrl, t.baseUrl));
    assert.equal(stream.status, 200);
    return Buffer.from(await stream.arrayBuffer());
  };
  const assertCleanMp3 = async (bytes: Buffer, minSeconds: number, maxSeconds: number) => {
    assert.equal(await ffmpegErrors(bytes), '');
    const info = await probeAudio(bytes);
    assert.deepEqual([info.codec, info.sampleRate, info.bitRate], ['mp3', 44100, 320000]);
    assert.ok(
      info.durationSeconds > minSeconds && info.durationSeconds < maxSeconds,
      `${info.durationSeconds} s, expected ${minSeconds}–${maxSeconds} s`,
    );
    assert.ok(rmsDbfs(await decodeToPcm(bytes)) > -35, 'a tone, not silence');
  };
  /** Seconds of the tiny model's audio for `text` (a tone per character) at speechRate 1. */
  const toneSeconds = (text: string) => (text.length * TINY_VITS_SAMPLES_PER_TOKEN) / TINY_VITS_RATE;

  it('lists each model folder as an engine; broken ones unavailable with the reason, logged at start', async () => {
    const engines = (await get<Engine[]>('/api/engines')).filter((e) => e.provider === 'neural');
    const byId = new Map(engines.map((e) => [e.id, e]));
    assert.deepEqual([...byId.keys()].sort(), ['dup-tokens', 'partial', 'tiny', 'truncated']);
    assert.equal(byId.get('tiny')?.available, true);
    assert.equal(byId.get('partial')?.available, false);
    assert.match(byId.get('partial')?.reason ?? '', /no \.onnx model file/);
    assert.equal(byId.get('truncated')?.available, false);
    assert.match(byId.get('truncated')?.reason ?? '', /truncated or not an ONNX model/);
    for (const name of ['partial', 'truncated']) {
      const lines = logLines.filter((l) => l.includes(`neural model ${name} is unavailable`));
      assert.equal(lines.length, 1, `one log line for ${name}`);
    }
    const voices = await get<Voice[]>('/api/engines/voices?engine=tiny');
    assert.deepEqual(
      voices.map((v) => [v.id, v.languages, v.sampleRate, v.binding]),
      [
        ['0', ['en'], 16000, { engine: 'neural', model: 'tiny', voice: '0' }],
        ['1', ['en'], 16000, { engine: 'neural', model: 'tiny', voice: '1' }],
      ],
    );
    const english = await get<Voice[]>('/api/engines/voices?engine=neural&language=en');
    // dup-tokens reads as a model until sherpa-onnx first loads it (the last test).
    assert.deepEqual(
      english.map((v) => `${v.engine}:${v.id}`),
      ['dup-tokens:0', 'dup-tokens:1', 'tiny:0', 'tiny:1'],
    );
    for (const engine of [
      { engine: 'neural', model: 'tiny', voice: '9' },
      { engine: 'neural', model: 'partial', voice: '0' },
      { engine: 'neural', model: 'nosuch', voice: '0' },
    ]) {
      const res = await t.app.http.inject({
        method: 'POST',
        url: '/api/voice',
        headers: bearer(t.key),
        payload: { name: 'Nope', engine },
      });
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(res.json<{ code: string }>().code, 'VALIDATION_INVALID_VALUE');
    }
  });

  it('a voice of the model streams as clean MP3 in a task, as long as its text says', async () => {
    const voiceId = await createVoice(t.app, t.key, {
      name: 'Tiny',
      engine: { engine: 'neural', model: 'tiny', voice: '1' },
    });
    const text = 'The old bridge will be repaired before the winter. Good news for everyone in town.';
    const bytes = await streamTask({ contents: [{ type: 'text', text, voiceId }] });
    const seconds = toneSeconds(text);
    await assertCleanMp3(bytes, seconds - 0.1, seconds + 0.6);
  });

  it('a one-shot with the voice answers MP3', async () => {
    const voiceId = await createVoice(t.app, t.key, {
      name: 'Tiny one-shot',
      engine: { engine: 'neural', model: 'tiny', voice: '0' },
    });
    const text = 'Hello there, how are you today?';
    const res = await fetch(
      `${t.baseUrl}/api/tts/simple-generate.mp3?${new URLSearchParams({ text, voiceId }).toString()}`,
      { headers: bearer(t.key) },
    );
    assert.equal(res.status, 200);
    assert.equal(res.headers.get('content-type'), 'audio/mpeg');
    const seconds = toneSeconds(text);
    await assertCleanMp3(Buffer.from(await res.arrayBuffer()), seconds - 0.1, seconds + 0.6);
  });

  it('a splitter dialogue of the neural voice and an espeak-ng voice is one clean MP3', async () => {
    const neural = await createVoice(t.app, t.key, {
      name: 'Tiny B',
      engine: { engine: 'neural', model: 'tiny', voice: '1' },
    });
    const espeak = await createVoice(t.app, t.key, {
      name: 'Eve',
      engine: { engine: 'espeak', voice: 'en-us' },
    });
    const bytes = await streamTask({
      text: '<A>Hello Ralph, how was the trip?<B>Long, but the mountains were beautiful.<A>I am glad.',
      splitter: { '<A>': { voiceId: espeak, interval: 0.2 }, '<B>': { voiceId: neural, interval: 0.2 } },
    });
    await assertCleanMp3(bytes, toneSeconds('Long, but the mountains were beautiful.') + 1, 30);
  });

  it('a model sherpa-onnx cannot load fails its piece, becomes unavailable, and the service stays up', async () => {
    const before = (await get<Engine[]>('/api/engines')).find((e) => e.id === 'dup-tokens');
    assert.equal(before?.available, true, 'it reads as a model until sherpa-onnx loads it');
    const voiceId = await createVoice(t.app, t.key, {
      name: 'Dup',
      engine: { engine: 'neural', model: 'dup-tokens', voice: '0' },
    });
    const res = await fetch(
      `${t.baseUrl}/api/tts/simple-generate.mp3?${new URLSearchParams({ text: 'Hello.', voiceId }).toString()}`,
      { headers: bearer(t.key) },
    );
    assert.ok(res.status >= 400, `status ${res.status}`);
    const body = (await res.json()) as { code: string; status: number };
    assert.equal(body.code, 'TTS_GENERATE_FAILED');
    const after = (await get<Engine[]>('/api/engines')).find((e) => e.id === 'dup-tokens');
    assert.equal(after?.available, false);
    assert.match(after?.reason ?? '', /sherpa-onnx could not load it/);
    // Still serving, the other model included.
    const tiny = await createVoice(t.app, t.key, {
      name: 'Tiny after',
      engine: { engine: 'neural', model: 'tiny', voice: '0' },
    });
    const ok = await fetch(
      `${t.baseUrl}/api/tts/simple-generate.mp3?${new URLSearchParams({ text: 'Still here.', voiceId: tiny }).toString()}`,
      { headers: bearer(t.key) },
    );
    assert.equal(ok.status, 200);
    await ok.arrayBuffer();
  });

  it('models add/list/remove through the admin API and the CLI put models in and out of the catalogue', async () => {
    // The archive sherpa-onnx would publish: one folder holding the model, bzip2-compressed.
    const scratch = mkdtempSync(join(tmpdir(), 'voicegen-archive-'));
    const archive = join(scratch, 'vits-added.tar.bz2');
    const src = makeTinyVits(scratch, 'vits-added', 1);
    execFileSync('/usr/bin/python3', [
      '-c',
      'import sys, tarfile\nwith tarfile.open(sys.argv[1], "w:bz2") as t: t.add(sys.argv[2], arcname="vits-added")',
      archive,
      src,
    ]);
    const bytes = readFileSync(archive);
    const files = createServer((_req, res) => res.writeHead(200).end(bytes));
    await new Promise<void>((resolve) => files.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(files.address() as AddressInfo).port}/vits-added.tar.bz2`;
    const admin = bearer(t.app.adminToken ?? '');
    try {
      const wrong = await t.app.http.inject({
        method: 'POST',
        url: '/admin/models',
        headers: admin,
        payload: { source: url, sha256: 'f'.repeat(64) },
      });
      assert.equal(wrong.statusCode, 400, wrong.body);
      assert.equal(wrong.json<{ code: string }>().code, 'VALIDATION_INVALID_VALUE');
      const sha256 = createHash('sha256').update(bytes).digest('hex');
      const added = await t.app.http.inject({
        method: 'POST',
        url: '/admin/models',
        headers: admin,
        payload: { source: url, sha256 },
      });
      assert.equal(added.statusCode, 200, added.body);
      assert.deepEqual(added.json<{ data: { name: string; speakers: string[] } }>().data.speakers, ['0']);
      // In the catalogue at once, without a rescan of its own.
      assert.equal((await get<Engine[]>('/api/engines')).find((e) => e.id === 'vits-added')?.available, true);
      const cli = ['--url', t.baseUrl, '--admin-token', t.app.adminToken ?? ''];
      const listed = await runCli({}, [...cli, 'models', 'list']);
      assert.equal(listed.code, 0, listed.stderr);
      assert.match(listed.stdout, /^vits-added\tavailable\tvits\t16000 Hz\tvoices: 0$/m);
      assert.match(listed.stdout, /^partial\tunavailable: no \.onnx model file$/m);
      const removed = await runCli({}, [...cli, 'models', 'remove', 'vits-added']);
      assert.equal(removed.code, 0, removed.stderr);
      assert.equal(
        (await get<Engine[]>('/api/engines')).some((e) => e.id === 'vits-added'),
        false,
      );
      const again = await runCli({}, [...cli, 'models', 'add', archive, '--name', 'from_file']);
      assert.equal(again.code, 0, again.stderr);
      assert.match(again.stdout, /model from_file added/);
      const missing = await runCli({}, [...cli, 'models', 'remove', 'nosuch']);
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /model "nosuch" not found/);
    } finally {
      await new Promise<void>((resolve) => files.close(() => resolve()));
      rmSync(scratch, { recursive: true, force: true });
    }
  });

  it('a folder added while the service runs appears after the admin rescan', async () => {
    makeTinyVits(modelsDir, 'later', 1);
    assert.equal(
      (await get<Engine[]>('/api/engines')).some((e) => e.id === 'later'),
      false,
      'not before a rescan',
    );
    const adminToken = t.app.adminToken ?? '';
    const res = await t.app.http.inject({
      method: 'POST',
      url: '/admin/models/rescan',
      headers: bearer(adminToken),
    });
    assert.equal(res.statusCode, 200, res.body);
    const listed = res.json<{ data: Engine[] }>().data;
    assert.equal(listed.find((e) => e.id === 'later')?.available, true);
    assert.ok(listed.every((e) => e.provider === 'neural'));
    const voices = await get<Voice[]>('/api/engines/voices?engine=later');
    assert.deepEqual(
      voices.map((v) => v.id),
      ['0'],
    );
    const tenant = await t.app.http.inject({
      method: 'POST',
      url: '/admin/models/rescan',
      headers: bearer(t.key),
    });
    assert.equal(tenant.statusCode, 401);
  });
});
