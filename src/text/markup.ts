/**
 * Inline markup in the text of a piece: pause tags, and the symbols speech engines would lose.
 *
 * `parseMarkup` turns a text into ordered segments, text or pause. The pause forms (the only
 * markup; docs/text-markup.md has the table):
 * - `[pause:<number>s]`, `[pause:<number>ms]` — exactly so (lowercase, no spaces, a plain decimal);
 * - SSML `<break time="<number>s|ms"/>`, `<break strength="none|x-weak|weak|medium|strong|x-strong"/>`,
 *   `<break/>` (a medium break), the slash optional, attributes in either quote.
 * A pause longer than MAX_PAUSE_MS is shortened to it, and the pauses of one text together stop at
 * MAX_TOTAL_PAUSE_MS (a typo such as `[pause:300s]` must not make minutes of silence; an error
 * would fail a whole dialogue for one tag).
 *
 * Everything else is text, spoken as written: unknown tags are never refused (clients send `<A>`
 * style speaker markers). `speakableText` then rewrites what engines would drop or misread, with a
 * map back to the written text: `<`, `>`, `&`, `<3` and tag-like spans such as `<A>`. espeak-ng
 * reads its input as SSML, so a literal `<` or `>` there silently swallows the words up to the
 * next one, and `&` may start an entity; spelled out as words in the text's language, every
 * engine speaks them.
 */

/** Longest pause one tag makes; longer ones are shortened to it. */
export const MAX_PAUSE_MS = 10_000;

/**
 * Most silence the pause tags of one text make together; tags past it make what is left (then
 * none). A text of nothing but tags would otherwise turn 10,000 characters into hours of audio
 * (speech of that many characters lasts about 12 minutes); 5 minutes still allows a pause after
 * every sentence of a long text.
 */
export const MAX_TOTAL_PAUSE_MS = 300_000;

/** What SSML's break strengths last, in milliseconds (SSML leaves them to the processor). */
export const BREAK_STRENGTH_MS: Readonly<Record<string, number>> = {
  none: 0,
  'x-weak': 100,
  weak: 250,
  medium: 500,
  strong: 1000,
  'x-strong': 2000,
};

/** Written text to speak: `start`/`end` are UTF-16 offsets of it in the parsed text. */
export interface TextSegment {
  kind: 'text';
  text: string;
  start: number;
  end: number;
}

/** Silence of `ms` milliseconds (already bounded), from the tag at `start`–`end`. */
export interface PauseSegment {
  kind: 'pause';
  ms: number;
  start: number;
  end: number;
}

export type MarkupSegment = TextSegment | PauseSegment;

const BRACKET_PAUSE = /\[pause:(\d+(?:\.\d+)?)(ms|s)\]/y;
const SSML_BREAK = /<break((?:\s+[A-Za-z_:][\w:.-]*\s*=\s*(?:"[^"<>]*"|'[^'<>]*'))*)\s*\/?>/iy;
const ATTRIBUTE = /([A-Za-z_:][\w:.-]*)\s*=\s*(?:"([^"]*)"|'([^']*)')/g;
const DURATION = /^\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*$/i;

/** A pause tag starting exactly at `at`: its end and its (bounded) length; null when there is none. */
export function pauseTagAt(text: string, at: number): { end: number; ms: number } | null {
  const first = text.charCodeAt(at);
  if (first === 0x5b /* [ */) {
    BRACKET_PAUSE.lastIndex = at;
    const m = BRACKET_PAUSE.exec(text);
    if (m === null) return null;
    return { end: at + m[0].length, ms: bounded(Number(m[1]) * (m[2] === 's' ? 1000 : 1)) };
  }
  if (first === 0x3c /* < */) {
    SSML_BREAK.lastIndex = at;
    const m = SSML_BREAK.exec(text);
    if (m === null) return null;
    return { end: at + m[0].length, ms: bounded(breakLength(m[1] ?? '')) };
  }
  return null;
}

/** A break's length: its `time` when readable, else its `strength`, else a medium break. */
function breakLength(attributes: string): number {
  let time: number | undefined;
  let strength: number | undefined;
  for (const [, name, double, single] of attributes.matchAll(ATTRIBUTE)) {
    const value = (double ?? single ?? '').trim();
    if (name?.toLowerCase() === 'time') {
      const d = DURATION.exec(value);
      if (d !== null) time = Number(d[1]) * (d[2]?.toLowerCase() === 's' ? 1000 : 1);
    } else if (name?.toLowerCase() === 'strength') strength = BREAK_STRENGTH_MS[value.toLowerCase()];
  }
  return time ?? strength ?? (BREAK_STRENGTH_MS.medium as number);
}

function bounded(ms: number): number {
  return Number.isFinite(ms) ? Math.min(Math.max(ms, 0), MAX_PAUSE_MS) : MAX_PAUSE_MS;
}

/**
 * `text` as ordered segments: the text between pause tags (blank stretches left out, each text
 * segment as written, untrimmed) and the pauses. A text without pause tags is one text segment
 * (none when it is blank).
 */
export function parseMarkup(text: string): MarkupSegment[] {
  const out: MarkupSegment[] = [];
  let from = 0;
  let budget = MAX_TOTAL_PAUSE_MS;
  const flush = (end: number) => {
    if (end > from && text.slice(from, end).trim() !== '')
      out.push({ kind: 'text', text: text.slice(from, end), start: from, end });
  };
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c !== 0x5b && c !== 0x3c) continue;
    const tag = pauseTagAt(text, i);
    if (tag === null) continue;
    flush(i);
    const ms = Math.min(tag.ms, budget);
    budget -= ms;
    out.push({ kind: 'pause', ms, start: i, end: tag.end });
    from = tag.end;
    i = tag.end - 1;
  }
  flush(text.length);
  return out;
}

