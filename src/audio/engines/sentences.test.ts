import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { clausesOf, splitSentences } from './sentences.js';

describe('splitSentences', () => {
  it('splits on sentence boundaries and drops empty pieces', () => {
    assert.deepEqual(splitSentences('Hello world.  How are you? Fine!\n\n  '), [
      'Hello world.',
      'How are you?',
      'Fine!',
    ]);
    assert.deepEqual(splitSentences('   '), []);
  });

  it('splits CJK text and tolerates tags that are not BCP 47', () => {
    assert.deepEqual(splitSentences('你好。今天很好！', 'cmn'), ['你好。', '今天很好！']);
    assert.deepEqual(splitSentences('One. Two.', 'gmw/en-US'), ['One.', 'Two.']);
  });

  it('cuts overlong sentences at a clause or word boundary', () => {
    const long = `${'word '.repeat(30)}and, ${'more '.repeat(30)}`;
    const parts = splitSentences(long, 'en', 100);
    assert.ok(parts.every((p) => p.length <= 100 && p.length > 0));
    assert.equal(parts.join(' ').replace(/\s+/g, ' '), long.trim().replace(/\s+/g, ' '));
    assert.deepEqual(splitSentences('x'.repeat(250), 'en', 100), [
      'x'.repeat(100),
      'x'.repeat(100),
      'x'.repeat(50),
    ]);
  });
});

describe('clausesOf', () => {
  it('cuts after a comma, semicolon or colon followed by a space, clauses of at least minChars', () => {
    assert.deepEqual(clausesOf('He trimmed the wick, polished the lens; and watched: the beam.', 10), [
      { text: 'He trimmed the wick,', pauseAfter: 'comma' },
      { text: 'polished the lens;', pauseAfter: 'semicolon' },
      { text: 'and watched: the beam.' },
    ]);
    // Short clauses join the next; a short last clause stays with the one before.
    assert.deepEqual(clausesOf('Yes, sir, at once, as you say, ok.', 10), [
      { text: 'Yes, sir, at once,', pauseAfter: 'comma' },
      { text: 'as you say, ok.' },
    ]);
    // Commas without a following space (numbers) and sentences without clauses stay whole.
    assert.deepEqual(clausesOf('It cost 1,000,000 dollars in all.', 5), [
      { text: 'It cost 1,000,000 dollars in all.' },
    ]);
    assert.deepEqual(clausesOf('  Short.  ', 20), [{ text: 'Short.' }]);
  });
});
