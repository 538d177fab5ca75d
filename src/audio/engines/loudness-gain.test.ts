// Loudness matching across engines, measured as a listener gets it: each voice speaks more than
// 10 s of text (not the calibration text), encoded by the service's MP3 encoder, measured by
// ffmpeg's ebur128 filter. Every voice lands within ±1 LU of −16 LUFS and of every other, with
// its true peak at most −1 dBTP; matching keeps every sample and timing mark in place.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { ebur128 } from '../../../test/helpers/audio-check.js';
import { encodePiece } from '../continuous-encoder.js';
import { createEncoderPool } from '../encoder-pool.js';
import { LOUDNESS_TARGET_LUFS, TRUE_PEAK_LIMIT_DBTP } from '../loudness.js';
import { CANONICAL_RATE } from '../pcm.js';
import { audioWithMarks, pcmOf, type EngineAudio, type SpeechEngine } from './engine.js';
import { createEngineRegistry, type VoiceBinding } from './engine-registry.js';
import {
  CALIBRATION_TEXT,
  collectPcm,
  LoudnessGains,
  loudnessKey,
  withLoudnessMatching,
} from './loudness-gain.js';
import { LOUDNESS_TABLE } from './loudness-table.js';

/** About 12–15 s of speech from every voice below, and none of it the calibration text. */
const SPEECH =
  'Once upon a time there lived a miller who was very poor, but he had a beautiful daughter. ' +
  'Now it happened that he had to go and speak to the king, and in order to make himself appear ' +
  'important he said to him, I have a daughter who can spin straw into gold. The king said, that ' +
  'is an art which pleases me well; bring her to my palace tomorrow.';

const VOICES: VoiceBinding[] = [
  { engine: 'espeak', voice: 'en-us' },
  { engine: 'espeak', voice: 'en-us', variant: 'f3' },
  { engine: 'flite', voice: 'kal16' },
  { engine: 'flite', voice: 'slt' },
];

const registry = createEngineRegistry({ remoteEndpoints: {}, synthesisThreads: 1 });
const pool = createEncoderPool({ size: 1 });
after(async () => {
  await registry.close();
  await pool.close();
});

async function speak(binding: VoiceBinding): Promise<EngineAudio[]> {
  const chunks: EngineAudio[] = [];
  const request = { text: SPEECH, voice: binding, speechRate: 1 };
  for await (const a of audioWithMarks(registry.engineFor(binding), request, new AbortController().signal))
    chunks.push(a);
  return chunks;
}

async function mp3Of(pcm: Int16Array[]): Promise<Uint8Array> {
  const parts: Uint8Array[] = [];
  for await (const b of encodePiece(pcm, pool.open())) parts.push(b);
  return Buffer.concat(parts);
}