/** Whether `text` holds a pause tag. */
export function hasPauseTags(text: string): boolean {
  return parseMarkup(text).some((s) => s.kind === 'pause');
}

/** The words a symbol is spoken as, in one language. */
interface SymbolWords {
  less: string;
  greater: string;
  lessOrEqual: string;
  greaterOrEqual: string;
  and: string;
  heart: string;
}

const ENGLISH = w(
  'less than',
  'greater than',
  'less than or equal to',
  'greater than or equal to',
  'and',
  'heart',
);

/**
 * Symbol words by primary language subtag. A language missing here gets the English words: they
 * are at least spoken, where the symbol itself would be lost (espeak-ng drops `<` and `>` in
 * every language).
 */
const SYMBOL_WORDS: Readonly<Record<string, SymbolWords>> = {
  en: ENGLISH,
  de: w('kleiner als', 'größer als', 'kleiner oder gleich', 'größer oder gleich', 'und', 'Herz'),
  fr: w('inférieur à', 'supérieur à', 'inférieur ou égal à', 'supérieur ou égal à', 'et', 'cœur'),
  es: w('menor que', 'mayor que', 'menor o igual que', 'mayor o igual que', 'y', 'corazón'),
  it: w('minore di', 'maggiore di', 'minore o uguale a', 'maggiore o uguale a', 'e', 'cuore'),
  pt: w('menor que', 'maior que', 'menor ou igual a', 'maior ou igual a', 'e', 'coração'),
  nl: w('kleiner dan', 'groter dan', 'kleiner dan of gelijk aan', 'groter dan of gelijk aan', 'en', 'hart'),
  pl: w('mniejsze niż', 'większe niż', 'mniejsze lub równe', 'większe lub równe', 'i', 'serce'),
  sv: w('mindre än', 'större än', 'mindre än eller lika med', 'större än eller lika med', 'och', 'hjärta'),
  ru: w('меньше', 'больше', 'меньше или равно', 'больше или равно', 'и', 'сердце'),
  zh: w('小于', '大于', '小于等于', '大于等于', '和', '爱心'),
  ja: w('小なり', '大なり', '以下', '以上', 'と', 'ハート'),
};

function w(
  less: string,
  greater: string,
  lessOrEqual: string,
  greaterOrEqual: string,
  and: string,
  heart: string,
): SymbolWords {
  return { less, greater, lessOrEqual, greaterOrEqual, and, heart };
}

/** The symbol words of a language tag (`en-US`, `cmn`, `gmw/en-US`), English when it has none. */
export function symbolWords(language: string | undefined): SymbolWords {
  const key = language ?? '';
  let words = wordsByLanguage.get(key);
  if (words === undefined) {
    const tag = key.split('/').pop() ?? '';
    const primary = tag.toLowerCase().split(/[-_]/)[0] ?? '';
    words = SYMBOL_WORDS[primary === 'cmn' ? 'zh' : primary] ?? ENGLISH;
    if (wordsByLanguage.size < 1000) wordsByLanguage.set(key, words);
  }
  return words;
}

/** symbolWords by the tag asked for: a text asks once per symbol. */
const wordsByLanguage = new Map<string, SymbolWords>();

/**
 * Text for an engine, and where each of its characters came from in the written text:
 * `from[k]`–`to[k]` is the written range (UTF-16 offsets) that character `k` stands for.
 */
export interface SpeakableText {
  text: string;
  from: Int32Array;
  to: Int32Array;
}

