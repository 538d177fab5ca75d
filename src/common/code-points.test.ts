import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { codePointLength } from './code-points.js';

describe('codePointLength', () => {
  it('counts code points as spreading the string does', () => {
    const samples = [
      '',
      'a',
      'Hello, world.',
      '😀',
      'a😀b😀😀',
      'é' + 'e\u0301',
      '\ud800',
      '\udc00',
      '\udc00\ud800',
      'x\ud800y\udc00z',
      '\ud83d\ude00\ude00',
      '\ud83d\ud83d\ude00',
      'これは日本語です。🎌',
    ];
    for (const s of samples) assert.equal(codePointLength(s), [...s].length, JSON.stringify(s));
  });

  it('counts a 100,000-character text', () => {
    const text = 'Long text with an emoji 😀. '.repeat(4000);
    assert.equal(codePointLength(text), [...text].length);
  });
});
