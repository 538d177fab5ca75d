import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { AppError } from '../errors/app-error.js';
import {
  checkSplitterConfigBounds,
  jsonBytes,
  SPLITTER_CONFIG_BOUNDS as BOUNDS,
  validateSplitterConfig,
  type SplitterConfig,
} from './splitter-config.js';

const voice = { voiceId: 'v1' };

/** Each splitter config rule with at least one passing and one failing case; `error` is a regex on the message. */
const cases: Array<{ name: string; config: unknown; error?: RegExp }> = [
  // Rule 1: config is a non-array object.
  { name: 'r1 ok: object with a placeholder', config: { '<A>': voice } },
  {
    name: 'r1 fail: array',
    config: [{ '<A>': voice }],
    error: /^config must be a non-array object, got an array$/,
  },
  { name: 'r1 fail: string', config: 'config', error: /^config must be a non-array object, got a string$/ },
  { name: 'r1 fail: null', config: null, error: /^config must be a non-array object, got null$/ },
  { name: 'r1 fail: number', config: 3, error: /^config must be a non-array object/ },

  // Rule 2: a placeholder remains, or fallbackConfig / splitterMarks is present.
  { name: 'r2 ok: only splitterMarks', config: { splitterMarks: ['[]'] } },
  { name: 'r2 ok: only empty splitterMarks', config: { splitterMarks: [] } },
  { name: 'r2 ok: only fallbackConfig', config: { fallbackConfig: voice } },
  { name: 'r2 ok: lookupTable plus a placeholder', config: { lookupTable: {}, '<A>': voice } },
  {
    name: 'r2 fail: empty object',
    config: {},
    error: /at least one placeholder key, or fallbackConfig, or splitterMarks/,
  },
  {
    name: 'r2 fail: only lookupTable {}',
    config: { lookupTable: {} },
    error: /at least one placeholder key/,
  },
  {
    name: 'r2 fail: only a valid lookupTable',
    config: { lookupTable: { happy: { tags: ['happy'], voiceId: 'v' } } },
    error: /at least one placeholder key/,
  },
  {
    name: 'r2+r5: only fallbackConfig {} fails on missing voiceId',
    config: { fallbackConfig: {} },
    error: /^fallbackConfig\.voiceId must be a string, got nothing$/,
  },

  // Rule 3: placeholder key non-empty, value a non-array object.
  {
    name: 'r3 ok: placeholder without voiceId (inherits)',
    config: { '[faster_speech:1.2]': { speechRate: 1.2 } },
  },
  { name: 'r3 ok: placeholder empty object', config: { '<A>': {} } },
  {
    name: 'r3 ok: placeholder with extra params',
    config: { '<A>': { voiceId: 'v', speechRate: 1, pitch: 'high', x: [1] } },
  },
  { name: 'r3 ok: key "__proto__"', config: JSON.parse('{"__proto__": {"voiceId": "v"}}') as unknown },
  {
    name: 'r3 fail: empty key ""',
    config: { '': voice },
    error: /^placeholder keys must be non-empty strings; config has an empty key ""$/,
  },
  {
    name: 'r3 fail: value is an array',
    config: { '<A>': [] },
    error: /^placeholder "<A>" must be a non-array object, got an array$/,
  },
  {
    name: 'r3 fail: value is a string',
    config: { '<A>': 'v1' },
    error: /^placeholder "<A>" must be a non-array object, got a string$/,
  },
  {
    name: 'r3 fail: value is null',
    config: { '<A>': null },
    error: /^placeholder "<A>" must be a non-array object, got null$/,
  },
  {
    name: 'r3 fail: voiceId not a string',
    config: { '<A>': { voiceId: 7 } },
    error: /^placeholder "<A>"\.voiceId must be a string, got a number$/,
  },
  {
    name: 'r3 fail: speechRate not a number',
    config: { '<A>': { speechRate: '1.2' } },
    error: /^placeholder "<A>"\.speechRate must be a number, got a string$/,
  },

  // Rule 4: lookupTable.
  {
    name: 'r4 ok: string and AND tags',
    config: {
      '<A>': voice,
      lookupTable: { a: { tags: ['x', ['y', 'z']], voiceId: 'v2' }, b: { tags: [[]] } },
    },
  },
  { name: 'r4 ok: entry with tags only', config: { '<A>': voice, lookupTable: { a: { tags: ['x'] } } } },
  {
    name: 'r4 fail: lookupTable []',
    config: { '<A>': voice, lookupTable: [] },
    error: /^lookupTable must be a non-array object, got an array$/,
  },
  {
    name: 'r4 fail: lookupTable null',
    config: { '<A>': voice, lookupTable: null },
    error: /^lookupTable must be a non-array object, got null$/,
  },
  {
    name: 'r4 fail: entry []',
    config: { '<A>': voice, lookupTable: { a: [] } },
    error: /^lookupTable\["a"\] must be a non-array object, got an array$/,
  },
  {
    name: 'r4 fail: entry a string',
    config: { '<A>': voice, lookupTable: { a: 'x' } },
    error: /^lookupTable\["a"\] must be a non-array object, got a string$/,
  },
  {
    name: 'r4 fail: tags missing',
    config: { '<A>': voice, lookupTable: { a: { voiceId: 'v' } } },
    error: /^lookupTable\["a"\]\.tags must be a non-empty array, got nothing$/,
  },
  {
    name: 'r4 fail: tags empty',
    config: { '<A>': voice, lookupTable: { a: { tags: [] } } },
    error: /^lookupTable\["a"\]\.tags must be a non-empty array, got an empty array$/,
  },
  {
    name: 'r4 fail: tags a string',
    config: { '<A>': voice, lookupTable: { a: { tags: 'x' } } },
    error: /^lookupTable\["a"\]\.tags must be a non-empty array, got a string$/,
  },
  {
    name: 'r4 fail: tags element a number',
    config: { '<A>': voice, lookupTable: { a: { tags: ['x', 3] } } },
    error: /^lookupTable\["a"\]\.tags\[1\] must be a string or an array of strings, got a number$/,
  },
  {
    name: 'r4 fail: tags element an object',
    config: { '<A>': voice, lookupTable: { a: { tags: [{}] } } },
    error: /^lookupTable\["a"\]\.tags\[0\] must be a string or an array of strings, got an object$/,
  },
  {
    name: 'r4 fail: AND element containing a number',
    config: { '<A>': voice, lookupTable: { a: { tags: ['x'] }, b: { tags: ['y', ['z', 1]] } } },
    error: /^lookupTable\["b"\]\.tags\[1\]\[1\] must be a string, got a number$/,
  },
  {
    name: 'r4 fail: AND element containing a nested array',
    config: { '<A>': voice, lookupTable: { a: { tags: [['z', ['w']]] } } },
    error: /^lookupTable\["a"\]\.tags\[0\]\[1\] must be a string, got an array$/,
  },
  {
    name: 'r4 fail: entry voiceId not a string',
    config: { '<A>': voice, lookupTable: { a: { tags: ['x'], voiceId: false } } },
    error: /^lookupTable\["a"\]\.voiceId must be a string, got a boolean$/,
  },

  // Rule 5: fallbackConfig.
  {
    name: 'r5 ok: fallbackConfig with params',
    config: { fallbackConfig: { voiceId: 'v', speechRate: 0.9, style: 'calm' } },
  },
  {
    name: 'r5 fail: fallbackConfig []',
    config: { '<A>': voice, fallbackConfig: [] },
    error: /^fallbackConfig must be a non-array object, got an array$/,
  },
  {
    name: 'r5 fail: fallbackConfig null',
    config: { '<A>': voice, fallbackConfig: null },
    error: /^fallbackConfig must be a non-array object, got null$/,
  },
  {
    name: 'r5 fail: fallbackConfig voiceId number',
    config: { fallbackConfig: { voiceId: 1 } },
    error: /^fallbackConfig\.voiceId must be a string, got a number$/,
  },
  {
    name: 'r5 fail: fallbackConfig speechRate string',
    config: { fallbackConfig: { voiceId: 'v', speechRate: 'x' } },
    error: /^fallbackConfig\.speechRate must be a number/,
  },

  // Rule 6: splitterMarks.
  { name: 'r6 ok: ASCII pairs', config: { splitterMarks: ['[]', '<>', '()'] } },
  { name: 'r6 ok: 【】 is 2 characters', config: { splitterMarks: ['【】'] } },
  { name: 'r6 ok: an emoji pair is 2 characters', config: { splitterMarks: ['😀😁'] } },
  {
    name: 'r6 fail: not an array',
    config: { splitterMarks: '[]' },
    error: /^splitterMarks must be an array, got a string$/,
  },
  {
    name: 'r6 fail: object',
    config: { splitterMarks: { 0: '[]' } },
    error: /^splitterMarks must be an array, got an object$/,
  },
  {
    name: 'r6 fail: 1-character mark',
    config: { splitterMarks: ['[]', '['] },
    error: /^splitterMarks\[1\] must be a string of exactly 2 characters, got 1 characters$/,
  },
  {
    name: 'r6 fail: 3-character mark',
    config: { splitterMarks: ['[-]'] },
    error: /^splitterMarks\[0\] must be a string of exactly 2 characters, got 3 characters$/,
  },
  {
    name: 'r6 fail: empty mark',
    config: { splitterMarks: [''] },
    error: /^splitterMarks\[0\] must be a string of exactly 2 characters, got 0 characters$/,
  },
  {
    name: 'r6 fail: non-string mark',
    config: { splitterMarks: [12] },
    error: /^splitterMarks\[0\] must be a string of exactly 2 characters, got a number$/,
  },
];

