// The hosted API's generation value sets and their normalisation.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { lenientItem, normalizeLanguage, PRESETS, presetStyle } from './generation-params.js';

describe('normalizeLanguage', () => {
  const cases: [string, string | undefined][] = [
    ['auto', 'auto'],
    ['AUTO', 'auto'],
    ['zh', 'zh'],
    ['zh-CN', 'zh'],
    ['zh_Hans', 'zh'],
    ['zh-HK', 'yue'],
    ['yue', 'yue'],
    ['en', 'en-us'],
    ['en-US', 'en-us'],
    ['en_us', 'en-us'],
    ['en-GB', 'en-us'],
    ['ja', 'ja'],
    ['ja-JP', 'ja'],
    ['ko-KR', 'ko'],
    ['fr', 'fr-fr'],
    ['fr-FR', 'fr-fr'],
    ['fr-CA', 'fr-fr'],
    ['pt-BR', 'pt'],
    ['de-DE', 'de'],
    ['es-419', 'es'],
    // Languages beyond the hosted API's are kept as tags (whether a voice speaks them is decided
    // with the voice); what names no language is not.
    ['ar', 'ar'],
    ['ru-RU', 'ru-ru'],
    ['EL', 'el'],
    ['xx', undefined],
    ['klingon', undefined],
    ['', undefined],
    ['en--us', undefined],
  ];
  for (const [tag, expected] of cases) {
    it(`${JSON.stringify(tag)} → ${String(expected)}`, () => assert.equal(normalizeLanguage(tag), expected));
  }
});

describe('presets', () => {
  it('lists the styles and the v2_/v3_ groups with their _pro variants, each with its style', () => {
    const keys = PRESETS.map((p) => p.key);
    for (const key of ['creative', 'balance', 'stable', 'v2_creative', 'v2_balance', 'v3_stable_pro']) {
      assert.ok(keys.includes(key), key);
    }
    assert.equal(new Set(keys).size, keys.length);
    assert.equal(presetStyle('v3_balance_pro'), 'balance');
    assert.equal(presetStyle('v2_creative'), 'creative');
    assert.equal(presetStyle('vivid'), undefined);
    for (const p of PRESETS) assert.equal(typeof p.config.temperature, 'number');
  });
});

describe('lenientItem (simple-generate)', () => {
  it('drops what it cannot use, keeps what it can, and leaves a wrong-length emo_switch to be refused', () => {
    const item = lenientItem({
      text: 'Hi',
      voiceId: 'v',
      speechRate: 3,
      seed: 2 ** 40,
      language: 'klingon',
      preset: 'vivid',
      emo_switch: [0, 0, 0, 0, 0],
      vivid: 'yes',
      flash: true,
      reference_mode: 'expressive',
      format: 'mp3',
    });
    assert.deepEqual(item, {
      text: 'Hi',
      voiceId: 'v',
      flash: true,
      reference_mode: 'expressive',
      format: 'mp3',
    });
    assert.deepEqual(lenientItem({ emo_switch: [1, 2] }), { emo_switch: [1, 2] });
    assert.deepEqual(lenientItem({ emo_switch: [1, 0, 0, 2, 0], language: 'ja-JP' }), {
      emo_switch: [1, 0, 0, 2, 0],
      language: 'ja-JP',
    });
  });
});
