// The loudness meter against ffmpeg's ebur128 filter, and the gain stage's promises: the same
// samples in number and place however the audio is chunked, none above the ceiling, and a plain
// gain where nothing comes near it.
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import { ebur128 } from '../../test/helpers/audio-check.js';
import { GainStage, integratedLoudness, LIMITER_CEILING_DBFS } from './loudness.js';
import { CANONICAL_RATE } from './pcm.js';

/** A test signal like speech in level structure: tone bursts of changing pitch and level with pauses. */
function bursts(seconds: number, peak: number): Int16Array {
  const pcm = new Int16Array(Math.round(seconds * CANONICAL_RATE));
  for (let i = 0; i < pcm.length; i++) {
    const t = i / CANONICAL_RATE;
    const syllable = Math.floor(t / 0.25);
    const voiced = syllable % 5 !== 4;
    const level = voiced ? 0.3 + 0.7 * Math.abs(Math.sin(syllable * 1.7)) : 0;
    const f = 150 + 90 * Math.sin(syllable);
    const s = Math.sin(2 * Math.PI * f * t) * 0.6 + Math.sin(2 * Math.PI * 3.1 * f * t) * 0.4;
    pcm[i] = Math.round(peak * level * s * Math.sin((Math.PI * (t % 0.25)) / 0.25));
  }
  return pcm;
}

function concat(parts: Int16Array[]): Int16Array {
  const out = new Int16Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

function run(stage: GainStage, pcm: Int16Array, chunk: number): Int16Array {
  const parts: Int16Array[] = [];
  for (let i = 0; i < pcm.length; i += chunk) parts.push(stage.process(pcm.subarray(i, i + chunk)));
  parts.push(stage.flush());
  return concat(parts);
}

/** Syllables of a tone with noise, every fourth near silence (the noise floor stage's ground). */
function syllablesWithFloor(seconds: number, peak: number): Int16Array {
  const pcm = new Int16Array(Math.round(seconds * CANONICAL_RATE));
  let seed = 7;
  for (let i = 0; i < pcm.length; i++) {
    const t = i / CANONICAL_RATE;
    const syllable = Math.floor(t / 0.2);
    seed = (seed * 1103515245 + 12345) & 0x7fffffff;
    const level = syllable % 4 === 3 ? 0.0005 * (seed % 3) : 0.2 + 0.8 * Math.abs(Math.sin(syllable * 1.3));
    const tone = Math.sin(2 * Math.PI * (120 + ((40 * syllable) % 200)) * t);
    const s = Math.round(peak * level * (tone + ((seed % 1000) - 500) / 2000));
    pcm[i] = Math.max(-32768, Math.min(32767, s));
  }
  return pcm;
}

/** `run`, the stage taken over from a posted snapshot before every `every`-th chunk (0: never). */
function runHandedOver(gainDb: number, pcm: Int16Array, chunk: number, every: number): Int16Array {
  let stage = new GainStage(gainDb);
  const parts: Int16Array[] = [];
  for (let i = 0, k = 1; i < pcm.length; i += chunk, k++) {
    if (every > 0 && k % every === 0) stage = GainStage.restore(structuredClone(stage.snapshot()));
    parts.push(stage.process(pcm.subarray(i, i + chunk)));
  }
  parts.push(stage.flush());
  return concat(parts);
}

describe('integratedLoudness', () => {
  it('measures what ffmpeg ebur128 measures, within 0.1 LU', async () => {
    for (const peak of [4000, 12000, 30000]) {
      const pcm = bursts(12, peak);
      const ours = integratedLoudness(pcm);
      const { integrated } = await ebur128(new Uint8Array(pcm.buffer), true);
      assert.ok(Math.abs(ours - integrated) <= 0.1, `peak ${peak}: ours ${ours}, ffmpeg ${integrated}`);
    }
  });

  it('answers −Infinity for silence and for less than one block', () => {
    assert.equal(integratedLoudness(new Int16Array(CANONICAL_RATE * 2)), -Infinity);
    assert.equal(integratedLoudness(bursts(0.3, 20000)), -Infinity);
  });
});

describe('GainStage', () => {
  it('keeps every sample in place, whatever the chunking, and none above the ceiling', () => {
    const pcm = bursts(3, 20000);
    const whole = run(new GainStage(9), pcm, pcm.length);
    assert.equal(whole.length, pcm.length);
    for (const chunk of [1, 7, 100, 219, 220, 221, 4096]) {
      assert.deepEqual(run(new GainStage(9), pcm, chunk), whole, `chunks of ${chunk}`);
    }
    const ceiling = 32768 * 10 ** (LIMITER_CEILING_DBFS / 20);
    assert.ok(
      whole.every((s) => Math.abs(s) <= Math.ceil(ceiling)),
      'a sample above the ceiling',
    );
    // Limited, not silenced: the loud parts are near the ceiling.
    assert.ok(whole.reduce((m, s) => Math.max(m, Math.abs(s)), 0) > ceiling * 0.95);
  });

  it('is a plain gain where the audio stays under the ceiling', () => {
    const pcm = bursts(2, 3000);
    const out = run(new GainStage(-6), pcm, 1000);
    const g = 10 ** (-6 / 20);
    assert.equal(out.length, pcm.length);
    assert.ok(out.every((s, i) => Math.abs(s - Math.round((pcm[i] ?? 0) * g)) <= 1));
  });

  it('gives the samples it gave before, to the bit, across chunks and hand-overs', () => {
    // Digests of the stage's output as first written (a sample at a time, with remainders for
    // every ring position). The stage is rewritten for speed, never for its sound: each gain here
    // (raised, lowered, none, limited hard, raised over a noise floor) must come out the same,
    // whole, in chunks and taken over from a snapshot between chunks as threads hand it on.
    const expected: [gainDb: number, peak: number, digest: string][] = [
      [9, 20000, 'a4a902e995b5d599'],
      [-6, 30000, '8bcf2b5303674d11'],
      [0, 32767, '73e17ad6876d1f98'],
      [20, 8000, '2dcdbb176cf712f4'],
      [12, 300, 'ae4a54ca0a5ffdf9'],
    ];
    for (const [gainDb, peak, digest] of expected) {
      const pcm = syllablesWithFloor(2.5, peak);
      const whole = runHandedOver(gainDb, pcm, pcm.length, 0);
      const bytes = new Uint8Array(whole.buffer, whole.byteOffset, whole.byteLength);
      assert.equal(createHash('sha256').update(bytes).digest('hex').slice(0, 16), digest, `${gainDb} dB`);
      for (const [chunk, every] of [
        [1000, 0],
        [333, 3],
        [1, 0],
      ] as const)
        assert.deepEqual(runHandedOver(gainDb, pcm, chunk, every), whole, `${gainDb} dB, chunks of ${chunk}`);
    }
  });

  it('hands back a call shorter than its look-ahead whole at the end', () => {
    const pcm = bursts(0.002, 10000);
    const stage = new GainStage(0);
    assert.equal(stage.process(pcm).length, 0);
    assert.deepEqual(stage.flush(), pcm);
  });
});