void describe('validateSplitterConfig', () => {
  for (const { name, config, error } of cases) {
    void test(name, () => {
      if (error === undefined) {
        assert.deepEqual(validateSplitterConfig(config), config);
        return;
      }
      assert.throws(
        () => validateSplitterConfig(config),
        (err: unknown) => {
          assert.ok(err instanceof AppError);
          assert.equal(err.code, 'TTS_SPLITTER_INVALID');
          assert.equal(err.status, 400);
          assert.match(err.message, error);
          return true;
        },
      );
    });
  }

  void test('returns a deep copy preserving key order at every level', () => {
    const input = {
      '<B>': { speechRate: 1, voiceId: 'b' },
      fallbackConfig: { voiceId: 'f' },
      '<A>': { voiceId: 'a' },
      lookupTable: { z: { tags: ['z'] }, a: { tags: ['a'] } },
      splitterMarks: ['[]'],
    };
    const out = validateSplitterConfig(input);
    assert.deepEqual(Object.keys(out), ['<B>', 'fallbackConfig', '<A>', 'lookupTable', 'splitterMarks']);
    assert.deepEqual(Object.keys(out['<B>'] as object), ['speechRate', 'voiceId']);
    assert.deepEqual(Object.keys(out.lookupTable ?? {}), ['z', 'a']);
    assert.equal(JSON.stringify(out), JSON.stringify(input));
    assert.notEqual(out.lookupTable, input.lookupTable);
    out.splitterMarks?.push('<>');
    assert.deepEqual(input.splitterMarks, ['[]']);
  });

  void test('a "__proto__" placeholder key stays an ordinary key', () => {
    const out = validateSplitterConfig(JSON.parse('{"__proto__": {"voiceId": "v"}}') as unknown);
    assert.equal(Object.getPrototypeOf(out), Object.prototype);
    assert.deepEqual(Object.keys(out), ['__proto__']);
  });

  void test('reports the first failure in key order', () => {
    assert.throws(() => validateSplitterConfig({ splitterMarks: ['x'], '': {} }), /splitterMarks\[0\]/);
    assert.throws(() => validateSplitterConfig({ '': {}, splitterMarks: ['x'] }), /empty key/);
  });
});

