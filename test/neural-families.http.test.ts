// The Kokoro, Kitten and Matcha model layouts on the real app, with the tests' own tiny models of
// each family (real sherpa-onnx in worker threads, phonemizing with espeak-ng): each folder listed
// available with its speakers as voices, a one-shot and a task of each streamed as MP3 whose length
// follows the text and whose tone is the chosen speaker's, a multi-lingual Kokoro speaking Chinese
// through its lexicon, and broken folders of each family (no voices.bin, no vocoder, a voices.bin
// sherpa-onnx refuses) unavailable with the reason.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, truncateSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeToPcm, ffmpegErrors, probeAudio, rmsDbfs, toneHz } from './helpers/audio-check.js';
import { bearer, createVoice, startTestApp, type TestApp } from './helpers/test-app.js';
import { makeTinyModel, TINY_FAMILIES, TINY_MODEL_AUDIO, type TinyFamily } from './helpers/tiny-models.js';
import { makeTinyVits } from './helpers/tiny-vits.js';

interface Engine {
  id: string;
  provider: string;
  available: boolean;
  reason?: string;
  description: string;
}
interface Voice {
  id: string;
  engine: string;
  languages: string[];
  sampleRate?: number;
  binding: Record<string, unknown>;
}

const FAMILY_NAMES: Record<TinyFamily, string> = { kokoro: 'Kokoro', kitten: 'Kitten', matcha: 'Matcha' };
const DECODE_RATE = 44_100;

