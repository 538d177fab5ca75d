// Voices cloned from a reference clip (the hosted API's `prompt`) on the real app, with the tests'
// own tiny ZipVoice model run by real sherpa-onnx: the model is listed as a reference-audio engine,
// a voice created with a WAV or MP3 clip and its transcript speaks a one-shot and a task as MP3,
// the clip really reaches the model (two clips of different pitch give different tones for the
// same text, each following its clip), and every wrong request is a clear 400.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readdirSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { encodePiece } from '../src/audio/continuous-encoder.js';
import { floatToPcm } from '../src/audio/pcm.js';
import { decodeToPcm, rmsDbfs } from './helpers/audio-check.js';
import { clipVoiceChecks, DECODE_RATE } from './helpers/clip-voice-checks.js';
import { bearer, createVoice, startTestApp, type TestApp } from './helpers/test-app.js';
import { makeTinyModel, makeTinyZipvoice, TINY_ZIPVOICE_AUDIO } from './helpers/tiny-models.js';

/** `seconds` of a tone of `hz` at `rate`, amplitude 0.3. */
function tone(hz: number, seconds: number, rate: number): Float32Array {
  return Float32Array.from(
    { length: Math.round(seconds * rate) },
    (_, i) => 0.3 * Math.sin((2 * Math.PI * hz * i) / rate),
  );
}

/** A WAV file of `samples`: 16-bit PCM, or 24-bit on two channels (both the same). */
function wavOf(samples: Float32Array, rate: number, kind: 'pcm16' | 'stereo24' = 'pcm16'): Buffer {
  const channels = kind === 'pcm16' ? 1 : 2;
  const width = kind === 'pcm16' ? 2 : 3;
  const data = Buffer.alloc(samples.length * channels * width);
  samples.forEach((s, i) => {
    for (let c = 0; c < channels; c++) {
      const at = (i * channels + c) * width;
      if (width === 2) data.writeInt16LE(Math.round(s * 32767), at);
      else data.writeIntLE(Math.round(s * 8_388_607), at, 3);
    }
  });
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVEfmt ', 8, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(channels, 22);
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * channels * width, 28);
  header.writeUInt16LE(channels * width, 32);
  header.writeUInt16LE(width * 8, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(data.length, 40);
  return Buffer.concat([header, data]);
}

const dataUrl = (bytes: Buffer, type: string) => `data:${type};base64,${bytes.toString('base64')}`;