/** `count` placeholders named by `name(i)`, each with `params`. */
function placeholders(count: number, name: (i: number) => string, params: object = voice): SplitterConfig {
  return Object.fromEntries(Array.from({ length: count }, (_, i) => [name(i), params]));
}

/** `count` lookupTable entries with `tagsOf(i)`, plus a fallback. */
function lookup(count: number, tagsOf: (i: number) => unknown[]): SplitterConfig {
  const table = Object.fromEntries(Array.from({ length: count }, (_, i) => [`e${i}`, { tags: tagsOf(i) }]));
  return { lookupTable: table, fallbackConfig: voice } as SplitterConfig;
}

/** Parameter objects naming `count` distinct parameters in all (voiceId included). */
function paramNames(count: number): SplitterConfig {
  const params: Record<string, unknown> = { voiceId: 'v' };
  for (let i = 1; i < count; i++) params[`p${i}`] = 1;
  return { '<A>': params };
}

/** A config of exactly `total` JSON values, spread over five placeholders so no entry is over its bytes. */
function jsonValues(total: number): SplitterConfig {
  const zeros = total - 1 - 5 * 3; // the root, and each placeholder's object, voiceId and array
  const config: Record<string, unknown> = {};
  for (let i = 0; i < 5; i++) {
    const n = Math.floor(zeros / 5) + (i < zeros % 5 ? 1 : 0);
    config[`<${i}>`] = { voiceId: 'v', emo: Array.from({ length: n }, () => 0) };
  }
  return config;
}

/** A config of exactly `bytes` bytes of JSON, in placeholders each well under the entry bound. */
function bytesOfConfig(bytes: number): SplitterConfig {
  const config: Record<string, unknown> = {};
  for (let i = 0; jsonBytes(config) < bytes - 4000; i++) config[`<${i}>`] = { voiceId: 'v'.repeat(3000) };
  const last = `<${Object.keys(config).length}>`;
  config[last] = { voiceId: '' };
  const short = bytes - jsonBytes(config);
  config[last] = { voiceId: 'v'.repeat(short) };
  assert.equal(jsonBytes(config), bytes);
  return config;
}

