import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mergeConfigDiff } from './merge-config.js';
import { validateSplitterConfig } from './splitter-config.js';

const current = {
  '<A>': { voiceId: 'a', speechRate: 1 },
  lookupTable: { happy: { tags: ['happy', ['glad', 'very']], voiceId: 'h' } },
  splitterMarks: ['[]', '<>'],
  fallbackConfig: { voiceId: 'f' },
};

const cases: Array<{ name: string; diff: Record<string, unknown>; want: Record<string, unknown> }> = [
  { name: 'empty diff changes nothing', diff: {}, want: current },
  {
    name: 'objects are deep-merged',
    diff: { '<A>': { speechRate: 1.5 }, lookupTable: { happy: { voiceId: 'h2' }, sad: { tags: ['sad'] } } },
    want: {
      ...current,
      '<A>': { voiceId: 'a', speechRate: 1.5 },
      lookupTable: { happy: { tags: ['happy', ['glad', 'very']], voiceId: 'h2' }, sad: { tags: ['sad'] } },
    },
  },
  {
    name: 'arrays are replaced, not merged',
    diff: { splitterMarks: ['【】'], lookupTable: { happy: { tags: ['joy'] } } },
    want: { ...current, splitterMarks: ['【】'], lookupTable: { happy: { tags: ['joy'], voiceId: 'h' } } },
  },
  {
    name: 'null deletes a key at any depth',
    diff: { fallbackConfig: null, '<A>': { speechRate: null }, lookupTable: { happy: null } },
    want: { '<A>': { voiceId: 'a' }, lookupTable: {}, splitterMarks: ['[]', '<>'] },
  },
  { name: 'null for an absent key is a no-op', diff: { '<Z>': null }, want: current },
  {
    name: 'new keys are added; nulls nested in a new object are dropped',
    diff: { '<B>': { voiceId: 'b', speechRate: null } },
    want: { ...current, '<B>': { voiceId: 'b' } },
  },
  {
    name: 'an object replaces a non-object and vice versa',
    diff: { splitterMarks: { x: 1 }, '<A>': 'plain' },
    want: { ...current, splitterMarks: { x: 1 }, '<A>': 'plain' },
  },
  {
    name: 'null inside an array is kept as an element',
    diff: { splitterMarks: [null] },
    want: { ...current, splitterMarks: [null] },
  },
];

void describe('mergeConfigDiff', () => {
  for (const { name, diff, want } of cases) {
    void test(name, () => {
      assert.deepEqual(mergeConfigDiff(current, diff), want);
    });
  }

  void test('existing keys keep their position; new keys are appended in diff order', () => {
    const out = mergeConfigDiff(current, {
      '<C>': { voiceId: 'c' },
      lookupTable: { happy: { speechRate: 2 } },
      '<B>': {},
    });
    assert.deepEqual(Object.keys(out), [
      '<A>',
      'lookupTable',
      'splitterMarks',
      'fallbackConfig',
      '<C>',
      '<B>',
    ]);
    assert.deepEqual(Object.keys((out.lookupTable as Record<string, object>).happy ?? {}), [
      'tags',
      'voiceId',
      'speechRate',
    ]);
  });

  void test('pure: neither argument is mutated and the result shares no objects with them', () => {
    const before = JSON.stringify(current);
    const diff = { '<A>': { speechRate: 3 }, splitterMarks: ['()'] };
    const out = mergeConfigDiff(current, diff);
    assert.equal(JSON.stringify(current), before);
    assert.notEqual(out.lookupTable, current.lookupTable);
    assert.notEqual(out.splitterMarks, diff.splitterMarks);
    (out.splitterMarks as string[]).push('<>');
    assert.deepEqual(diff.splitterMarks, ['()']);
  });

  void test('a "__proto__" key in a diff is an ordinary key', () => {
    const out = mergeConfigDiff(
      current,
      JSON.parse('{"__proto__": {"voiceId": "p"}}') as Record<string, unknown>,
    );
    assert.equal(Object.getPrototypeOf(out), Object.prototype);
    assert.deepEqual(Object.getOwnPropertyDescriptor(out, '__proto__')?.value, { voiceId: 'p' });
  });

  void test('the caller re-validates: a diff can make a config invalid', () => {
    const merged = mergeConfigDiff({ fallbackConfig: { voiceId: 'f' } }, { fallbackConfig: null });
    assert.deepEqual(merged, {});
    assert.throws(() => validateSplitterConfig(merged), { code: 'TTS_SPLITTER_INVALID' });
  });
});
