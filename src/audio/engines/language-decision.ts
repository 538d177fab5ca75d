/**
 * Which language each sentence of a piece is spoken in, decided once when the task is created
 * (pure: no I/O, so large requests decide on the request parser's thread).
 *
 * - The prior is the language of the voice's engine binding (espeak-ng's `en-us`, a Flite voice's
 *   `en-us`), not the voice record's `language` field.
 * - A sentence whose letters are mostly of another script than the prior's (Arabic, Cyrillic,
 *   Greek, Hebrew, Han, kana, Hangul, Devanagari, Thai…) is confidently in a language of that
 *   script: with `auto` it is spoken with the engine's voice for that language; with `auto` or an
 *   explicit language, when no voice of the engine speaks a language of that script, the request
 *   is refused (never minutes of gibberish).
 * - With `auto`, a sentence in the prior's own script switches only on confident trigram evidence
 *   (franc-min, among the languages the engine speaks and the prior): franc's best language beats
 *   the prior by CLEAR_MARGIN with at least MIN_LETTERS letters, or by LIKELY_MARGIN with at least
 *   MIN_CONTEXT_LETTERS letters and the sentence with its neighbours beating it by LIKELY_MARGIN
 *   too (a paragraph's short lines follow it). Short or ambiguous sentences keep the prior.
 * - An explicit language no voice of the engine speaks is refused.
 * - Engines that decide themselves (remote endpoints) are never refused and get no detection.
 * Detection reads at most SAMPLE_CHARS characters of a sentence, so its cost grows with the text
 * and not with the length of one unpunctuated sentence.
 */
import { francAll } from 'franc-min';
import { primaryLanguage } from './provider.js';
import { splitSentences } from './sentences.js';

/** What a voice's engine can speak, for the decision. */
export interface VoiceLanguages {
  /** EngineInfo.id of the voice's engine (named in refusals). */
  engine: string;
  /** The language the voice speaks by itself: the prior. Absent when unknown (engines that decide themselves). */
  own?: string;
  /** Every language some voice of the engine speaks; `any` for engines that decide themselves. */
  speaks: readonly string[] | 'any';
}

/** From `at` (a UTF-16 offset into the piece's text) until the next run, the text is in `language`. */
export interface LanguageRun {
  at: number;
  language: string;
}

/** A piece's languages: one for the whole piece, runs when its sentences differ, or neither (the voice's own). */
export interface SpokenLanguages {
  language?: string;
  languages?: LanguageRun[];
}

/** Why a piece cannot be spoken by its voice's engine. */
export interface LanguageRefusal {
  /** The field at fault: the explicit `language`, or the `text` whose script gave it away. */
  field: 'language' | 'text';
  /** The language that was asked for or detected. */
  language: string;
  /** The engine that speaks no such language. */
  engine: string;
  /** The start of the sentence it was detected in (field `text`). */
  sentence?: string;
}

export type LanguageDecision =
  { ok: true; spoken: SpokenLanguages } | { ok: false; refusal: LanguageRefusal };

/** Letters a sentence needs before trigrams may switch it away from the prior on its own. */
export const MIN_LETTERS = 20;
/** Letters a sentence needs before trigrams may switch it with its neighbours' support. */
export const MIN_CONTEXT_LETTERS = 10;
/** Score gap (franc's normalised scores, best = 1) below the best language that makes the prior clearly wrong. */
export const CLEAR_MARGIN = 0.3;
/** Score gap that makes it likely wrong: the sentence's neighbours must then agree clearly. */
export const LIKELY_MARGIN = 0.2;
/** Letters of one script that make it a sentence's script (with more letters than any other script). */
export const MIN_SCRIPT_LETTERS = 2;
/** Characters of a sentence (and of a sentence with its neighbours) that detection reads. */
export const SAMPLE_CHARS = 200;

