import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  alignWords,
  loneWordsInput,
  parseLoneWords,
  parseSegmentTimes,
  placeWords,
  writtenWords,
} from './flite-words.js';

// What Flite 2.3 (the pinned WASI build, voice kal16) prints for this sentence: `-psdur` of the
// sentence, and `-ps` of each written word alone (loneWordsInput).
const TEXT = 'Dr. Smith paid $5 million, then left.';
const SEGMENT_TIMES =
  'pau:0.220 d:0.281 aa:0.412 k:0.459 t:0.535 er:0.610 s:0.740 m:0.806 ih:0.905 th:1.010 p:1.113 ' +
  'ey:1.252 d:1.281 f:1.378 ay:1.533 v:1.582 m:1.647 ih:1.708 l:1.771 y:1.811 ax:1.838 n:1.890 ' +
  'd:1.946 aa:2.094 l:2.157 er:2.256 z:2.368 pau:2.588 dh:2.621 eh:2.710 n:2.763 l:2.838 eh:3.076 ' +
  'f:3.187 t:3.310 pau:3.530 \n';
const LONE =
  'pau d r ay v pau \npau s m ih th pau \npau p ey d pau \npau f ay v d aa l er z pau \n' +
  'pau m ih l y ax n pau \npau dh eh n pau \npau l eh f t pau \n';

describe('Flite word timings', () => {
  it("reads -psdur's segments with their end times, and refuses anything else", () => {
    const segments = parseSegmentTimes(SEGMENT_TIMES);
    assert.equal(segments?.length, 36);
    assert.deepEqual(segments?.slice(0, 3), [
      { name: 'pau', end: 0.22 },
      { name: 'd', end: 0.281 },
      { name: 'aa', end: 0.412 },
    ]);
    for (const bad of ['', '  \n', 'pau d aa', 'pau:0.2 d:', 'pau:0.2 :0.3', 'pau:0.3 d:0.2', 'x:NaN'])
      assert.equal(parseSegmentTimes(bad), undefined, JSON.stringify(bad));
  });

  it('cuts the written words as Flite does, punctuation around them left out of the shown text', () => {
    const text = 'Dr. "Smith" (paid) $42\u00a0now, — ok...\0x';
    const words = writtenWords(text);
    assert.deepEqual(
      words.map((w) => [w.token, text.slice(w.textStart, w.textEnd), w.spoken]),
      [
        ['Dr.', 'Dr', true],
        ['"Smith"', 'Smith', true],
        ['(paid)', 'paid', true],
        ['$42\u00a0now,', '$42\u00a0now', true],
        ['—', '—', false],
        ['ok...', 'ok', true],
        ['x', 'x', true],
      ],
    );
  });

  it('reads the lone readings one line a word, and refuses lines that do not match the words', () => {
    const tokens = writtenWords(TEXT).map((w) => w.token);
    assert.equal(loneWordsInput(tokens), 'Dr.\n\nSmith\n\npaid\n\n$5\n\nmillion,\n\nthen\n\nleft.\n');
    const phones = parseLoneWords(LONE, tokens.length);
    assert.deepEqual(phones?.[0], ['d', 'r', 'ay', 'v']);
    assert.deepEqual(phones?.[3], ['f', 'ay', 'v', 'd', 'aa', 'l', 'er', 'z']);
    assert.equal(parseLoneWords(LONE, tokens.length + 1), undefined);
    assert.equal(parseLoneWords('pau a pau \n', 2), undefined);
  });

  it('starts each word after the sound before it, where context reads words otherwise than alone', () => {
    const segments = parseSegmentTimes(SEGMENT_TIMES) ?? [];
    const words = writtenWords(TEXT);
    const phones = parseLoneWords(LONE, words.length) ?? [];
    // In context "Dr." is "doctor" (alone: "drive") and "$5 million" is "five million dollars".
    const starts = alignWords(segments, phones);
    assert.deepEqual(
      starts.map((i) => (i === undefined ? undefined : segments[i]?.name)),
      ['d', 's', 'p', 'f', 'm', 'dh', 'l'],
    );
    assert.deepEqual(starts, [1, 6, 10, 13, 16, 28, 31]);
    const placed = placeWords(segments, words, phones, { rate: 16_000, from: 0, length: 56_480 });
    assert.deepEqual(
      placed.map((w) => [TEXT.slice(w.textStart, w.textEnd), w.sample]),
      [
        ['Dr', 0],
        ['Smith', 9760],
        ['paid', 16160],
        ['$5', 20496],
        ['million', 25312],
        ['then', 39648],
        ['left', 44208],
      ],
    );
  });

  it('places the same words exactly when the readings agree, and gives unread words no place', () => {
    const segments = parseSegmentTimes('pau:0.1 hh:0.2 ay:0.3 pau:0.5 y:0.6 uw:0.7 pau:0.9') ?? [];
    const words = writtenWords('Hi — you');
    const starts = alignWords(segments, [['hh', 'ay'], undefined, ['y', 'uw']]);
    assert.deepEqual(starts, [1, undefined, 4]);
    // The second word starts in the middle of the pause before it; `from` samples were cut off the front.
    const placed = placeWords(segments, words, [['hh', 'ay'], undefined, ['y', 'uw']], {
      rate: 1000,
      from: 50,
      length: 850,
    });
    assert.deepEqual(
      placed.map((w) => w.sample),
      [0, 350],
    );
  });

  it('gives a word read wholly otherwise in context the segments between its neighbours', () => {
    // "St." before a name is "saint" (alone: "street").
    const segments =
      parseSegmentTimes('pau:0.1 ih:0.2 n:0.3 s:0.4 ey:0.5 n:0.6 t:0.7 l:0.8 uw:0.9 ih:1.0 s:1.1 pau:1.3') ??
      [];
    const starts = alignWords(segments, [
      ['ih', 'n'],
      ['s', 't', 'r', 'iy', 't'],
      ['l', 'uw', 'ih', 's'],
    ]);
    assert.deepEqual(starts, [1, 3, 7]);
    // Nothing in common at all: the unmatched segments between two words go to the word between.
    const odd = parseSegmentTimes('pau:0.1 a:0.2 x:0.3 y:0.4 b:0.5 pau:0.6') ?? [];
    assert.deepEqual(alignWords(odd, [['a'], ['q', 'r'], ['b']]), [1, 2, 4]);
    // Extra segments before the first matched one belong to the first word read.
    assert.deepEqual(alignWords(odd, [['x', 'y'], ['b']]), [1, 4]);
    // No readings at all: no word is placed.
    assert.deepEqual(alignWords(odd, [undefined, undefined]), [undefined, undefined]);
  });

  it('keeps placed words in order and inside the waveform', () => {
    const segments = parseSegmentTimes('pau:0.1 a:0.2 b:5.0') ?? [];
    const placed = placeWords(segments, writtenWords('a b'), [['a'], ['b']], {
      rate: 100,
      from: 0,
      length: 15,
    });
    assert.deepEqual(
      placed.map((w) => w.sample),
      [0, 14],
    );
  });
});
