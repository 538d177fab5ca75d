import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { splitText, parseTags, type Utterance } from './split-text.js';
import { validateSplitterConfig, type SplitterConfig } from './splitter-config.js';

/** Compact expectation: [text, params, marker]. */
type Row = [string, Record<string, unknown>, string | null];

const A = { voiceId: 'a' };
const B = { voiceId: 'b' };
const F = { voiceId: 'f', speechRate: 1 };

const moods = {
  // Declaration order matters: the first matching entry wins.
  angryShout: { tags: [['angry', 'loud']], voiceId: 'shout' },
  angry: { tags: ['angry', 'mad'], voiceId: 'angry' },
  calm: { tags: ['calm'], speechRate: 0.8 },
};

/** `José` composed (NFC: é is U+00E9) and decomposed (NFD: e + U+0301). */
const JOSE_NFC = '<Jos\u00e9>';
const JOSE_NFD = '<Jose\u0301>';

const cases: Array<{ name: string; config: unknown; text: string; want: Row[] }> = [
  {
    name: 'a marker typed decomposed matches the key saved composed (NFC)',
    config: { [JOSE_NFC]: A, '<B>': B },
    text: `${JOSE_NFD}Hola.<B>Hi.`,
    want: [
      ['Hola.', A, JOSE_NFC],
      ['Hi.', B, '<B>'],
    ],
  },
  {
    name: 'a key saved decomposed matches the marker typed composed, and the text comes out NFC',
    config: { [JOSE_NFD]: A },
    text: `${JOSE_NFC}Cafe\u0301.`,
    want: [['Caf\u00e9.', A, JOSE_NFC]],
  },
  {
    name: 'lookup tags compare in NFC too',
    config: { splitterMarks: ['[]'], lookupTable: { e: { tags: ['re\u0301sume\u0301'], voiceId: 'r' } } },
    text: '[r\u00e9sum\u00e9]Read it.',
    want: [['Read it.', { voiceId: 'r' }, '[r\u00e9sum\u00e9]']],
  },
  {
    name: 'two placeholders alternating',
    config: { '<CharacterA>': A, '<CharacterB>': B },
    text: '<CharacterA>Hi.<CharacterB>Hello.<CharacterA> Bye. ',
    want: [
      ['Hi.', A, '<CharacterA>'],
      ['Hello.', B, '<CharacterB>'],
      ['Bye.', A, '<CharacterA>'],
    ],
  },
  {
    name: 'rate-only placeholder keeps the current voice',
    config: { '<A>': A, '<B>': B, '[faster_speech:1.2]': { speechRate: 1.2 } },
    text: '<B>One.[faster_speech:1.2]Two.<A>Three.',
    want: [
      ['One.', B, '<B>'],
      ['Two.', { voiceId: 'b', speechRate: 1.2 }, '[faster_speech:1.2]'],
      ['Three.', { voiceId: 'a', speechRate: 1.2 }, '<A>'],
    ],
  },
  {
    name: 'rate-only placeholder on top of fallback text',
    config: { fallbackConfig: F, '[slow]': { speechRate: 0.5 } },
    text: 'Intro.[slow]Slowly.',
    want: [
      ['Intro.', F, null],
      ['Slowly.', { voiceId: 'f', speechRate: 0.5 }, '[slow]'],
    ],
  },
  {
    name: 'several bracket pairs: [] 【】 <>',
    config: { splitterMarks: ['[]', '【】', '<>'], lookupTable: moods },
    text: '[calm]Quiet.【angry】Grr.<mad>Hmph.',
    want: [
      ['Quiet.', { speechRate: 0.8 }, '[calm]'],
      ['Grr.', { speechRate: 0.8, voiceId: 'angry' }, '【angry】'],
      ['Hmph.', { speechRate: 0.8, voiceId: 'angry' }, '<mad>'],
    ],
  },
  {
    name: 'tags separated by , | and whitespace',
    config: { fallbackConfig: F, splitterMarks: ['[]'], lookupTable: moods },
    text: '[x,loud]One.[x|angry]Two.[ loud \t angry ]Three.[loud,,|angry]Four.',
    want: [
      ['One.', F, '[x,loud]'],
      ['Two.', { ...F, voiceId: 'angry' }, '[x|angry]'],
      ['Three.', { ...F, voiceId: 'shout' }, '[ loud \t angry ]'],
      ['Four.', { ...F, voiceId: 'shout' }, '[loud,,|angry]'],
    ],
  },
  {
    name: 'AND element needs all of its tags',
    config: {
      fallbackConfig: F,
      splitterMarks: ['[]'],
      lookupTable: { both: { tags: [['a', 'b']], voiceId: 'ab' } },
    },
    text: '[a]One.[b]Two.[b a]Three.',
    want: [
      ['One.', F, '[a]'],
      ['Two.', F, '[b]'],
      ['Three.', { ...F, voiceId: 'ab' }, '[b a]'],
    ],
  },
  {
    name: 'first match wins among overlapping entries',
    config: {
      splitterMarks: ['[]'],
      lookupTable: {
        first: { tags: ['x', 'y'], voiceId: '1' },
        second: { tags: ['y'], voiceId: '2' },
        third: { tags: ['z'], voiceId: '3' },
      },
    },
    text: '[y]One.[z y]Two.[z]Three.',
    want: [
      ['One.', { voiceId: '1' }, '[y]'],
      ['Two.', { voiceId: '1' }, '[z y]'],
      ['Three.', { voiceId: '3' }, '[z]'],
    ],
  },
  {
    name: 'matched entry params merge over those in force; tags are not a param',
    config: {
      '<A>': { voiceId: 'a', speechRate: 1.5, style: 's' },
      splitterMarks: ['[]'],
      lookupTable: { c: { tags: ['c'], voiceId: 'c' } },
    },
    text: '<A>One.[c]Two.',
    want: [
      ['One.', { voiceId: 'a', speechRate: 1.5, style: 's' }, '<A>'],
      ['Two.', { voiceId: 'c', speechRate: 1.5, style: 's' }, '[c]'],
    ],
  },
  {
    name: 'unmatched bracket with fallback: exactly fallback params, nothing inherited',
    config: {
      fallbackConfig: F,
      '<A>': { voiceId: 'a', style: 's' },
      splitterMarks: ['[]'],
      lookupTable: moods,
    },
    text: '<A>One.[nope]Two.',
    want: [
      ['One.', { voiceId: 'a', speechRate: 1, style: 's' }, '<A>'],
      ['Two.', F, '[nope]'],
    ],
  },
  {
    name: 'unmatched bracket without fallback: text dropped, next marker inherits nothing',
    config: { '<A>': A, '[fast]': { speechRate: 2 }, splitterMarks: ['()'], lookupTable: moods },
    text: '<A>One.(nope)Dropped.[fast]Two.',
    want: [
      ['One.', A, '<A>'],
      ['Two.', { speechRate: 2 }, '[fast]'],
    ],
  },
  {
    name: 'fallback present: text before any marker is spoken with fallback',
    config: { fallbackConfig: F, '<A>': A },
    text: '  Narrator.  <A>Hi.',
    want: [
      ['Narrator.', F, null],
      ['Hi.', { ...F, voiceId: 'a' }, '<A>'],
    ],
  },
  {
    name: 'fallback absent: text before any marker is dropped',
    config: { '<A>': A },
    text: 'Narrator.<A>Hi.',
    want: [['Hi.', A, '<A>']],
  },
  {
    name: 'fallback only: whole text is one utterance',
    config: { fallbackConfig: F },
    text: '\n Just text. \n',
    want: [['Just text.', F, null]],
  },
  {
    name: 'adjacent markers: the empty utterance is dropped but its params carry on',
    config: { '<A>': A, '<B>': B, '[fast]': { speechRate: 2 } },
    text: '<A><B>[fast]  Hi.',
    want: [['Hi.', { voiceId: 'b', speechRate: 2 }, '[fast]']],
  },
  {
    name: 'marker at the end of the text',
    config: { '<A>': A, '<B>': B },
    text: '<A>Hi.<B>',
    want: [['Hi.', A, '<A>']],
  },
  {
    name: 'unicode text with Chinese and emoji',
    config: {
      '<角色A>': A,
      '<B>': B,
      splitterMarks: ['【】'],
      lookupTable: { h: { tags: ['开心'], voiceId: 'happy' } },
    },
    text: '<角色A>你好，世界！😀<B>👋🏽 再见【开心】哈哈🎉',
    want: [
      ['你好，世界！😀', A, '<角色A>'],
      ['👋🏽 再见', B, '<B>'],
      ['哈哈🎉', { voiceId: 'happy' }, '【开心】'],
    ],
  },
  {
    name: 'emoji bracket pair',
    config: { splitterMarks: ['😀😁'], lookupTable: { h: { tags: ['h'], voiceId: 'h' } } },
    text: '😀h😁Hi.',
    want: [['Hi.', { voiceId: 'h' }, '😀h😁']],
  },
  {
    name: 'a key that is a prefix of another: longest wins',
    config: { '<A>': A, '<A2>': B, '<A': { voiceId: 'short' } },
    text: '<A2>One.<A>Two.<A Three.',
    want: [
      ['One.', B, '<A2>'],
      ['Two.', A, '<A>'],
      ['Three.', { voiceId: 'short' }, '<A'],
    ],
  },
  {
    name: 'empty bracket pair matches nothing',
    config: {
      fallbackConfig: F,
      splitterMarks: ['[]'],
      lookupTable: { all: { tags: [[], ''], voiceId: 'x' } },
    },
    text: 'One.[]Two.[ , ]Three.',
    want: [
      ['One.', F, null],
      ['Two.', F, '[]'],
      ['Three.', F, '[ , ]'],
    ],
  },
  {
    name: 'a literal key that looks like a bracket span wins over the span',
    config: {
      '[faster_speech:1.2]': { speechRate: 1.2 },
      '<A>': A,
      splitterMarks: ['[]'],
      lookupTable: { f: { tags: ['faster_speech:1.2'], voiceId: 'lookup' } },
    },
    text: '<A>One.[faster_speech:1.2]Two.',
    want: [
      ['One.', A, '<A>'],
      ['Two.', { voiceId: 'a', speechRate: 1.2 }, '[faster_speech:1.2]'],
    ],
  },
  {
    name: 'unterminated open bracket is plain text; later markers still count',
    config: { fallbackConfig: F, '<A>': A, splitterMarks: ['[]'], lookupTable: moods },
    text: 'Price [approx. 5.<A>Hi [ there',
    want: [
      ['Price [approx. 5.', F, null],
      ['Hi [ there', { ...F, voiceId: 'a' }, '<A>'],
    ],
  },
  {
    name: 'a bracket span is taken whole: a key inside it is tag text',
    config: {
      fallbackConfig: F,
      '<A>': A,
      splitterMarks: ['[]'],
      lookupTable: { a: { tags: ['<A>'], voiceId: 'tagged' } },
    },
    text: 'One.[<A>]Two.',
    want: [
      ['One.', F, null],
      ['Two.', { ...F, voiceId: 'tagged' }, '[<A>]'],
    ],
  },
  {
    name: 'marks sharing an open character: the span closing first wins',
    config: {
      fallbackConfig: F,
      splitterMarks: ['[}', '[]'],
      lookupTable: { x: { tags: ['x'], voiceId: 'x' } },
    },
    text: '[x]One.}Two.',
    want: [['One.}Two.', { ...F, voiceId: 'x' }, '[x]']],
  },
  {
    name: 'open and close the same character',
    config: { splitterMarks: ['**'], lookupTable: { x: { tags: ['x'], voiceId: 'x' } } },
    text: '*x*One.*',
    want: [['One.*', { voiceId: 'x' }, '*x*']],
  },
  {
    name: 'tags are case-sensitive and exact',
    config: { fallbackConfig: F, splitterMarks: ['[]'], lookupTable: moods },
    text: '[Calm]One.[calmer]Two.',
    want: [
      ['One.', F, '[Calm]'],
      ['Two.', F, '[calmer]'],
    ],
  },
  {
    name: 'marks without lookupTable: every bracket is unmatched',
    config: { fallbackConfig: F, splitterMarks: ['[]'] },
    text: 'One.[x]Two.',
    want: [
      ['One.', F, null],
      ['Two.', F, '[x]'],
    ],
  },
  {
    name: 'a "__proto__" placeholder key is an ordinary key',
    config: JSON.parse('{"__proto__": {"voiceId": "p"}}') as unknown,
    text: '__proto__Hi.',
    want: [['Hi.', { voiceId: 'p' }, '__proto__']],
  },
  {
    name: 'empty text',
    config: { fallbackConfig: F },
    text: '',
    want: [],
  },
  {
    name: 'a pause tag stays in its utterance, never a bracket marker, whatever the marks',
    config: {
      fallbackConfig: F,
      splitterMarks: ['[]', '<>'],
      lookupTable: {
        pause: { tags: ['pause:1s', 'pause', 'break'], voiceId: 'p' },
        a: { tags: ['A'], ...A },
      },
    },
    text: '<A>Hi [pause:1s] there <break time="500ms"/> you. [pause] <A>Again.',
    want: [
      ['Hi [pause:1s] there <break time="500ms"/> you.', { ...F, ...A }, '<A>'],
      // `[pause]` is not a pause tag: an ordinary bracket marker, here with nothing to speak.
      ['Again.', { ...F, ...A }, '<A>'],
    ],
  },
  {
    name: 'a placeholder key inside a pause tag does not count; keys around it do',
    config: { '<A>': A, '<B>': B, pause: B, '1s': B },
    text: '<A>One [pause:1s] two<B>Three [pause:250ms]',
    want: [
      ['One [pause:1s] two', A, '<A>'],
      ['Three [pause:250ms]', B, '<B>'],
    ],
  },
];

