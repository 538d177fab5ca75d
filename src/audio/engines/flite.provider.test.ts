import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { flitePieces } from './flite.provider.js';

describe('flitePieces', () => {
  it("cuts the first sentence's first clause apart, keeps later sentences whole", () => {
    const text = 'This is one shot number 5, spoken at once. Then, a second one.';
    assert.deepEqual(flitePieces(text), [
      { text: 'This is one shot number 5,', at: 0, continues: false, sentenceEnd: 42 },
      { text: 'spoken at once.', at: 27, continues: true },
      { text: 'Then, a second one.', at: 43, continues: false, sentenceEnd: 19 },
    ]);
  });

  it('keeps a short first clause with what follows, and cuts a long sentence without commas near 80', () => {
    assert.deepEqual(
      flitePieces('Hi, you.').map((p) => p.text),
      ['Hi, you.'],
    );
    const long =
      'When the committee finally met on Thursday afternoon after weeks of delays and a great many ' +
      'letters it agreed that the old bridge would be repaired.';
    const pieces = flitePieces(long);
    assert.equal(pieces.length, 2);
    assert.ok((pieces[0]?.text.length ?? 0) <= 80 && (pieces[0]?.text.length ?? 0) >= 40);
    assert.equal(pieces[0]?.sentenceEnd, long.length);
    assert.equal(pieces[1]?.continues, true);
    // Every piece is the text at its offset.
    for (const p of pieces) assert.equal(long.slice(p.at, p.at + p.text.length), p.text);
  });

  it('yields nothing for empty text', () => {
    assert.deepEqual(flitePieces('   '), []);
  });
});
