// Voices cloned from a reference clip with the tests' own tiny Pocket TTS model run by real
// sherpa-onnx, on the real app: the folder is a reference-audio engine, a partial folder is listed
// unavailable with the reason, a voice created with a clip speaks a one-shot and a task as clean
// MP3, and the clip really reaches the model (the tiny model speaks at its clip's pitch: two clips
// give two tones for the same text, the same clip the same audio).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { decodeToPcm, rmsDbfs } from './helpers/audio-check.js';
import { clipVoiceChecks, DECODE_RATE } from './helpers/clip-voice-checks.js';
import { bearer, createVoice, startTestApp, type TestApp } from './helpers/test-app.js';
import { makeTinyPocket, TINY_POCKET_AUDIO } from './helpers/tiny-models.js';

/** A 16-bit mono WAV data: URL of `seconds` of a tone of `hz` at `rate`, amplitude 0.3. */
function toneClip(hz: number, seconds: number, rate: number): string {
  const n = Math.round(seconds * rate);
  const data = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++)
    data.writeInt16LE(Math.round(0.3 * 32767 * Math.sin((2 * Math.PI * hz * i) / rate)), i * 2);
  const header = Buffer.alloc(44);
  header.write('RIFF', 0, 'ascii');
  header.writeUInt32LE(36 + data.length, 4);
  header.write('WAVEfmt ', 8, 'ascii');
  header.writeUInt32LE(16, 16);
  header.writeUInt16LE(1, 20);
  header.writeUInt16LE(1, 22);
  header.writeUInt32LE(rate, 24);
  header.writeUInt32LE(rate * 2, 28);
  header.writeUInt16LE(2, 32);
  header.writeUInt16LE(16, 34);
  header.write('data', 36, 'ascii');
  header.writeUInt32LE(data.length, 40);
  return `data:audio/wav;base64,${Buffer.concat([header, data]).toString('base64')}`;
}

describe('voices cloned from a reference clip (Pocket TTS through sherpa-onnx)', () => {
  let t: TestApp;
  const modelsDir = mkdtempSync(join(tmpdir(), 'voicegen-pocket-'));

  before(async () => {
    makeTinyPocket(modelsDir);
    unlinkSync(join(makeTinyPocket(modelsDir, 'pocket-no-flow'), 'lm_flow.onnx'));
    t = await startTestApp({ listen: true, env: { MODELS_DIR: modelsDir, SYNTHESIS_THREADS: '1' } });
  });
  after(async () => {
    await t.close();
    rmSync(modelsDir, { recursive: true, force: true });
  });

  const { get, oneShot, assertSpoken, assertTone } = clipVoiceChecks(() => t, {
    samplesPerUnit: TINY_POCKET_AUDIO.samplesPerFrame,
    rate: TINY_POCKET_AUDIO.rate,
    slack: 2,
  });

  it('lists the Pocket folder as a reference-audio engine; a partial one with the reason', async () => {
    const engines = await get<{ id: string; available: boolean; reason?: string }[]>('/api/engines');
    const pocket = engines.find((e) => e.id === 'pocket');
    assert.equal(pocket?.available, true, pocket?.reason);
    assert.deepEqual(await get<unknown[]>('/api/engines/voices?engine=pocket'), []);
    const partial = engines.find((e) => e.id === 'pocket-no-flow');
    assert.equal(partial?.available, false);
    assert.equal(partial?.reason, 'a Pocket TTS model needs lm_flow.onnx (or their int8 twins)');
  });

  it('speaks like its clip: two clips give two tones, the same clip the same audio', async () => {
    const low = await createVoice(t.app, t.key, {
      name: 'Low',
      engine: { engine: 'neural', model: 'pocket' },
      prompt: toneClip(300, 1.5, 16_000),
      promptText: 'A low hum.',
    });
    const high = await createVoice(t.app, t.key, {
      name: 'High',
      engine: { engine: 'neural', model: 'pocket' },
      prompt: toneClip(900, 1.5, 48_000),
      promptText: 'A high whistle.',
    });
    const text = 'Hello there, how are you today?';
    const lowPcm = await assertSpoken(await oneShot(text, low), text);
    const highPcm = await assertSpoken(await oneShot(text, high), text);
    assertTone(lowPcm, 300);
    assertTone(highPcm, 900);
    const again = await decodeToPcm(await oneShot(text, high), DECODE_RATE);
    assert.equal(again.length, highPcm.length);
    const diff = again.map((v, i) => v - (highPcm[i] ?? 0));
    assert.ok(rmsDbfs(diff) < -60, `the same clip again differs by ${rmsDbfs(diff).toFixed(1)} dBFS`);
    const apart = lowPcm.subarray(0, highPcm.length).map((v, i) => v - (highPcm[i] ?? 0));
    assert.ok(rmsDbfs(apart) > -30, 'two clips, two different audios');

    const sentence = 'The bridge will be repaired before winter.';
    const task = await t.app.http.inject({
      method: 'POST',
      url: '/api/tts/generate',
      headers: bearer(t.key),
      payload: { contents: [{ text: sentence, voiceId: high }] },
    });
    assert.equal(task.statusCode, 200, task.body);
    const id = task.json<{ data: { id: string } }>().data.id;
    const detail = await get<{ streamUrl: string }>(`/api/tts/generate/${id}?stream=true`);
    const stream = await fetch(new URL(detail.streamUrl, t.baseUrl));
    assert.equal(stream.status, 200);
    assertTone(await assertSpoken(Buffer.from(await stream.arrayBuffer()), sentence), 900);
  });

  it('clones from the clip alone, as the hosted API’s cloning request sends it (Pocket reads no transcript)', async () => {
    const res = await t.app.http.inject({
      method: 'POST',
      url: '/api/voice',
      headers: bearer(t.key),
      payload: { name: 'Cloned', language: 'auto', modelVersion: 'v3.0', prompt: toneClip(600, 1.5, 22_050) },
    });
    assert.equal(res.statusCode, 200, res.body);
    const voice = res.json<{ data: { id: string; engine: { model?: string } } }>().data;
    assert.equal(voice.engine.model, 'pocket');
    const text = 'Good morning.';
    assertTone(await assertSpoken(await oneShot(text, voice.id), text), 600);
  });
});