function rows(utterances: Utterance[]): Row[] {
  return utterances.map((u) => [u.text, u.params, u.marker]);
}

void describe('splitText', () => {
  for (const { name, config, text, want } of cases) {
    void test(name, () => {
      assert.deepEqual(rows(splitText(text, validateSplitterConfig(config))), want);
    });
  }

  void test('each utterance gets its own params object', () => {
    const config = validateSplitterConfig({ fallbackConfig: { voiceId: 'f' }, '<A>': A });
    const [first, second, third] = splitText('x<A>y<A>z', config);
    assert.ok(first && second && third);
    assert.notEqual(second.params, third.params);
    second.params.voiceId = 'mutated';
    assert.equal(third.params.voiceId, 'a');
    assert.equal(config.fallbackConfig?.voiceId, 'f');
  });

  void test('10,000-character texts split correctly, including many unterminated brackets', () => {
    const config = validateSplitterConfig({
      fallbackConfig: F,
      '<A>': A,
      '<B>': B,
      splitterMarks: ['[]', '<>', '【】'],
      lookupTable: moods,
    });

    // No bracket ever closes: every character is plain text, spoken whole with the fallback.
    const unterminated = '[<'.repeat(5000);
    assert.equal(unterminated.length, 10_000);
    assert.deepEqual(rows(splitText(unterminated, config)), [[unterminated, F, null]]);

    // 333 whole dialogue turns and a cut-off last one. [calm] keeps the voice and sets the rate,
    // which then stays in force for every later placeholder (they set no rate of their own).
    const unit = '<A>Hi there. <B>Hello! [calm] ';
    const dialogue = unit.repeat(340).slice(0, 10_000);
    assert.equal(dialogue.length, 10_000);
    const turns = Math.floor(10_000 / unit.length);
    const want: Row[] = [];
    for (let k = 0; k < turns; k++) {
      const rate = k === 0 ? 1 : 0.8;
      want.push(
        ['Hi there.', { voiceId: 'a', speechRate: rate }, '<A>'],
        ['Hello!', { voiceId: 'b', speechRate: rate }, '<B>'],
      );
    }
    want.push([dialogue.slice(turns * unit.length + '<A>'.length), { voiceId: 'a', speechRate: 0.8 }, '<A>']);
    assert.equal(want.length, 667);
    assert.deepEqual(rows(splitText(dialogue, config)), want);

    // One span from the first 【 to the only 】: a single unmatched marker and nothing spoken.
    const oneSpan = '【'.repeat(9999) + '】';
    assert.equal(oneSpan.length, 10_000);
    assert.deepEqual(rows(splitText(oneSpan, config)), []);
    assert.deepEqual(rows(splitText(`${oneSpan} tail`, config)), [['tail', F, oneSpan]]);
  });
});