/** Scripts told apart by Unicode property; Han and kana are combined afterwards (Japanese uses both). */
const SCRIPTS: readonly [string, RegExp][] = [
  ['Latn', /\p{Script=Latin}/u],
  ['Cyrl', /\p{Script=Cyrillic}/u],
  ['Arab', /\p{Script=Arabic}/u],
  ['Hani', /\p{Script=Han}/u],
  ['Kana', /[\p{Script=Hiragana}\p{Script=Katakana}]/u],
  ['Kore', /\p{Script=Hangul}/u],
  ['Deva', /\p{Script=Devanagari}/u],
  ['Grek', /\p{Script=Greek}/u],
  ['Hebr', /\p{Script=Hebrew}/u],
  ['Thai', /\p{Script=Thai}/u],
  ['Geor', /\p{Script=Georgian}/u],
  ['Armn', /\p{Script=Armenian}/u],
  ['Beng', /\p{Script=Bengali}/u],
  ['Guru', /\p{Script=Gurmukhi}/u],
  ['Gujr', /\p{Script=Gujarati}/u],
  ['Orya', /\p{Script=Oriya}/u],
  ['Taml', /\p{Script=Tamil}/u],
  ['Telu', /\p{Script=Telugu}/u],
  ['Knda', /\p{Script=Kannada}/u],
  ['Mlym', /\p{Script=Malayalam}/u],
  ['Sinh', /\p{Script=Sinhala}/u],
  ['Mymr', /\p{Script=Myanmar}/u],
  ['Ethi', /\p{Script=Ethiopic}/u],
  ['Khmr', /\p{Script=Khmer}/u],
  ['Laoo', /\p{Script=Lao}/u],
  ['Tibt', /\p{Script=Tibetan}/u],
  ['Cher', /\p{Script=Cherokee}/u],
];

/**
 * The scripts (ISO 15924, as ICU's likely subtags give a language's) a text script is written
 * with: Han alone is Chinese or Japanese, Han with kana Japanese.
 */
const LANGUAGE_SCRIPTS: Readonly<Record<string, readonly string[]>> = {
  Hani: ['Hans', 'Hant', 'Jpan'],
  Jpan: ['Jpan'],
};

/** The language a script is read in when nothing else tells (and the engine speaks it). */
const SCRIPT_DEFAULT: Readonly<Record<string, string>> = {
  Latn: 'en',
  Cyrl: 'ru',
  Arab: 'ar',
  Hani: 'zh',
  Jpan: 'ja',
  Kore: 'ko',
  Deva: 'hi',
  Grek: 'el',
  Hebr: 'he',
  Thai: 'th',
  Geor: 'ka',
  Armn: 'hy',
  Beng: 'bn',
  Guru: 'pa',
  Gujr: 'gu',
  Orya: 'or',
  Taml: 'ta',
  Telu: 'te',
  Knda: 'kn',
  Mlym: 'ml',
  Sinh: 'si',
  Mymr: 'my',
  Ethi: 'am',
  Khmr: 'km',
  Laoo: 'lo',
  Tibt: 'bo',
  Cher: 'chr',
};

/** The scripts franc-min ranks languages within by trigrams. */
const TRIGRAM_SCRIPTS: ReadonlySet<string> = new Set(['Latn', 'Cyrl', 'Arab', 'Deva']);

/** franc-min codes ICU does not shorten to the tag engines use. */
const FRANC_TAG: Readonly<Record<string, string>> = { zlm: 'ms', tgl: 'tl', cmn: 'zh' };

const tagCache = new Map<string, string>();
/** The language tag of a franc-min (ISO 639-3) code: `fra` → `fr`, `arb` → `ar`. */
function francTag(code: string): string {
  let tag = tagCache.get(code);
  if (tag === undefined) {
    tag = FRANC_TAG[code] ?? Intl.getCanonicalLocales(code)[0] ?? code;
    tagCache.set(code, tag);
  }
  return tag;
}

