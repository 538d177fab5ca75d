import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { jsonNestsDeeperThan, MAX_JSON_DEPTH } from './json-body.js';

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

  it('a realistic splitter config is far below the limit', () => {
    const config = {
      name: 'n',
      config: { lookupTable: { a: { tags: [['x', 'y']], speechRate: 1 } }, fallbackConfig: { voiceId: 'v' } },
    };
    assert.equal(jsonNestsDeeperThan(JSON.stringify(config), 8), false);
  });
});
