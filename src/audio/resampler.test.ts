import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { rmsDbfs } from '../../test/helpers/audio-check.js';
import { concatPcm } from './pcm.js';
import { createResampler } from './resampler.js';

function tone(rate: number, samples: number, hz: number, amplitude = 10000): Int16Array {
  const out = new Int16Array(samples);
  for (let i = 0; i < samples; i++) out[i] = Math.round(amplitude * Math.sin((2 * Math.PI * hz * i) / rate));
  return out;
}

async function resampleAll(rate: number, input: Int16Array, chunk: number): Promise<Int16Array> {
  const r = await createResampler(rate);
  const parts: Int16Array[] = [];
  for (let o = 0; o < input.length; o += chunk) parts.push(r.process(input.subarray(o, o + chunk)));
  parts.push(r.flush());
  return concatPcm(parts);
}

describe('resampler', () => {
  for (const rate of [8000, 16000, 22050, 24000, 32000, 48000]) {
    it(`${rate} Hz → 44100 Hz gives round(n × 44100 / ${rate}) samples whatever the chunking`, async () => {
      for (const n of [0, 1, 999, 12345, 44101]) {
        const input = tone(rate, n, 440);
        const expected = Math.round((n * 44100) / rate);
        for (const chunk of [1, 333, 4096, 100000]) {
          if (chunk === 1 && n > 1000) continue; // sample-by-sample is slow and adds nothing past 1000
          const out = await resampleAll(rate, input, chunk);
          assert.equal(out.length, expected, `n=${n} chunk=${chunk}`);
        }
      }
    });
  }

  it('is deterministic: different chunkings give identical samples', async () => {
    const input = tone(22050, 50000, 1000);
    const a = await resampleAll(22050, input, 50000);
    const b = await resampleAll(22050, input, 777);
    assert.deepEqual(b, a);
  });

  it('keeps level and timing: a 1 kHz tone stays at the same RMS and a click stays in place', async () => {
    const out = await resampleAll(22050, tone(22050, 22050, 1000), 1000);
    const inDb = rmsDbfs(tone(22050, 22050, 1000));
    assert.ok(Math.abs(rmsDbfs(out, 1000, out.length - 1000) - inDb) < 0.5);
    const click = new Int16Array(2000);
    click[500] = 20000;
    const moved = await resampleAll(22050, click, 2000);
    const peak = moved.reduce((best, v, i) => (Math.abs(v) > Math.abs(moved[best] ?? 0) ? i : best), 0);
    assert.ok(Math.abs(peak - 1000) <= 1, `peak at ${peak}`);
  });

  it('passes 44.1 kHz through unchanged', async () => {
    const r = await createResampler(44100);
    const input = tone(44100, 100, 440);
    assert.equal(r.process(input), input);
    assert.equal(r.flush().length, 0);
  });

  it('rejects nonsense rates and use after flush', async () => {
    await assert.rejects(createResampler(0), RangeError);
    await assert.rejects(createResampler(22050.5), RangeError);
    const r = await createResampler(16000);
    r.flush();
    assert.throws(() => r.process(new Int16Array(10)));
    r.destroy();
  });
});