const scriptCache = new Map<string, string>();
/** The script a language is written in (ICU's likely subtags); Latin when ICU does not know it. */
export function scriptOfLanguage(tag: string): string {
  const key = tag.toLowerCase();
  let script = scriptCache.get(key);
  if (script === undefined) {
    try {
      script = new Intl.Locale(key).maximize().script ?? 'Latn';
    } catch {
      // Private-use tags such as espeak-ng's `chr-US-Qaaa-x-west`: their primary subtag tells.
      try {
        script = new Intl.Locale(primaryLanguage(key)).maximize().script ?? 'Latn';
      } catch {
        script = 'Latn';
      }
    }
    scriptCache.set(key, script);
  }
  return script;
}

/** Whether text written in `textScript` is in the script of a language written in `languageScript`. */
function sameScript(textScript: string, languageScript: string): boolean {
  return (LANGUAGE_SCRIPTS[textScript] ?? [textScript]).includes(languageScript);
}

const charScripts = new Map<number, string | null>();
/** The script of a letter (null for a character that is not a letter, or of a script not listed). */
function scriptOfChar(ch: string): string | null {
  const code = ch.codePointAt(0) ?? 0;
  if (code < 128) return (code | 32) >= 97 && (code | 32) <= 122 ? 'Latn' : null;
  let script = charScripts.get(code);
  if (script === undefined) {
    script = /\p{L}/u.test(ch) ? (SCRIPTS.find(([, re]) => re.test(ch))?.[0] ?? null) : null;
    charScripts.set(code, script);
  }
  return script;
}

/** The script most of the sample's letters are in (with at least MIN_SCRIPT_LETTERS), and how many letters it has. */
export function dominantScript(sample: string): { script: string | undefined; letters: number } {
  const counts = new Map<string, number>();
  let letters = 0;
  for (const ch of sample) {
    const script = scriptOfChar(ch);
    if (script === null) continue;
    letters++;
    counts.set(script, (counts.get(script) ?? 0) + 1);
  }
  // Japanese writes with Han and kana together: any kana makes Han-and-kana text Japanese.
  const kana = counts.get('Kana') ?? 0;
  if (kana > 0) {
    counts.set('Jpan', kana + (counts.get('Hani') ?? 0));
    counts.delete('Kana');
    counts.delete('Hani');
  }
  let best: string | undefined;
  let bestCount = MIN_SCRIPT_LETTERS - 1;
  for (const [script, count] of counts) {
    if (count > bestCount) [best, bestCount] = [script, count];
  }
  return { script: best, letters };
}

/** A sentence of a piece: its text and where it starts in the piece. */
interface Sentence {
  text: string;
  at: number;
}

function sentencesOf(text: string, language: string | undefined): Sentence[] {
  let from = 0;
  return splitSentences(text, language).map((part) => {
    const found = text.indexOf(part, from);
    const at = found === -1 ? from : found;
    from = at + part.length;
    return { text: part, at };
  });
}

/** franc-min's codes of every language it ranks by trigrams, with their tags. */
const FRANC_LANGUAGES: ReadonlyMap<string, string> = (() => {
  const known = new Map<string, string>();
  // One sample of each script it ranks by trigrams answers every language of that script.
  for (const sample of ['language', 'язык', 'لغة', 'भाषा'])
    for (const [code] of francAll(sample, { minLength: 1 })) known.set(code, francTag(code));
  return known;
})();

/** What a decision ranks among: the languages franc-min knows that the engine speaks, and the prior. */
interface Candidates {
  /** franc-min codes to rank among. */
  only: string[];
  spoken: (tag: string) => boolean;
}

/** franc-min's ranking of a sample among the candidates: [tag, score] best first, the best scoring 1. */
function ranking(sample: string, candidates: Candidates): [string, number][] {
  return francAll(sample.slice(0, SAMPLE_CHARS), { minLength: 1, only: candidates.only })
    .filter(([code]) => code !== 'und')
    .map(([code, score]) => [francTag(code), score]);
}

