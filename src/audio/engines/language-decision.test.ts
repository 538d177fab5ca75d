// The language decisions as a table: a text, the `language` asked for and a voice's engine binding →
// the languages its sentences are spoken in, or the refusal. What each engine can speak comes from
// the real providers (espeak-ng's catalogue, Flite's voices, a configured remote endpoint).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { createEngineRegistry, type VoiceBinding } from './engine-registry.js';
import {
  decideLanguages,
  dominantScript,
  languageAt,
  refusalMessage,
  type LanguageDecision,
  type VoiceLanguages,
} from './language-decision.js';

const registry = createEngineRegistry({
  remoteEndpoints: { studio: { baseUrl: 'http://127.0.0.1:9/v1' } },
});
after(() => registry.close());

const BINDINGS = {
  espeak: { engine: 'espeak', voice: 'en-us' },
  espeakGerman: { engine: 'espeak', voice: 'de' },
  flite: { engine: 'flite', voice: 'kal16' },
  remote: { engine: 'remote', endpoint: 'studio', voice: 'nova' },
} as const satisfies Record<string, VoiceBinding>;
type Voice = keyof typeof BINDINGS;

const voices = new Map<Voice, VoiceLanguages>();
before(async () => {
  for (const [name, binding] of Object.entries(BINDINGS))
    voices.set(name as Voice, await registry.languagesFor(binding));
});

const FRENCH =
  'Le chat dort sur le canapé depuis ce matin. Je voudrais réserver une table pour deux personnes ce soir. ' +
  'Il pleut depuis trois jours et les rues sont inondées. Bonjour, comment allez-vous ? ' +
  'Est-ce que tu veux venir avec nous au cinéma ?';
const ARABIC = 'مرحبا بكم في بيتنا الجديد.';
const ENGLISH = 'Hello there, my friend, how have you been lately?';
const MIXED = `${ENGLISH} ${ARABIC} Goodbye for now and see you next week, my friend!`;
const THREE =
  'Le chat dort sur le canapé depuis ce matin. The meeting has been moved to Thursday afternoon because of the holiday. ' +
  'Ich habe heute keine Zeit, weil ich arbeiten muss.';

/** What a case expects: the decision's languages, or the refusal's field and language. */
type Expected =
  { language?: string; runs?: [string, string][] } | { refused: 'language' | 'text'; language: string };

const CASES: [string, string | undefined, Voice, Expected][] = [
  // Short English that trigrams alone call French or Portuguese keeps the voice's language.
  ['Is it raining? I like you.', 'auto', 'espeak', {}],
  ['Nice to see you, Maria.', 'auto', 'espeak', {}],
  ['Is it raining? I like you.', 'auto', 'flite', {}],
  ['Nice to see you, Maria.', 'auto', 'flite', {}],
  ['Thanks a lot. See you tomorrow.', 'auto', 'espeak', {}],
  ['Could you speak a little more slowly?', 'auto', 'espeak', {}],
  // Short lines in another language are ambiguous too: the voice's language.
  ['Bonjour à tous.', 'auto', 'espeak', {}],
  // A clear paragraph switches, to the engine's voice for it.
  [FRENCH, 'auto', 'espeak', { language: 'fr' }],
  // Flite speaks English only: nothing to switch to, and the script is its own (not refused).
  [FRENCH, 'auto', 'flite', {}],
  // Another script is confident at any length.
  [ARABIC, 'auto', 'espeak', { language: 'ar' }],
  // Without a language the voice speaks its own: detection is what `auto` asks for.
  [ARABIC, undefined, 'espeak', {}],
  [ARABIC, undefined, 'flite', {}],
  ['Привет, как дела? Я очень рад тебя видеть сегодня вечером.', 'auto', 'espeak', { language: 'ru' }],
  ['Καλημέρα σας.', 'auto', 'espeak', { language: 'el' }],
  ['שלום עולם.', 'auto', 'espeak', { language: 'he' }],
  ['你好', 'auto', 'espeak', { language: 'zh' }],
  ['こんにちは', 'auto', 'espeak', { language: 'ja' }],
  ['안녕', 'auto', 'espeak', { language: 'ko' }],
  ['12345 !!!', 'auto', 'espeak', {}],
  // … and refused when no voice of the engine speaks that script.
  [ARABIC, 'auto', 'flite', { refused: 'text', language: 'ar' }],
  [MIXED, 'auto', 'flite', { refused: 'text', language: 'ar' }],
  ['你好', 'auto', 'flite', { refused: 'text', language: 'zh' }],
  [ARABIC, 'en-us', 'flite', { refused: 'text', language: 'ar' }],
  // An explicit language: kept when the engine speaks it, refused when no voice of it does.
  ['Hello.', 'ar', 'espeak', { language: 'ar' }],
  ['Hello.', 'ar', 'flite', { refused: 'language', language: 'ar' }],
  ['Bonjour.', 'fr-fr', 'flite', { refused: 'language', language: 'fr-fr' }],
  ['Hello.', 'en-us', 'flite', { language: 'en-us' }],
  // The caller's word beats the script where the engine can speak the script at all.
  [ARABIC, 'en-us', 'espeak', { language: 'en-us' }],
  // Mixed texts decide per sentence.
  [
    MIXED,
    'auto',
    'espeak',
    {
      runs: [
        ['', 'en-us'],
        [ARABIC, 'ar'],
        ['Goodbye', 'en-us'],
      ],
    },
  ],
  [
    THREE,
    'auto',
    'espeak',
    {
      runs: [
        ['', 'fr'],
        ['The meeting', 'en-us'],
        ['Ich habe', 'de'],
      ],
    },
  ],
  // The prior is the binding's language: a German voice keeps short German, switches clear English.
  [
    'Guten Morgen! Wie geht es dir? The meeting has been moved to Thursday afternoon because of the holiday.',
    'auto',
    'espeakGerman',
    {
      runs: [
        ['', 'de'],
        ['The meeting', 'en'],
      ],
    },
  ],
  // A remote engine decides itself: never refused, given what was asked.
  [ARABIC, 'auto', 'remote', {}],
  ['Hello.', 'ar', 'remote', { language: 'ar' }],
  ['Hello.', 'tlh', 'remote', { language: 'tlh' }],
];