void describe('parseTags', () => {
  void test('splits on , | and whitespace and drops empty tags', () => {
    assert.deepEqual(parseTags(' a,b|c  d\n\te,,|'), ['a', 'b', 'c', 'd', 'e']);
    assert.deepEqual(parseTags(''), []);
  });
});

// ---- property tests ----

const PLAIN = [...'ab xy,|.\n你好😀'];
const plainText = fc.array(fc.constantFrom(...PLAIN), { maxLength: 12 }).map((cs) => cs.join(''));
const tagWord = fc.constantFrom('x', 'y', 'z', '开心');
const innerText = fc
  .array(fc.tuple(tagWord, fc.constantFrom(',', '|', ' ', ' , ')), { maxLength: 3 })
  .map((ps) => ps.flat().join(''));
// Keys are built from characters absent from PLAIN and inner text, so plain text never forms one.
const keyText = fc
  .array(fc.constantFrom('A', 'B', 'C'), { minLength: 1, maxLength: 3 })
  .chain((body) => fc.constantFrom(`<${body.join('')}>`, `<${body.join('')}`, `[${body.join('')}]`));
const MARKS = ['[]', '<>', '【】', '()'];
const tagElement = fc.oneof(tagWord, fc.array(tagWord, { maxLength: 2 }));
const params = fc.record(
  { voiceId: fc.constantFrom('v1', 'v2'), speechRate: fc.constantFrom(0.5, 1, 2) },
  { requiredKeys: [] },
);