describe('loudness matching', () => {
  it('brings espeak-ng and Flite voices to −16 LUFS, within 1 LU of each other, peaks ≤ −1 dBTP', async () => {
    const measured: { voice: string; integrated: number; truePeak: number }[] = [];
    for (const binding of VOICES) {
      const audio = await speak(binding);
      const pcm = audio.map((a) => a.pcm);
      const seconds = pcm.reduce((n, p) => n + p.length, 0) / CANONICAL_RATE;
      assert.ok(seconds >= 10, `${loudnessKey(binding)} spoke only ${seconds} s`);
      measured.push({ voice: loudnessKey(binding), ...(await ebur128(await mp3Of(pcm))) });
    }
    const report = JSON.stringify(measured);
    for (const m of measured) {
      assert.ok(Math.abs(m.integrated - LOUDNESS_TARGET_LUFS) <= 1, `off target: ${report}`);
      assert.ok(m.truePeak <= TRUE_PEAK_LIMIT_DBTP, `peak too high: ${report}`);
    }
    const levels = measured.map((m) => m.integrated);
    assert.ok(Math.max(...levels) - Math.min(...levels) <= 1, `voices apart: ${report}`);
  });

  it('keeps the engine’s sample count and timing marks', async () => {
    // A recorded espeak-ng call replayed through the matching stage (espeak-ng's own output varies
    // by a few samples from call to call, so two live calls cannot be compared sample for sample).
    const binding: VoiceBinding = { engine: 'espeak', voice: 'en-us', variant: 'f3' };
    const request = { text: SPEECH, voice: binding, speechRate: 1.3 };
    const recorded: EngineAudio[] = [];
    for await (const a of audioWithMarks(registry.engineFor(binding), request, new AbortController().signal))
      recorded.push(a);
    const replay: SpeechEngine = {
      synthesize: (req, signal) => pcmOf(replay.synthesizeWithMarks!(req, signal)),
      async *synthesizeWithMarks() {
        yield* recorded;
      },
    };
    const matched: EngineAudio[] = [];
    const engine = withLoudnessMatching(replay, async () => 12);
    for await (const a of audioWithMarks(engine, request, new AbortController().signal)) matched.push(a);
    const count = (xs: EngineAudio[]) => xs.reduce((n, a) => n + a.pcm.length, 0);
    assert.equal(count(matched), count(recorded));
    const marks = recorded.flatMap((a) => a.marks);
    assert.ok(marks.length > 20);
    assert.deepEqual(
      matched.flatMap((a) => a.marks),
      marks,
    );
    // Each mark comes with the chunk that holds its sample (or the last one, at the very end).
    let at = 0;
    for (const [i, a] of matched.entries()) {
      for (const m of a.marks) {
        assert.ok(m.sample >= at, 'a mark after its chunk');
        assert.ok(m.sample < at + a.pcm.length || i === matched.length - 1, 'a mark before its chunk');
      }
      at += a.pcm.length;
    }
    // The plain PCM path: the same samples as the marked one.
    const plain = await collectPcm(engine.synthesize(request, new AbortController().signal));
    assert.equal(plain.length, count(recorded));
  });

  it('has a stored gain for every built-in voice of the catalogue, measured on the current basis', async () => {
    const gains = new LoudnessGains(() => Promise.reject(new Error('measured')), 1000);
    const voices = await registry.voices();
    const builtIn = voices.filter((v) => v.engine === 'espeak' || v.engine === 'flite');
    assert.ok(builtIn.length > 100);
    for (const v of builtIn) {
      const binding = v.binding as VoiceBinding;
      assert.equal(
        await gains.gainFor(binding, new AbortController().signal),
        LOUDNESS_TABLE.gains[loudnessKey(binding)],
      );
    }
  });
});

describe('LoudnessGains', () => {
  const binding: VoiceBinding = { engine: 'espeak', voice: 'en-us', pitch: 70 };
  /** A calibration that resolves when told to, counting its calls. */
  function controlled() {
    const calls: ((pcm: Int16Array) => void)[] = [];
    const fail: ((err: Error) => void)[] = [];
    const gains = new LoudnessGains(
      (b, signal) =>
        new Promise<Int16Array>((resolve, reject) => {
          assert.equal(b, binding);
          assert.equal(signal.aborted, false);
          calls.push(resolve);
          fail.push(reject);
        }),
      60_000,
      { basis: 'another', gains: { [loudnessKey(binding)]: 5 } },
    );
    return { gains, calls, fail };
  }

  it('measures a binding once for every caller, and ignores a table of another basis', async () => {
    const { gains, calls } = controlled();
    const first = gains.gainFor(binding, new AbortController().signal);
    const second = gains.gainFor(binding, new AbortController().signal);
    await new Promise((r) => setImmediate(r));
    assert.equal(calls.length, 1);
    const calibration = await collectPcm(
      registry
        .engineFor({ engine: 'espeak', voice: 'en-us' })
        .synthesize({ text: CALIBRATION_TEXT, voice: binding, speechRate: 1 }, new AbortController().signal),
    );
    calls[0]?.(calibration);
    const [a, b] = await Promise.all([first, second]);
    assert.equal(a, b);
    assert.notEqual(a, 5);
    assert.equal(await gains.gainFor(binding, new AbortController().signal), a);
    assert.equal(calls.length, 1);
  });

  it('lets a caller stop waiting without stopping the measurement, and forgets a failed one', async () => {
    const { gains, calls, fail } = controlled();
    const stop = new AbortController();
    const waiting = gains.gainFor(binding, stop.signal);
    stop.abort(new Error('client gone'));
    await assert.rejects(waiting, /client gone/);
    const other = gains.gainFor(binding, new AbortController().signal);
    await new Promise((r) => setImmediate(r));
    assert.equal(calls.length, 1, 'the measurement goes on for the next caller');
    fail[0]?.(new Error('engine failed'));
    await assert.rejects(other, /engine failed/);
    void gains.gainFor(binding, new AbortController().signal).catch(() => {});
    await new Promise((r) => setImmediate(r));
    assert.equal(calls.length, 2, 'a failed measurement is tried again');
  });
});
