// The hosted API's generation value sets and their normalisation.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  detectLanguage,
  lenientItem,
  normalizeLanguage,
  PRESETS,
  presetStyle,
  type Language,
} from './generation-params.js';

describe('normalizeLanguage', () => {
  const cases: [string, Language | 'auto' | undefined][] = [
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
    ['xx', undefined],
    ['klingon', undefined],
    ['', undefined],
    ['en--us', undefined],
  ];
  for (const [tag, expected] of cases) {
    it(`${JSON.stringify(tag)} → ${String(expected)}`, () => assert.equal(normalizeLanguage(tag), expected));
  }
});

// Short texts, the kind chat plugins send: how often `auto` picks the right language. The figure is
// printed and documented in docs/compatibility.md; the floor only guards against a regression.
const SHORT_TEXTS: [string, Language][] = [
  ['Hello there!', 'en-us'],
  ['Good morning, how are you?', 'en-us'],
  ['Thanks a lot.', 'en-us'],
  ['See you tomorrow.', 'en-us'],
  ['What time is it?', 'en-us'],
  ['Bonjour à tous.', 'fr-fr'],
  ['Merci beaucoup !', 'fr-fr'],
  ['Je ne sais pas.', 'fr-fr'],
  ['Où est la gare ?', 'fr-fr'],
  ['Guten Morgen!', 'de'],
  ['Wie geht es dir?', 'de'],
  ['Ich weiß es nicht.', 'de'],
  ['Vielen Dank für alles.', 'de'],
  ['¿Dónde está el baño?', 'es'],
  ['Muchas gracias.', 'es'],
  ['No lo sé.', 'es'],
  ['Buenas noches a todos.', 'es'],
  ['Obrigado pela ajuda.', 'pt'],
  ['Onde fica a estação?', 'pt'],
  ['Não sei, talvez amanhã.', 'pt'],
  ['Bom dia, tudo bem?', 'pt'],
  ['你好', 'zh'],
  ['今天天气很好。', 'zh'],
  ['谢谢你的帮助。', 'zh'],
  ['こんにちは', 'ja'],
  ['ありがとうございます。', 'ja'],
  ['今日はいい天気ですね。', 'ja'],
  ['안녕하세요', 'ko'],
  ['감사합니다.', 'ko'],
  ['오늘 날씨가 좋네요.', 'ko'],
];

describe('detectLanguage (language: "auto")', () => {
  it('knows the language of most short texts; undefined when it cannot tell', () => {
    const right = SHORT_TEXTS.filter(([text, lang]) => detectLanguage(text) === lang);
    const accuracy = right.length / SHORT_TEXTS.length;
    console.log(
      `auto-detection on ${SHORT_TEXTS.length} short texts: ${(accuracy * 100).toFixed(0)} % right`,
    );
    assert.ok(accuracy >= 0.8, `accuracy ${accuracy}`);
    // Scripts decide Chinese, Japanese and Korean even for one word.
    assert.equal(detectLanguage('你好'), 'zh');
    assert.equal(detectLanguage('こんにちは'), 'ja');
    assert.equal(detectLanguage('안녕'), 'ko');
    assert.equal(detectLanguage('12345 !!!'), undefined);
  });
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