const configArb = fc.record({
  keys: fc.uniqueArray(keyText, { maxLength: 4 }),
  keyParams: fc.array(params, { minLength: 4, maxLength: 4 }),
  marks: fc.subarray(MARKS),
  entries: fc.array(fc.tuple(fc.array(tagElement, { minLength: 1, maxLength: 3 }), params), { maxLength: 3 }),
  fallback: fc.option(
    params.map((p) => ({ ...p, voiceId: p.voiceId ?? 'fb' })),
    { nil: undefined },
  ),
});

type ConfigShape = typeof configArb extends fc.Arbitrary<infer T> ? T : never;

function buildConfig(c: ConfigShape): SplitterConfig {
  const raw: Record<string, unknown> = {};
  c.keys.forEach((k, i) => (raw[k] = c.keyParams[i] ?? {}));
  raw.splitterMarks = c.marks;
  raw.lookupTable = Object.fromEntries(c.entries.map(([tags, p], i) => [`e${i}`, { tags, ...p }]));
  if (c.fallback !== undefined) raw.fallbackConfig = c.fallback;
  return validateSplitterConfig(raw);
}

/** A text as alternating plain pieces and markers (keys of the config or bracket spans of its marks). */
const scriptArb = configArb.chain((c) => {
  const markerArbs = [
    ...(c.keys.length > 0 ? [fc.constantFrom(...c.keys)] : []),
    ...(c.marks.length > 0
      ? [
          fc.tuple(fc.constantFrom(...c.marks), innerText).map(([m, inner]) => {
            const [o, cl] = [...m];
            return `${o}${inner}${cl}`;
          }),
        ]
      : []),
  ];
  const piece =
    markerArbs.length > 0
      ? fc.oneof(
          plainText.map((t) => ({ plain: t })),
          fc.oneof(...markerArbs).map((m) => ({ marker: m })),
        )
      : plainText.map((t) => ({ plain: t }));
  return fc.tuple(fc.constant(c), fc.array(piece, { maxLength: 10 }));
});