/** Each bound with the largest config it allows and one step past it. */
const boundCases: Array<{ name: string; within: SplitterConfig; beyond: SplitterConfig; error: RegExp }> = [
  {
    name: 'placeholder keys',
    within: placeholders(BOUNDS.placeholderKeys, (i) => `<${i}>`),
    beyond: placeholders(BOUNDS.placeholderKeys + 1, (i) => `<${i}>`),
    error: /^config has 501 placeholder keys; at most 500 are allowed$/,
  },
  {
    name: 'placeholder key length',
    within: { ['k'.repeat(BOUNDS.placeholderKeyLength)]: voice },
    beyond: { ['k'.repeat(BOUNDS.placeholderKeyLength + 1)]: voice },
    error: /^placeholder key "k{20}…" has 101 characters; at most 100 are allowed$/,
  },
  {
    name: 'splitterMarks',
    within: { splitterMarks: Array.from({ length: BOUNDS.splitterMarks }, () => '[]') },
    beyond: { splitterMarks: Array.from({ length: BOUNDS.splitterMarks + 1 }, () => '[]') },
    error: /^splitterMarks has 65 entries; at most 64 are allowed$/,
  },
  {
    name: 'lookupTable entries',
    within: lookup(BOUNDS.lookupTableEntries, (i) => [`t${i}`]),
    beyond: lookup(BOUNDS.lookupTableEntries + 1, (i) => [`t${i}`]),
    error: /^lookupTable has 501 entries; at most 500 are allowed$/,
  },
  {
    name: 'lookupTable tags, counting each tag of an all-of element',
    within: lookup(BOUNDS.lookupTableEntries, (i) => [`a${i}`, [`b${i}`, `c${i}`, `d${i}`]]),
    beyond: lookup(BOUNDS.lookupTableEntries, (i) =>
      i === 0 ? ['x', ['a', 'b', 'c', 'd']] : ['a', ['b', 'c', 'd']],
    ),
    error: /^lookupTable has 2001 tags across its entries; at most 2000 are allowed$/,
  },
  {
    name: 'distinct parameter names (tags is not one)',
    within: paramNames(BOUNDS.parameterNames),
    beyond: paramNames(BOUNDS.parameterNames + 1),
    error: /^config has more than 64 distinct parameter names; at most 64 are allowed$/,
  },
  {
    name: 'JSON values',
    within: jsonValues(BOUNDS.values),
    beyond: jsonValues(BOUNDS.values + 1),
    error: /^config has more than 10000 JSON values; at most 10000 are allowed$/,
  },
  {
    name: 'bytes of one placeholder entry',
    within: { '<A>': { voiceId: 'v', note: 'n'.repeat(BOUNDS.entryBytes - 25) } },
    beyond: { '<A>': { voiceId: 'v', note: 'n'.repeat(BOUNDS.entryBytes - 24) } },
    error: /^placeholder "<A>" has 4097 bytes of JSON; at most 4096 are allowed$/,
  },
  {
    name: 'bytes of fallbackConfig, counted in UTF-8',
    within: { fallbackConfig: { voiceId: 'é'.repeat((BOUNDS.entryBytes - 14) / 2) } },
    beyond: { fallbackConfig: { voiceId: `${'é'.repeat((BOUNDS.entryBytes - 14) / 2)}e` } },
    error: /^fallbackConfig has 4097 bytes of JSON; at most 4096 are allowed$/,
  },
  {
    name: 'bytes of the whole config',
    within: bytesOfConfig(BOUNDS.configBytes),
    beyond: bytesOfConfig(BOUNDS.configBytes + 1),
    error: /^config has 65537 bytes of JSON; at most 65536 are allowed$/,
  },
];

void describe('checkSplitterConfigBounds', () => {
  for (const { name, within, beyond, error } of boundCases) {
    void test(`${name}: at the bound passes, one past it is TTS_SPLITTER_INVALID naming field and bound`, () => {
      checkSplitterConfigBounds(validateSplitterConfig(within));
      const valid = validateSplitterConfig(beyond); // the bounds are beyond the spec's rules
      assert.throws(
        () => checkSplitterConfigBounds(valid),
        (e: unknown) => e instanceof AppError && e.code === 'TTS_SPLITTER_INVALID' && error.test(e.message),
      );
    });
  }
});
