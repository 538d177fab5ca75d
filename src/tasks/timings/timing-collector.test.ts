import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EngineAudio, TimingMark } from '../../audio/engines/engine.js';
import { TimingCollector, type SentenceTiming } from './timing-collector.js';

/** `spec`: runs of [samples, voiced?]. */
function pcmOf(spec: [number, boolean][]): Int16Array {
  const out: number[] = [];
  for (const [n, voiced] of spec)
    for (let i = 0; i < n; i++) out.push(voiced ? (i % 2 === 0 ? 5000 : -5000) : 3);
  return Int16Array.from(out);
}

/** Feeds `pcm` in chunks of `size`, each with the marks that fall inside it. */
function collect(text: string, pcm: Int16Array, marks: TimingMark[], size: number): SentenceTiming[] {
  const collector = new TimingCollector(text.length);
  const out: SentenceTiming[] = [];
  for (let at = 0; at < pcm.length; at += size) {
    const end = Math.min(at + size, pcm.length);
    const inside = marks.filter(
      (m) => m.sample >= at && (m.sample < end || (end === pcm.length && m.sample === end)),
    );
    const chunk: EngineAudio = { pcm: pcm.slice(at, end), marks: inside };
    out.push(...collector.add(chunk));
  }
  out.push(...collector.finish());
  return out;
}

describe('timing collector', () => {
  const text = 'Hello there. Bye now.';
  const pcm = pcmOf([
    [1000, false],
    [800, true],
    [200, false],
    [1000, true],
    [1000, false],
    [500, false],
    [1000, true],
    [700, false],
  ]);
  const marks: TimingMark[] = [
    { kind: 'sentence', sample: 0, textStart: 0, textEnd: 12 },
    { kind: 'word', sample: 900, textStart: 0, textEnd: 5 },
    { kind: 'word', sample: 1900, textStart: 6, textEnd: 12 },
    { kind: 'sentence', sample: 4000, textStart: 13, textEnd: 21 },
    { kind: 'word', sample: 4400, textStart: 13, textEnd: 16 },
  ];

  it('spans sentences and words from their first to their last voiced sample, whatever the chunking', () => {
    const expected: SentenceTiming[] = [
      {
        seq: 0,
        start: 1000,
        end: 3000,
        textStart: 0,
        textEnd: 12,
        words: [
          { start: 1000, end: 1800, textStart: 0, textEnd: 5 },
          { start: 2000, end: 3000, textStart: 6, textEnd: 12 },
        ],
      },
      {
        seq: 1,
        start: 4500,
        end: 5500,
        textStart: 13,
        textEnd: 21,
        words: [{ start: 4500, end: 5500, textStart: 13, textEnd: 16 }],
      },
    ];
    for (const size of [1, 333, 1000, 4000, 100_000])
      assert.deepEqual(collect(text, pcm, marks, size), expected, `chunks of ${size}`);
  });

  it('makes one sentence of the whole text when the engine gives no marks', () => {
    assert.deepEqual(collect(text, pcm, [], 700), [
      { seq: 0, start: 1000, end: 5500, textStart: 0, textEnd: text.length, words: [] },
    ]);
  });

  it('reports a sentence as soon as the next one starts', () => {
    const collector = new TimingCollector(text.length);
    assert.deepEqual(collector.add({ pcm: pcm.slice(0, 4000), marks: marks.slice(0, 3) }), []);
    const first = collector.add({ pcm: pcm.slice(4000, 4100), marks: marks.slice(3, 4) });
    assert.equal(first.length, 1);
    assert.equal(first[0]?.end, 3000);
  });
});