const noWs = (s: string): string => s.replace(/\s+/gu, '');

void describe('splitText properties', () => {
  void test('never throws on arbitrary text, and every utterance is trimmed, non-empty text from the input', () => {
    const anyText = fc.oneof(
      fc.string({ unit: 'grapheme', maxLength: 60 }),
      fc
        .array(fc.constantFrom(...PLAIN, '<', '>', '[', ']', '【', '】', '(', ')', 'A', 'B', 'C'), {
          maxLength: 60,
        })
        .map((cs) => cs.join('')),
    );
    fc.assert(
      fc.property(configArb, anyText, (c, text) => {
        const out = splitText(text, buildConfig(c));
        const normal = text.normalize('NFC'); // what the split reads
        for (const u of out) {
          assert.ok(u.text.length > 0 && u.text === u.text.trim());
          assert.ok(normal.includes(u.text));
          if (u.marker !== null) assert.ok(normal.includes(u.marker));
        }
      }),
      { numRuns: 500 },
    );
  });

  void test('with a fallbackConfig no non-marker text is lost: joined utterances equal the input minus markers', () => {
    fc.assert(
      fc.property(scriptArb, ([c, pieces]) => {
        const config = buildConfig({ ...c, fallback: c.fallback ?? { voiceId: 'fb' } });
        const text = pieces.map((p) => ('plain' in p ? p.plain : p.marker)).join('');
        const expected = pieces.map((p) => ('plain' in p ? p.plain : '')).join('');
        const out = splitText(text, config);
        assert.equal(noWs(out.map((u) => u.text).join('')), noWs(expected));
        for (const u of out) assert.equal(typeof u.params.voiceId, 'string');
      }),
      { numRuns: 500 },
    );
  });

  void test('without a fallbackConfig the spoken text is a subsequence of the lossless split', () => {
    fc.assert(
      fc.property(scriptArb, ([c, pieces]) => {
        const text = pieces.map((p) => ('plain' in p ? p.plain : p.marker)).join('');
        const withFallback = splitText(text, buildConfig({ ...c, fallback: { voiceId: 'fb' } }));
        const without = splitText(text, buildConfig({ ...c, fallback: undefined }));
        // Same markers split the text the same way; dropping only removes whole utterances.
        let j = 0;
        for (const u of without) {
          while (j < withFallback.length && withFallback[j]?.text !== u.text) j++;
          assert.ok(
            j < withFallback.length,
            `utterance ${JSON.stringify(u.text)} not found in the lossless split`,
          );
          j++;
        }
      }),
      { numRuns: 300 },
    );
  });
});
