// The gain of a binding the stored table lacks is measured in a thread of the meter's own: the
// same gain as measured on this thread, one measurement at a time.
import assert from 'node:assert/strict';
import { after, describe, it } from 'node:test';
import { CANONICAL_RATE } from '../pcm.js';
import { GainMeter, gainForCalibration } from './loudness-gain.js';

/** 12 s of speech-like bursts at `peak`. */
function speechLike(peak: number, seed: number): Int16Array {
  const pcm = new Int16Array(12 * CANONICAL_RATE);
  for (let i = 0; i < pcm.length; i++) {
    const t = i / CANONICAL_RATE;
    const syllable = Math.floor(t / 0.25 + seed);
    const level = syllable % 5 === 4 ? 0 : 0.3 + 0.7 * Math.abs(Math.sin(syllable * 1.7));
    const s = Math.sin(2 * Math.PI * (150 + 90 * Math.sin(syllable)) * t);
    pcm[i] = Math.round(peak * level * s * Math.sin((Math.PI * (t % 0.25)) / 0.25));
  }
  return pcm;
}

describe('GainMeter', () => {
  const meter = new GainMeter();
  after(() => meter.close());

  it('measures the gain this thread measures, for quiet and loud voices at once', async () => {
    const voices = [speechLike(2000, 0), speechLike(30_000, 3), new Int16Array(CANONICAL_RATE)];
    const here = await Promise.all(voices.map((pcm) => gainForCalibration(pcm)));
    const there = await Promise.all(voices.map((pcm) => meter.measure(pcm.slice())));
    assert.deepEqual(there, here);
    assert.ok(here[0]! > here[1]!, 'a quieter voice gets more gain');
    assert.equal(here[2], 0, 'silence gets none');
  });
});