/** How far below the best language `language` scores (1 when it is not ranked at all). */
function gapOf(ranked: readonly [string, number][], language: string): number {
  const wanted = primaryLanguage(language);
  const found = ranked.find(([tag]) => primaryLanguage(tag) === wanted);
  return found === undefined ? 1 : 1 - found[1];
}

/**
 * The language `sample` is in, among the candidates of `script`, against `assumed` (the prior, or
 * the script's usual language): a language other than `assumed` only when `assumed` scores at
 * least CLEAR_MARGIN below it — or LIKELY_MARGIN below it with the neighbourhood (`around`: the
 * sentence with its neighbours) clearly in that language. Undefined keeps `assumed`.
 */
function evidence(
  sample: string,
  around: () => string | undefined,
  letters: number,
  assumed: string,
  candidates: Candidates,
): string | undefined {
  const ranked = ranking(sample, candidates);
  const best = ranked[0]?.[0];
  if (best === undefined || primaryLanguage(best) === primaryLanguage(assumed)) return undefined;
  if (!candidates.spoken(best)) return undefined;
  const gap = gapOf(ranked, assumed);
  if (gap >= CLEAR_MARGIN && letters >= MIN_LETTERS) return best;
  if (gap < LIKELY_MARGIN || letters < MIN_CONTEXT_LETTERS) return undefined;
  const context = around();
  if (context === undefined || dominantScript(context).letters < 2 * MIN_LETTERS) return undefined;
  const contextRanked = ranking(context, candidates);
  return contextRanked[0]?.[0] === best && gapOf(contextRanked, assumed) >= LIKELY_MARGIN ? best : undefined;
}

/** A sentence with its neighbours, each cut short, for `evidence`; undefined for a sentence alone. */
function neighbourhood(sentences: readonly Sentence[], i: number): string | undefined {
  if (sentences.length < 2) return undefined;
  return [sentences[i - 1], sentences[i], sentences[i + 1]]
    .filter((s): s is Sentence => s !== undefined)
    .map((s) => s.text.slice(0, SAMPLE_CHARS / 2))
    .join(' ');
}

/**
 * Decides the languages of `text` (a piece's trimmed text) for a voice; see the module comment.
 * Without a `language` (undefined) nothing is decided: the voice speaks its own.
 */