describe('voices cloned from a reference clip (ZipVoice through sherpa-onnx)', () => {
  let t: TestApp;
  const modelsDir = mkdtempSync(join(tmpdir(), 'voicegen-reference-'));
  /** A 200 Hz clip (the model's lowest band) and a 1500 Hz one (its fourth band). */
  const lowClip = dataUrl(wavOf(tone(200, 1.5, 16_000), 16_000), 'audio/wav');
  const highClip = dataUrl(wavOf(tone(1500, 1.5, 48_000), 48_000, 'stereo24'), 'audio/x-wav');

  before(async () => {
    makeTinyZipvoice(modelsDir);
    unlinkSync(join(makeTinyZipvoice(modelsDir, 'zipvoice-no-lexicon'), 'lexicon.txt'));
    makeTinyModel(modelsDir, 'kokoro');
    t = await startTestApp({ listen: true, env: { MODELS_DIR: modelsDir, SYNTHESIS_THREADS: '1' } });
  });
  after(async () => {
    await t.close();
    rmSync(modelsDir, { recursive: true, force: true });
  });

  const { get, oneShot, assertSpoken, assertTone } = clipVoiceChecks(() => t, {
    samplesPerUnit: TINY_ZIPVOICE_AUDIO.samplesPerPhoneme,
    rate: TINY_ZIPVOICE_AUDIO.rate,
    slack: 1.5,
  });
  const post = (payload: object) =>
    t.app.http.inject({ method: 'POST', url: '/api/voice', headers: bearer(t.key), payload });

  it('lists the ZipVoice folder as a reference-audio engine without voices; a broken one with the reason', async () => {
    const engines =
      await get<{ id: string; available: boolean; reason?: string; description: string }[]>('/api/engines');
    const zipvoice = engines.find((e) => e.id === 'zipvoice');
    assert.equal(zipvoice?.available, true, zipvoice?.reason);
    assert.match(zipvoice?.description ?? '', /reference clip \(sherpa-onnx, ZipVoice, 24000 Hz\)/);
    assert.deepEqual(await get<unknown[]>('/api/engines/voices?engine=zipvoice'), []);
    const broken = engines.find((e) => e.id === 'zipvoice-no-lexicon');
    assert.equal(broken?.available, false);
    assert.equal(broken?.reason, 'a ZipVoice model needs its lexicon.txt');
  });

  it('speaks like its clip: two clips give two tones for the same text, in a one-shot and a task', async () => {
    const res = await post({ name: 'Low', prompt: lowClip, promptText: 'A low hum.' });
    assert.equal(res.statusCode, 200, res.body);
    const low = res.json<{ data: { id: string; engine: Record<string, unknown> } }>().data;
    assert.deepEqual(
      { ...low.engine, reference: undefined },
      { engine: 'neural', model: 'zipvoice', voice: 'reference', reference: undefined },
    );
    assert.match(
      (low.engine.reference as { clip: string }).clip,
      new RegExp(`^voices/${low.id}/reference-[0-9a-f-]{36}\\.wav$`),
    );
    assert.equal((low.engine.reference as { text: string }).text, 'A low hum.');
    // The model named in `engine` (without a voice: the clip is the voice).
    const high = await createVoice(t.app, t.key, {
      name: 'High',
      engine: { engine: 'neural', model: 'zipvoice' },
      prompt: highClip,
      promptText: 'A high whistle.',
    });

    const text = 'Hello there, how are you today?';
    const lowPcm = await assertSpoken(await oneShot(text, low.id), text);
    const highPcm = await assertSpoken(await oneShot(text, high), text);
    assertTone(lowPcm, TINY_ZIPVOICE_AUDIO.pitch(0));
    assertTone(highPcm, TINY_ZIPVOICE_AUDIO.pitch(3));
    // The same clip gives the same audio (the model's output does not depend on its starting
    // noise, but for the last bits of float rounding).
    const again = await decodeToPcm(await oneShot(text, high), DECODE_RATE);
    assert.equal(again.length, highPcm.length);
    const diff = again.map((v, i) => v - (highPcm[i] ?? 0));
    assert.ok(rmsDbfs(diff) < -60, `the same clip again differs by ${rmsDbfs(diff).toFixed(1)} dBFS`);
    // Two clips differ far more than that.
    const apart = lowPcm.subarray(0, highPcm.length).map((v, i) => v - (highPcm[i] ?? 0));
    assert.ok(rmsDbfs(apart) > -30, 'two clips, two different audios');

    const task = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/generate',
      headers: bearer(t.key),
      payload: { contents: [{ text: 'The bridge will be repaired before winter.', voiceId: high }] },
    });
    assert.equal(task.statusCode, 200, task.body);
    const id = task.json<{ data: { id: string } }>().data.id;
    const detail = await get<{ streamUrl: string }>(`/api/tts/generate/${id}?stream=true`);
    const stream = await fetch(new URL(detail.streamUrl, t.baseUrl));
    assert.equal(stream.status, 200);
    const taskPcm = await assertSpoken(
      Buffer.from(await stream.arrayBuffer()),
      'The bridge will be repaired before winter.',
    );
    assertTone(taskPcm, TINY_ZIPVOICE_AUDIO.pitch(3));
  });

  it('takes an MP3 clip', async () => {
    // The service's own MP3 of a 1500 Hz tone (its encoder takes 44.1 kHz PCM).
    const pcm = floatToPcm(tone(1500, 1.5, 44_100));
    const parts: Uint8Array[] = [];
    for await (const bytes of encodePiece(
      (async function* () {
        yield pcm;
      })(),
      t.app.services.encoders.open(),
    ))
      parts.push(bytes);
    const id = await createVoice(t.app, t.key, {
      name: 'From MP3',
      prompt: dataUrl(Buffer.concat(parts), 'audio/mpeg'),
      promptText: 'A whistle.',
    });
    const text = 'Good morning.';
    assertTone(await assertSpoken(await oneShot(text, id), text), TINY_ZIPVOICE_AUDIO.pitch(3));
  });

  it('refuses wrong clips and bindings with a clear 400', async () => {
    const shortClip = dataUrl(wavOf(tone(200, 0.2, 16_000), 16_000), 'audio/wav');
    const cases: [object, string, RegExp][] = [
      [{ name: 'x', prompt: lowClip }, 'VALIDATION_MISSING_FIELD', /^promptText is required with a `prompt`/],
      [{ name: 'x', promptText: 'Hi.' }, 'VALIDATION_INVALID_VALUE', /^promptText: .*none was given/],
      [
        { name: 'x', prompt: 'https://example.com/a.wav', promptText: 'Hi.' },
        'VALIDATION_INVALID_VALUE',
        /does not download URLs/,
      ],
      [
        { name: 'x', prompt: 'data:audio/wav;base64,not*base64', promptText: 'Hi.' },
        'VALIDATION_INVALID_VALUE',
        /^prompt: must be a data: URL/,
      ],
      [
        { name: 'x', prompt: dataUrl(Buffer.from('hello, not audio'), 'audio/wav'), promptText: 'Hi.' },
        'VALIDATION_INVALID_VALUE',
        /^prompt: the clip is neither WAV nor MP3 audio/,
      ],
      [
        { name: 'x', prompt: shortClip, promptText: 'Hi.' },
        'VALIDATION_INVALID_VALUE',
        /^prompt: the clip lasts 0\.20 s: a reference clip must last/,
      ],
      [
        { name: 'x', engine: { engine: 'espeak', voice: 'en-us' }, prompt: lowClip, promptText: 'Hi.' },
        'VALIDATION_INVALID_VALUE',
        /^engine\.engine: "espeak" takes no reference clip/,
      ],
      [
        { name: 'x', engine: { engine: 'neural', model: 'kokoro' }, prompt: lowClip, promptText: 'Hi.' },
        'VALIDATION_INVALID_VALUE',
        /^engine\.model: neural model "kokoro" \(Kokoro\) takes no reference clip/,
      ],
      [
        {
          name: 'x',
          engine: { engine: 'neural', model: 'zipvoice-no-lexicon' },
          prompt: lowClip,
          promptText: 'Hi.',
        },
        'VALIDATION_INVALID_VALUE',
        /unavailable \(a ZipVoice model needs its lexicon\.txt\)/,
      ],
      [
        { name: 'x', engine: { engine: 'neural', model: 'zipvoice', voice: 'reference' } },
        'VALIDATION_INVALID_VALUE',
        /^engine\.model: neural model "zipvoice" speaks like a reference clip: create the voice with a `prompt`/,
      ],
      [
        {
          name: 'x',
          engine: {
            engine: 'neural',
            model: 'kokoro',
            voice: 'tone_0',
            reference: {
              clip: 'voices/00000000-0000-0000-0000-000000000000/reference-00000000-0000-0000-0000-000000000000.wav',
              text: 'Hi.',
            },
          },
        },
        'VALIDATION_INVALID_VALUE',
        /^engine\.reference: a voice’s reference clip is given as `prompt`/,
      ],
    ];
    for (const [payload, code, message] of cases) {
      const res = await post(payload);
      assert.equal(res.statusCode, 400, `${JSON.stringify(payload).slice(0, 120)}: ${res.body}`);
      const body = res.json<{ status: number; code: string; message: string }>();
      assert.equal(body.code, code, res.body);
      assert.match(body.message, message);
      assert.equal(body.status, 400);
    }
  });

  it('ignores a clip without its transcript when the named engine takes none, as before cloning existed', async () => {
    const res = await post({ name: 'Plain', engine: { engine: 'espeak', voice: 'en-us' }, prompt: lowClip });
    assert.equal(res.statusCode, 200, res.body);
    assert.deepEqual(res.json<{ data: { engine: object } }>().data.engine, {
      engine: 'espeak',
      voice: 'en-us',
    });
  });

  it('deletes the clip with its voice', async () => {
    const res = await post({ name: 'Gone', prompt: lowClip, promptText: 'A low hum.' });
    assert.equal(res.statusCode, 200, res.body);
    const voice = res.json<{ data: { id: string; engine: { reference: { clip: string } } } }>().data;
    // The embedded blob store keeps a key as a file under DATA_DIR/blobs.
    const file = join(t.app.config.dataDir, 'blobs', voice.engine.reference.clip);
    assert.equal(existsSync(file), true, file);
    const del = await t.app.http.inject({
      method: 'DELETE',
      url: `/api/voice/${voice.id}`,
      headers: bearer(t.key),
    });
    assert.equal(del.statusCode, 200, del.body);
    assert.equal(existsSync(file), false);
  });
});

