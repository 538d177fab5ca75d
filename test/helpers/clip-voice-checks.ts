/**
 * Checks shared by the suites of reference-audio voices (ZipVoice, Pocket TTS) on the real app:
 * reading the API, a one-shot's MP3, and what the tests' tiny models make of a text — a tone per
 * token at the clip's pitch, so its length and its pitch are known.
 */
import assert from 'node:assert/strict';
import { decodeToPcm, ffmpegErrors, probeAudio, rmsDbfs, toneHz } from './audio-check.js';
import { bearer, type TestApp } from './test-app.js';

/** The rate MP3s are decoded at for the comparisons. */
export const DECODE_RATE = 44_100;

/** How long a tiny model speaks: `samplesPerUnit` at `rate` per character; `slack` bounds it above. */
export interface TinyModelTiming {
  samplesPerUnit: number;
  rate: number;
  slack: number;
}

/** The checks against the app `app()` returns (set in a `before`). */
export function clipVoiceChecks(app: () => TestApp, timing: TinyModelTiming) {
  const get = async <T>(url: string): Promise<T> => {
    const t = app();
    const res = await t.app.http.inject({ method: 'GET', url, headers: bearer(t.key) });
    assert.equal(res.statusCode, 200, res.body);
    return res.json<{ data: T }>().data;
  };
  const oneShot = async (text: string, voiceId: string): Promise<Buffer> => {
    const t = app();
    const res = await fetch(
      `${t.baseUrl}/api/tts/simple-generate.mp3?${new URLSearchParams({ text, voiceId }).toString()}`,
      { headers: bearer(t.key) },
    );
    assert.equal(res.status, 200, await res.clone().text());
    assert.equal(res.headers.get('content-type'), 'audio/mpeg');
    return Buffer.from(await res.arrayBuffer());
  };
  /** A clean MP3 about as long as the tiny model makes `text`, not silence; its PCM. */
  const assertSpoken = async (bytes: Buffer, text: string): Promise<Int16Array> => {
    assert.equal(await ffmpegErrors(bytes), '');
    const info = await probeAudio(bytes);
    assert.deepEqual([info.codec, info.sampleRate], ['mp3', 44100]);
    const expected = (text.length * timing.samplesPerUnit) / timing.rate;
    assert.ok(
      info.durationSeconds > 0.5 * expected && info.durationSeconds < timing.slack * expected + 0.3,
      `${info.durationSeconds} s for ${text.length} characters, expected about ${expected.toFixed(2)} s`,
    );
    const pcm = await decodeToPcm(bytes, DECODE_RATE);
    assert.ok(rmsDbfs(pcm) > -35, 'a tone, not silence');
    return pcm;
  };
  const assertTone = (pcm: Int16Array, want: number) => {
    const got = toneHz(pcm);
    assert.ok(Math.abs(got - want) < want * 0.08, `${got} Hz, expected ${want} Hz`);
  };
  return { get, oneShot, assertSpoken, assertTone };
}