describe('neural voices of the Kokoro, Kitten and Matcha layouts (sherpa-onnx)', () => {
  let t: TestApp;
  const logLines: string[] = [];
  const modelsDir = mkdtempSync(join(tmpdir(), 'voicegen-families-'));

  before(async () => {
    for (const family of TINY_FAMILIES) makeTinyModel(modelsDir, family);
    unlinkSync(join(makeTinyModel(modelsDir, 'kokoro', 'kokoro-no-voices'), 'voices.bin'));
    unlinkSync(join(makeTinyModel(modelsDir, 'kitten', 'kitten-no-voices'), 'voices.bin'));
    unlinkSync(join(makeTinyModel(modelsDir, 'matcha', 'matcha-no-vocoder'), 'vocos-22khz-univ.onnx'));
    // Reads as a model here, but its styles are cut short: sherpa-onnx refuses it when it loads it.
    const cut = makeTinyModel(modelsDir, 'kokoro', 'kokoro-cut-voices');
    truncateSync(join(cut, 'voices.bin'), 1000);
    // The published single-speaker Matcha models take no speaker id.
    makeTinyModel(modelsDir, 'matcha', 'matcha-one', 1);
    // A multi-lingual Kokoro (version 2, as Kokoro v1.0's export): Chinese words from its lexicon.
    const multi = makeTinyModel(modelsDir, 'kokoro', 'kokoro-multi', 1, {
      version: '2',
      language: 'multi-lang, e.g., English, Chinese',
    });
    writeFileSync(join(multi, 'lexicon-us-en.txt'), 'hello h ə l ˈ o ʊ\n');
    writeFileSync(join(multi, 'lexicon-zh.txt'), '你 n i\n好 h a o\n们 m ə n\n');
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
  const oneShot = (text: string, voiceId: string) =>
    fetch(`${t.baseUrl}/api/tts/simple-generate.mp3?${new URLSearchParams({ text, voiceId }).toString()}`, {
      headers: bearer(t.key),
    });
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
  /**
   * Checks a clean MP3 as long as the family's tiny model makes `text` (a tone per phoneme token,
   * espeak-ng's phonemes being about one per letter) and returns its decoded PCM.
   */
  const assertSpoken = async (bytes: Buffer, family: TinyFamily, text: string): Promise<Int16Array> => {
    assert.equal(await ffmpegErrors(bytes), '');
    const info = await probeAudio(bytes);
    assert.deepEqual([info.codec, info.sampleRate, info.bitRate], ['mp3', 44100, 320000]);
    const { rate, samplesPerPhoneme } = TINY_MODEL_AUDIO[family];
    const expected = (text.length * samplesPerPhoneme) / rate;
    assert.ok(
      info.durationSeconds > 0.8 * expected && info.durationSeconds < 1.4 * expected + 0.3,
      `${family}: ${info.durationSeconds} s for ${text.length} characters, expected about ${expected.toFixed(2)} s`,
    );
    const pcm = await decodeToPcm(bytes, DECODE_RATE);
    assert.ok(rmsDbfs(pcm) > -35, 'a tone, not silence');
    return pcm;
  };
  const assertPitch = (pcm: Int16Array, family: TinyFamily, speaker: number) => {
    const want = TINY_MODEL_AUDIO[family].pitch(speaker);
    const got = toneHz(pcm);
    assert.ok(
      Math.abs(got - want) < want * 0.08,
      `${family} tone_${speaker}: ${got} Hz, expected ${want} Hz`,
    );
  };

  it('lists each family folder with its speakers as voices; broken ones unavailable with the reason', async () => {
    const engines = (await get<Engine[]>('/api/engines')).filter((e) => e.provider === 'neural');
    const byId = new Map(engines.map((e) => [e.id, e]));
    assert.deepEqual([...byId.keys()].sort(), [
      'kitten',
      'kitten-no-voices',
      'kokoro',
      'kokoro-cut-voices',
      'kokoro-multi',
      'kokoro-no-voices',
      'matcha',
      'matcha-no-vocoder',
      'matcha-one',
    ]);
    for (const family of TINY_FAMILIES) {
      const engine = byId.get(family);
      assert.equal(engine?.available, true, engine?.reason);
      assert.match(engine?.description ?? '', new RegExp(`sherpa-onnx, ${FAMILY_NAMES[family]}, `));
      const voices = await get<Voice[]>(`/api/engines/voices?engine=${family}`);
      assert.deepEqual(
        voices.map((v) => [v.id, v.languages, v.sampleRate, v.binding]),
        ['tone_0', 'tone_1'].map((id) => [
          id,
          ['en-us', 'en'],
          TINY_MODEL_AUDIO[family].rate,
          { engine: 'neural', model: family, voice: id },
        ]),
      );
    }
    const broken: [string, RegExp][] = [
      ['kokoro-no-voices', /^a Kokoro model needs voices\.bin/],
      ['kitten-no-voices', /^a Kitten model needs voices\.bin/],
      ['matcha-no-vocoder', /^a Matcha model needs its vocoder/],
    ];
    for (const [name, reason] of broken) {
      assert.equal(byId.get(name)?.available, false, name);
      assert.match(byId.get(name)?.reason ?? '', reason);
      const lines = logLines.filter((l) => l.includes(`neural model ${name} is unavailable`));
      assert.equal(lines.length, 1, `one log line for ${name}`);
      assert.equal((await get<Voice[]>(`/api/engines/voices?engine=${name}`)).length, 0);
      const res = await t.app.http.inject({
        method: 'POST',
        url: '/api/voice',
        headers: bearer(t.key),
        payload: { name: 'Nope', engine: { engine: 'neural', model: name, voice: 'tone_0' } },
      });
      assert.equal(res.statusCode, 400, res.body);
      assert.equal(res.json<{ code: string }>().code, 'VALIDATION_INVALID_VALUE');
    }
  });

  for (const family of TINY_FAMILIES) {
    it(`a ${FAMILY_NAMES[family]} voice speaks a one-shot and a task as MP3, as long as the text, in its own tone`, async () => {
      const first = await createVoice(t.app, t.key, {
        name: `${family} 0`,
        engine: { engine: 'neural', model: family, voice: 'tone_0' },
      });
      const second = await createVoice(t.app, t.key, {
        name: `${family} 1`,
        engine: { engine: 'neural', model: family, voice: 'tone_1' },
      });
      const short = 'Hello there, how are you today?';
      const res = await oneShot(short, first);
      assert.equal(res.status, 200);
      assert.equal(res.headers.get('content-type'), 'audio/mpeg');
      const shortPcm = await assertSpoken(Buffer.from(await res.arrayBuffer()), family, short);
      assertPitch(shortPcm, family, 0);

      const long =
        'The old bridge will be repaired before the winter comes back to the valley. Good news for everyone in town.';
      const taskPcm = await assertSpoken(
        await streamTask({ contents: [{ type: 'text', text: long, voiceId: second }] }),
        family,
        long,
      );
      assertPitch(taskPcm, family, 1);
      // Three times the text, about three times the audio.
      const ratio = taskPcm.length / shortPcm.length;
      const textRatio = long.length / short.length;
      assert.ok(
        ratio > textRatio * 0.75 && ratio < textRatio * 1.25,
        `${family}: audio ${ratio.toFixed(2)}× for text ${textRatio.toFixed(2)}×`,
      );
    });
  }

  it('a single-speaker Matcha (no speaker id input) speaks its one voice', async () => {
    const voices = await get<Voice[]>('/api/engines/voices?engine=matcha-one');
    assert.deepEqual(
      voices.map((v) => v.id),
      ['tone_0'],
    );
    const text = 'Good morning to all of you.';
    const res = await oneShot(
      text,
      await createVoice(t.app, t.key, { name: 'One', engine: voices[0]?.binding ?? {} }),
    );
    assert.equal(res.status, 200);
    assertPitch(await assertSpoken(Buffer.from(await res.arrayBuffer()), 'matcha', text), 'matcha', 0);
  });

  it('a multi-lingual Kokoro speaks Chinese from its lexicon', async () => {
    const [voice] = await get<Voice[]>('/api/engines/voices?engine=kokoro-multi');
    assert.deepEqual(voice?.languages, ['en-us', 'en', 'zh']);
    const voiceId = await createVoice(t.app, t.key, { name: 'Multi', engine: voice?.binding ?? {} });
    // 你好 and 你们好, twice: 2 × (5 + 8) phonemes of the lexicon, 512 samples each.
    const text = '你好，你们好。你好，你们好。';
    const res = await oneShot(text, voiceId);
    assert.equal(res.status, 200);
    const bytes = Buffer.from(await res.arrayBuffer());
    assert.equal(await ffmpegErrors(bytes), '');
    const expected = (26 * 512) / 24_000;
    const { durationSeconds } = await probeAudio(bytes);
    assert.ok(
      durationSeconds > expected * 0.9 && durationSeconds < expected * 1.3 + 0.3,
      `${durationSeconds} s, expected about ${expected.toFixed(2)} s`,
    );
  });

  it('a piece a model has nothing to say for (an emoji, a dash) is silence, the service stays up', async () => {
    // The tiny VITS model's character frontend has no token for these; Matcha has none for "…".
    makeTinyVits(modelsDir, 'vits', 1);
    const res = await t.app.http.inject({
      method: 'POST',
      url: '/admin/models/rescan',
      headers: bearer(t.app.adminToken ?? ''),
    });
    assert.equal(res.statusCode, 200, res.body);
    for (const [model, voice] of [
      ['vits', '0'],
      ['matcha', 'tone_0'],
      ['kokoro', 'tone_0'],
    ]) {
      const voiceId = await createVoice(t.app, t.key, {
        name: `Nothing ${model}`,
        engine: { engine: 'neural', model, voice },
      });
      for (const text of ['😀', '—']) {
        const spoken = await oneShot(text, voiceId);
        assert.equal(spoken.status, 200, `${model}: ${text}`);
        assert.equal(spoken.headers.get('content-type'), 'audio/mpeg');
        await spoken.arrayBuffer();
      }
      // Between sentences it says, such a piece is no audio: the answer is clean MP3 all the same.
      const mixed = await oneShot('Hello there. … 😀 Goodbye now.', voiceId);
      assert.equal(mixed.status, 200);
      const bytes = Buffer.from(await mixed.arrayBuffer());
      assert.equal(await ffmpegErrors(bytes), '');
      assert.ok((await probeAudio(bytes)).durationSeconds > 0.2, model);
    }
    const ok = await oneShot(
      'Still here.',
      await createVoice(t.app, t.key, {
        name: 'Still',
        engine: { engine: 'neural', model: 'vits', voice: '0' },
      }),
    );
    assert.equal(ok.status, 200);
    await ok.arrayBuffer();
  });

  it('a Kokoro folder whose voices.bin sherpa-onnx refuses fails its piece and becomes unavailable', async () => {
    const before = (await get<Engine[]>('/api/engines')).find((e) => e.id === 'kokoro-cut-voices');
    assert.equal(before?.available, true, 'it reads as a model until sherpa-onnx loads it');
    const voiceId = await createVoice(t.app, t.key, {
      name: 'Cut',
      engine: {
        engine: 'neural',
        model: 'kokoro-cut-voices',
        voice: 'tone_0',
      },
    });
    const res = await oneShot('Hello.', voiceId);
    assert.ok(res.status >= 400, `status ${res.status}`);
    assert.equal(((await res.json()) as { code: string }).code, 'TTS_GENERATE_FAILED');
    const after = (await get<Engine[]>('/api/engines')).find((e) => e.id === 'kokoro-cut-voices');
    assert.equal(after?.available, false);
    assert.match(after?.reason ?? '', /sherpa-onnx could not load it \(.*Corrupted --kokoro-voices/);
    // The other models still speak.
    const ok = await oneShot(
      'Still here.',
      await createVoice(t.app, t.key, {
        name: 'After',
        engine: { engine: 'neural', model: 'kokoro', voice: 'tone_1' },
      }),
    );
    assert.equal(ok.status, 200);
    await ok.arrayBuffer();
  });
});
