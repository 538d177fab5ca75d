import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { normaliseWords, numberWords, wordErrorRate } from './word-error-rate.js';

describe('normaliseWords', () => {
  const cases: [string, string][] = [
    ['Hello, World!', 'hello world'],
    ['"Well-known" words/phrases — here.', 'well known words phrases here'],
    ["It's the keeper’s lamp.", "it's the keeper's lamp"],
    ["'quoted' text", 'quoted text'],
    ['She counted 12 red umbrellas.', 'she counted twelve red umbrellas'],
    ['1,200 people and 3.5 cups', 'one thousand two hundred people and three point five cups'],
    ['the 21st and 3rd time, 105 days', 'the twenty first and third time one hundred five days'],
    ['agent 007', 'agent zero zero seven'],
    ['Ends here. Next', 'ends here next'],
    ['', ''],
  ];
  for (const [text, words] of cases) {
    it(`${JSON.stringify(text)} → ${JSON.stringify(words)}`, () => {
      assert.deepEqual(normaliseWords(text), words === '' ? [] : words.split(' '));
    });
  }
});

describe('numberWords', () => {
  it('says whole numbers as American English does', () => {
    assert.deepEqual(numberWords(0), ['zero']);
    assert.deepEqual(numberWords(40), ['forty']);
    assert.deepEqual(numberWords(99), ['ninety', 'nine']);
    assert.deepEqual(numberWords(1000), ['one', 'thousand']);
    assert.deepEqual(numberWords(2_000_019), ['two', 'million', 'nineteen']);
  });
  it('refuses what is not a whole number', () => {
    assert.throws(() => numberWords(-1), RangeError);
    assert.throws(() => numberWords(1.5), RangeError);
  });
});

describe('wordErrorRate', () => {
  it('is 0 for the same words, whatever the case, punctuation and number form', () => {
    const r = wordErrorRate('The bus was 12 minutes late.', 'the bus was twelve minutes late');
    assert.deepEqual(r, { referenceWords: 6, substitutions: 0, deletions: 0, insertions: 0, wer: 0 });
  });
  it('counts a wrong word as one substitution', () => {
    const r = wordErrorRate('the cat sat on the mat', 'the cat sat on a mat');
    assert.deepEqual(r, { referenceWords: 6, substitutions: 1, deletions: 0, insertions: 0, wer: 1 / 6 });
  });
  it('counts missing and extra words', () => {
    const r = wordErrorRate('one two three four', 'one three four five six');
    assert.deepEqual(r, { referenceWords: 4, substitutions: 0, deletions: 1, insertions: 2, wer: 3 / 4 });
  });
  it('is the word-level Levenshtein distance over the reference words', () => {
    // kitten → sitting is 3 edits at the letter level; the same edits here, word by word.
    const r = wordErrorRate('k i t t e n', 's i t t i n g');
    assert.equal(r.substitutions + r.deletions + r.insertions, 3);
    assert.equal(r.wer, 3 / 6);
  });
  it('exceeds 1 when the transcript has far more words', () => {
    assert.equal(wordErrorRate('yes', 'no no no').wer, 3);
  });
  it('is 1 for an empty transcript, and refuses an empty reference', () => {
    assert.equal(wordErrorRate('three words here', '').wer, 1);
    assert.equal(wordErrorRate('three words here', '').deletions, 3);
    assert.throws(() => wordErrorRate('...', 'anything'), RangeError);
  });
});
