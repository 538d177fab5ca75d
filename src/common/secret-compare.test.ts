import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { secretsEqual } from './secret-compare.js';

describe('secretsEqual', () => {
  const cases: [string, string, boolean][] = [
    ['sk-abc', 'sk-abc', true],
    ['', '', true],
    ['sk-abc', 'sk-abd', false],
    ['sk-ab', 'sk-abc', false],
    ['sk-abc', '', false],
    ['é', 'e\u0301', false],
  ];
  for (const [given, expected, equal] of cases) {
    it(`${JSON.stringify(given)} vs ${JSON.stringify(expected)} → ${equal}`, () => {
      assert.equal(secretsEqual(given, expected), equal);
    });
  }
});