const ENTITY = /&(lt|gt|amp|quot|apos);/y;
const ENTITY_CHAR: Readonly<Record<string, string>> = { lt: '<', gt: '>', amp: '&', quot: '"', apos: "'" };
/** A tag-like span: `<name>`, `</name>`, `<name/>`, `<name attr="value">` (attributes need `=`). */
const TAG_LIKE =
  /<\/?([\p{L}_][\p{L}\p{N}_.:-]*)((?:\s+[\p{L}_:][\p{L}\p{N}_.:-]*\s*=\s*(?:"[^"<>]*"|'[^'<>]*'))*)\s*\/?>/uy;
/** What may follow the `<` of a tag-like span: a name's first character or the slash of a closing tag. */
const TAG_START = /^[\p{L}_/]$/u;
const TAG_PUNCTUATION = /[="']/g;

/**
 * `written` (text without pause tags) as an engine should get it. `languageAt` gives the language
 * of a written offset (plus `offset`, where `written` starts in the piece), for the symbol words:
 * - `&lt;`, `&gt;`, `&amp;`, `&quot;`, `&apos;` are read as their characters first;
 * - a tag-like span (`<A>`, `</b>`, `<voice name="Ann">`) is spoken as the words in it (its name,
 *   attribute names and values), the brackets, slash, quotes and `=` silent like parentheses;
 * - `<3` standing alone (not after a number, not before a digit) is "heart";
 * - `<=`, `>=`, `<`, `>` are comparisons ("less than", …), `&` is "and".
 * Nothing written is dropped.
 */
export function speakableText(
  written: string,
  languageAt: (at: number) => string | undefined,
  offset = 0,
): SpeakableText {
  if (!/[<>&]/.test(written)) {
    // Nothing to rewrite (the common case): every character stands for itself.
    const from = Int32Array.from({ length: written.length }, (_, k) => offset + k);
    return { text: written, from, to: from.map((f) => f + 1) };
  }
  // What is emitted, piece by piece with its written range; the per-character map is filled at the end.
  const out: string[] = [];
  const starts: number[] = [];
  const ends: number[] = [];
  const emit = (s: string, start: number, end: number) => {
    out.push(s);
    starts.push(offset + start);
    ends.push(offset + end);
  };
  const words = (at: number) => symbolWords(languageAt(offset + at));
  // Entities first: the characters they stand for are then read like typed ones.
  const decoded: { c: string; start: number; end: number }[] = [];
  for (let i = 0; i < written.length;) {
    if (written[i] === '&') {
      ENTITY.lastIndex = i;
      const m = ENTITY.exec(written);
      if (m !== null) {
        decoded.push({ c: ENTITY_CHAR[m[1] as string] as string, start: i, end: i + m[0].length });
        i += m[0].length;
        continue;
      }
    }
    decoded.push({ c: written[i] as string, start: i, end: i + 1 });
    i++;
  }
  const plain = decoded.map((d) => d.c).join('');
  const startOf = (k: number) => decoded[k]?.start ?? written.length;
  const endOf = (k: number) => decoded[k - 1]?.end ?? 0;
  for (let k = 0; k < plain.length;) {
    const c = plain[k] as string;
    const start = startOf(k);
    if (c === '<') {
      TAG_LIKE.lastIndex = k;
      const tag = TAG_START.test(plain[k + 1] ?? '') ? TAG_LIKE.exec(plain) : null;
      if (tag !== null) {
        // Its name, attribute names and values, the tag's own punctuation silent.
        const said = `${tag[1] ?? ''} ${(tag[2] ?? '').replace(TAG_PUNCTUATION, ' ')}`;
        emit(` ${said.replace(/\s+/g, ' ').trim()} `, start, endOf(k + tag[0].length));
        k += tag[0].length;
        continue;
      }
      if (isHeart(plain, k)) {
        emit(` ${words(start).heart} `, start, endOf(k + 2));
        k += 2;
        continue;
      }
      const orEqual = plain[k + 1] === '=';
      emit(
        ` ${orEqual ? words(start).lessOrEqual : words(start).less} `,
        start,
        endOf(k + (orEqual ? 2 : 1)),
      );
      k += orEqual ? 2 : 1;
      continue;
    }
    if (c === '>') {
      const orEqual = plain[k + 1] === '=';
      emit(
        ` ${orEqual ? words(start).greaterOrEqual : words(start).greater} `,
        start,
        endOf(k + (orEqual ? 2 : 1)),
      );
      k += orEqual ? 2 : 1;
      continue;
    }
    if (c === '&') {
      emit(` ${words(start).and} `, start, endOf(k + 1));
      k++;
      continue;
    }
    emit(c, start, endOf(k + 1));
    k++;
  }
  const text = out.join('');
  const from = new Int32Array(text.length);
  const to = new Int32Array(text.length);
  let at = 0;
  out.forEach((piece, i) => {
    from.fill(starts[i] as number, at, at + piece.length);
    to.fill(ends[i] as number, at, at + piece.length);
    at += piece.length;
  });
  return { text, from, to };
}

/** `<3` at `k` is a heart: not after a number ("5 <3" compares), not before a digit or `.digit`. */
function isHeart(plain: string, k: number): boolean {
  if (plain[k + 1] !== '3') return false;
  const after = plain.slice(k + 2, k + 4);
  if (/^\d|^[.,]\d/.test(after)) return false;
  let before = k - 1;
  while (before >= 0 && /\s/.test(plain[before] as string)) before--;
  return before < 0 || !/\d/.test(plain[before] as string);
}