export function decideLanguages(
  text: string,
  /** `auto`, an explicit language tag, or undefined (the voice's own). */
  requested: string | undefined,
  voice: VoiceLanguages,
): LanguageDecision {
  // Without a language the voice speaks its own, as it always has: detection is what `auto` asks for.
  if (requested === undefined) return { ok: true, spoken: {} };
  const auto = requested.toLowerCase() === 'auto';
  const explicit = auto ? undefined : requested;
  const { speaks } = voice;
  if (speaks === 'any') return { ok: true, spoken: explicit === undefined ? {} : { language: explicit } };
  const primaries = new Set(speaks.map(primaryLanguage));
  const spoken = (tag: string) => primaries.has(primaryLanguage(tag));
  if (explicit !== undefined && !spoken(explicit))
    return { ok: false, refusal: { field: 'language', language: explicit, engine: voice.engine } };

  const base = explicit ?? voice.own;
  const baseScript = base === undefined ? undefined : scriptOfLanguage(base);
  const basePrimary = base === undefined ? undefined : primaryLanguage(base);
  const only = [...FRANC_LANGUAGES]
    .filter(([, tag]) => spoken(tag) || primaryLanguage(tag) === basePrimary)
    .map(([code]) => code);
  const candidates: Candidates = { only, spoken };
  const isBase = (code: string) => primaryLanguage(FRANC_LANGUAGES.get(code) ?? '') === basePrimary;
  // franc-min cannot vouch against a language it does not know, nor is there anything to switch to
  // when the engine speaks nothing else it knows (Flite: English only).
  const mayDetect = auto && only.some(isBase) && !only.every(isBase);

  const sentences = sentencesOf(text, base);
  const decided: (string | undefined)[] = [];
  for (const [i, sentence] of sentences.entries()) {
    const sample = sentence.text.slice(0, SAMPLE_CHARS);
    const { script, letters } = dominantScript(sample);
    const around = () => neighbourhood(sentences, i);
    if (script === undefined || (baseScript !== undefined && sameScript(script, baseScript))) {
      // The prior's own script: only `auto` may switch, and only on confident trigrams.
      decided.push(
        mayDetect && base !== undefined && script !== undefined && TRIGRAM_SCRIPTS.has(script)
          ? evidence(sample, around, letters, base, candidates)
          : undefined,
      );
      continue;
    }
    const options = speaks.filter((tag) => sameScript(script, scriptOfLanguage(tag)));
    const usual = SCRIPT_DEFAULT[script] ?? script;
    if (options.length === 0) {
      return {
        ok: false,
        refusal: {
          field: 'text',
          language: usual,
          engine: voice.engine,
          sentence: sentence.text.slice(0, 40),
        },
      };
    }
    if (explicit !== undefined) {
      // An explicit language is the caller's word; the script only decides what no one said.
      decided.push(undefined);
      continue;
    }
    // Another script: the engine's voice for the script's usual language, unless trigrams clearly
    // say another language of the script (Ukrainian, Persian, Nepali…).
    const assumed = spoken(usual) ? usual : (options[0] ?? usual);
    const other = TRIGRAM_SCRIPTS.has(script)
      ? evidence(sample, around, letters, assumed, candidates)
      : undefined;
    decided.push(other !== undefined && sameScript(script, scriptOfLanguage(other)) ? other : assumed);
  }
  return { ok: true, spoken: spokenLanguages(sentences, decided, explicit, base) };
}

/** The decided sentence languages as stored with the piece: one language, runs, or neither. */
function spokenLanguages(
  sentences: readonly Sentence[],
  decided: readonly (string | undefined)[],
  explicit: string | undefined,
  base: string | undefined,
): SpokenLanguages {
  const whole = explicit === undefined ? {} : { language: explicit };
  const switched = decided.filter((d) => d !== undefined);
  const first = switched[0];
  if (first === undefined) return whole;
  if (switched.length === decided.length && switched.every((d) => d === first)) return { language: first };
  const runs: LanguageRun[] = [];
  sentences.forEach((sentence, i) => {
    const language = decided[i] ?? base ?? '';
    if (runs.at(-1)?.language !== language) runs.push({ at: runs.length === 0 ? 0 : sentence.at, language });
  });
  return { ...whole, languages: runs };
}

/** The language of `at` (a UTF-16 offset into the piece's text) in `runs`, or `fallback` before the first. */
export function languageAt(
  runs: readonly LanguageRun[] | undefined,
  at: number,
  fallback: string | undefined,
): string | undefined {
  let language = fallback;
  for (const run of runs ?? []) {
    if (run.at > at) break;
    language = run.language;
  }
  return language;
}

const displayNames = new Intl.DisplayNames(['en'], { type: 'language', fallback: 'none' });

/** A language's English name, when ICU knows one (`ar` → Arabic). */
export function languageName(tag: string): string | undefined {
  try {
    return displayNames.of(tag);
  } catch {
    return undefined;
  }
}

/** The message of a refusal, the field named after `where` (`contents[0]`). */
export function refusalMessage(where: string, refusal: LanguageRefusal): string {
  const name = languageName(refusal.language);
  const language = name === undefined ? refusal.language : `${name} (${refusal.language})`;
  const nobody = `no voice of the voice's engine (${refusal.engine}) speaks it`;
  if (refusal.field === 'language') return `${where}.language: ${language} is not supported: ${nobody}`;
  return `${where}.text: ${JSON.stringify(refusal.sentence ?? '')} is in ${language}, which is not supported: ${nobody}`;
}