/** The decision in the table's terms (runs by the text they start with). */
function observed(text: string, decision: LanguageDecision): Expected {
  if (!decision.ok) return { refused: decision.refusal.field, language: decision.refusal.language };
  const { language, languages } = decision.spoken;
  return {
    ...(language !== undefined && { language }),
    ...(languages !== undefined && {
      runs: languages.map((run): [string, string] => [run.at === 0 ? '' : text.slice(run.at), run.language]),
    }),
  };
}

describe('language decisions (text × requested language × voice binding)', () => {
  for (const [text, requested, voice, expected] of CASES) {
    it(`${JSON.stringify(text.slice(0, 40))} · ${requested ?? '(none)'} · ${voice}`, () => {
      const languages = voices.get(voice);
      assert.ok(languages !== undefined);
      const got = observed(text, decideLanguages(text, requested, languages));
      if ('runs' in expected && expected.runs !== undefined && 'runs' in got && got.runs !== undefined) {
        // Runs are compared by the start of the text they begin at.
        assert.equal(got.runs.length, expected.runs.length, JSON.stringify(got));
        expected.runs.forEach(([start, language], i) => {
          assert.ok(got.runs?.[i]?.[0].startsWith(start), JSON.stringify(got));
          assert.equal(got.runs?.[i]?.[1], language, JSON.stringify(got));
        });
        assert.equal('language' in got, 'language' in expected, JSON.stringify(got));
      } else assert.deepEqual(got, expected);
    });
  }

  it('takes the prior from the binding, and the engine languages from its provider', () => {
    assert.deepEqual(
      [voices.get('espeak')?.own, voices.get('flite')?.own, voices.get('espeakGerman')?.own],
      ['en-us', 'en-us', 'de'],
    );
    assert.equal(voices.get('remote')?.speaks, 'any');
    const flite = voices.get('flite')?.speaks;
    assert.ok(flite !== undefined && flite !== 'any');
    assert.ok(
      flite.every((l) => l.startsWith('en')),
      flite.join(', '),
    );
  });

  it('names the language and the engine in refusals', () => {
    const flite = voices.get('flite');
    assert.ok(flite !== undefined);
    const text = decideLanguages(ARABIC, 'auto', flite);
    assert.ok(!text.ok);
    assert.match(refusalMessage('contents[0]', text.refusal), /^contents\[0\]\.text: .*Arabic \(ar\).*flite/);
    const asked = decideLanguages('Hello.', 'ar', flite);
    assert.ok(!asked.ok);
    assert.match(
      refusalMessage('utterances[2]', asked.refusal),
      /^utterances\[2\]\.language: Arabic \(ar\) .*flite/,
    );
  });

  it('reads scripts by letters, and runs by offset', () => {
    assert.deepEqual(dominantScript('I love 東京.'), { script: 'Latn', letters: 7 });
    assert.deepEqual(dominantScript('東京は大きい'), { script: 'Jpan', letters: 6 });
    assert.deepEqual(dominantScript('1 a !'), { script: undefined, letters: 1 });
    const runs = [
      { at: 0, language: 'en-us' },
      { at: 10, language: 'ar' },
    ];
    assert.deepEqual(
      [
        languageAt(runs, 0, 'x'),
        languageAt(runs, 9, 'x'),
        languageAt(runs, 10, 'x'),
        languageAt(undefined, 3, 'x'),
      ],
      ['en-us', 'en-us', 'ar', 'x'],
    );
  });
});
