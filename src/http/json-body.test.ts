import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { jsonNestsDeeperThan, MAX_JSON_DEPTH } from './json-body.js';

/** The scan character by character, as first written: the reference for the faster one. */
function nestsDeeperCharByChar(text: string, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) inString = true;
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > maxDepth) return true;
    } else if (c === 0x5d || c === 0x7d) depth--;
  }
  return false;
}

describe('jsonNestsDeeperThan', () => {
  const cases: Array<{ name: string; text: string; max: number; want: boolean }> = [
    { name: 'a scalar has depth 0', text: '1', max: 0, want: false },
    { name: 'an empty object has depth 1', text: '{}', max: 1, want: false },
    { name: 'an object in an array has depth 2', text: '[{}]', max: 1, want: true },
    { name: 'siblings do not add up', text: '[[1],[2],[3],{"a":[4]}]', max: 3, want: false },
    { name: 'brackets in strings do not count', text: '{"a":"[[[[{{{{"}', max: 1, want: false },
    { name: 'an escaped quote does not end a string', text: '["\\"[[[["]', max: 1, want: false },
    { name: 'an escaped backslash ends before the quote', text: '["\\\\",[[]]]', max: 2, want: true },
    { name: 'exactly the limit is allowed', text: '['.repeat(64) + ']'.repeat(64), max: 64, want: false },
    { name: 'one past the limit is refused', text: '['.repeat(65) + ']'.repeat(65), max: 64, want: true },
    {
      name: 'unclosed input stops at the first level too deep',
      text: '{"a":'.repeat(1000),
      max: 64,
      want: true,
    },
    { name: 'malformed text is left to JSON.parse', text: ']]]{', max: 0, want: false },
  ];
  for (const c of cases) {
    it(c.name, () => {
      assert.equal(jsonNestsDeeperThan(c.text, c.max), c.want);
    });
  }

  it('1,000,000 levels are refused without recursion', () => {
    assert.equal(jsonNestsDeeperThan('['.repeat(1_000_000), MAX_JSON_DEPTH), true);
  });

  it('answers as a character-by-character scan on any text of brackets, quotes and backslashes', () => {
    const piece = fc.constantFrom('[', ']', '{', '}', '"', '\\', 'a', ',', ':');
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 60 }), fc.integer({ min: 0, max: 6 }), (pieces, max) => {
        const text = pieces.join('');
        assert.equal(jsonNestsDeeperThan(text, max), nestsDeeperCharByChar(text, max), text);
      }),
      { seed: 20261126, numRuns: 20_000 },
    );
  });

  it('a realistic splitter config is far below the limit', () => {
    const config = {
      name: 'n',
      config: { lookupTable: { a: { tags: [['x', 'y']], speechRate: 1 } }, fallbackConfig: { voiceId: 'v' } },
    };
    assert.equal(jsonNestsDeeperThan(JSON.stringify(config), 8), false);
  });
});