describe('reference clips count against the account’s upload limit', () => {
  let t: TestApp;
  const modelsDir = mkdtempSync(join(tmpdir(), 'voicegen-reference-quota-'));
  // 1.5 s at the model's 24 kHz, 16-bit mono: 72,044 bytes stored per voice.
  const clip = dataUrl(wavOf(tone(200, 1.5, 16_000), 16_000), 'audio/wav');
  const CLIP_BYTES = 1.5 * 24_000 * 2 + 44;

  before(async () => {
    makeTinyZipvoice(modelsDir);
    t = await startTestApp({
      env: {
        MODELS_DIR: modelsDir,
        SYNTHESIS_THREADS: '1',
        ACCOUNT_MAX_UPLOAD_BYTES: String(CLIP_BYTES + 1000),
      },
    });
  });
  after(async () => {
    await t.close();
    rmSync(modelsDir, { recursive: true, force: true });
  });

  const post = (payload: object) =>
    t.app.http.inject({ method: 'POST', url: '/api/voice', headers: bearer(t.key), payload });
  const usage = async () =>
    (await t.app.http.inject({ method: 'GET', url: '/api/account/info', headers: bearer(t.key) })).json<{
      data: { usage: { uploadBytes: number; voices: number } };
    }>().data.usage;
  const storedClips = () => {
    const dir = join(t.app.config.dataDir, 'blobs', 'voices');
    return existsSync(dir)
      ? readdirSync(dir, { recursive: true }).filter((f) => String(f).endsWith('.wav'))
      : [];
  };

  it('counts the stored clip, refuses one beyond the limit with nothing left behind, frees it on delete', async () => {
    const first = await post({ name: 'One', prompt: clip, promptText: 'A low hum.' });
    assert.equal(first.statusCode, 200, first.body);
    assert.deepEqual(await usage(), { ...(await usage()), uploadBytes: CLIP_BYTES, voices: 1 });

    const second = await post({ name: 'Two', prompt: clip, promptText: 'A low hum.' });
    assert.equal(second.statusCode, 403, second.body);
    assert.equal(second.json<{ code: string }>().code, 'BILLING_QUOTA_EXCEEDED');
    assert.match(second.json<{ message: string }>().message, /uploaded voice samples/);
    assert.equal(storedClips().length, 1, 'the refused voice’s clip is not kept');
    assert.equal((await usage()).voices, 1);

    const id = first.json<{ data: { id: string } }>().data.id;
    const del = await t.app.http.inject({
      method: 'DELETE',
      url: `/api/voice/${id}`,
      headers: bearer(t.key),
    });
    assert.equal(del.statusCode, 200, del.body);
    assert.equal((await usage()).uploadBytes, 0);
    const again = await post({ name: 'Two', prompt: clip, promptText: 'A low hum.' });
    assert.equal(again.statusCode, 200, again.body);
  });
});
