import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { splitSentences } from './sentences.js';

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
