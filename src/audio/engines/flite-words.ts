/**
 * Where Flite speaks each written word of a piece, from what its command line prints. Flite prints
 * one relation per run: the run that makes the waveform prints its segments (phones and pauses)
 * with their end times (`-psdur`), which places every boundary between segments exactly on the
 * waveform's timeline but does not say which word a segment belongs to. A second, cheap run (no
 * audio worth the name: durations stretched to nearly nothing) speaks each written word alone, one
 * utterance a line (`-ps`), which gives each word's segments. Laid over the first run's segments in
 * order, they say where each word starts. Flite reads a few words differently in context ("Dr."
 * is "doctor" before a name and "drive" alone; "$5 million" is "five million dollars"): the two
 * sequences are then aligned on their longest common subsequence, and a segment the lone readings
 * do not have goes to the word around it. Kept apart from the worker so that it is tested alone.
 */

/** A segment of the run that made the waveform: its name (a phone or `pau`) and its end, in seconds. */
export interface FliteSegment {
  name: string;
  end: number;
}

/** Flite's pause segment: it belongs to no word. */
export const PAUSE = 'pau';

/**
 * The segments `-psdur` printed for one utterance (`pau:0.220 d:0.281 …`), or undefined when the
 * output is not that (no word is then placed; the sentence keeps its own mark).
 */
export function parseSegmentTimes(out: string): FliteSegment[] | undefined {
  const fields = out.trim().split(/\s+/);
  if (fields.length === 0 || fields[0] === '') return undefined;
  const segments: FliteSegment[] = [];
  for (const field of fields) {
    const at = field.lastIndexOf(':');
    const end = Number(field.slice(at + 1));
    if (at <= 0 || field.slice(at + 1) === '' || !Number.isFinite(end)) return undefined;
    const previous = segments.at(-1)?.end ?? 0;
    if (end < previous) return undefined;
    segments.push({ name: field.slice(0, at), end });
  }
  return segments;
}

/** A written word of a piece: text between white space, as Flite's tokeniser cuts it. */
export interface WrittenWord {
  /** The whole token, as sent to Flite alone. */
  token: string;
  /** UTF-16 offsets of the word shown for it: the token less the punctuation around it. */
  textStart: number;
  textEnd: number;
  /** Whether Flite is asked for its reading: it has a letter or digit (punctuation alone is silent). */
  spoken: boolean;
}

/** Flite's white space (its tokeniser's), and NUL, which the worker sends as a space. */
const TOKEN = /[^ \t\n\r\0]+/g;
/** Punctuation Flite's tokeniser takes off the front and back of a token (cst_tokenstream.c). */
const PRE_PUNCTUATION = /^["'`({[]+/;
const POST_PUNCTUATION = /["'`.,:;!?(){}[\]]+$/;
const SPOKEN = /[A-Za-z0-9]/;

/** The written words of `text`, in order. */
export function writtenWords(text: string): WrittenWord[] {
  const words: WrittenWord[] = [];
  for (const match of text.matchAll(TOKEN)) {
    const token = match[0];
    const at = match.index;
    const lead = PRE_PUNCTUATION.exec(token)?.[0].length ?? 0;
    const trail = POST_PUNCTUATION.exec(token.slice(lead))?.[0].length ?? 0;
    const bare = lead + trail < token.length;
    words.push({
      token,
      textStart: bare ? at + lead : at,
      textEnd: bare ? at + token.length - trail : at + token.length,
      spoken: SPOKEN.test(token),
    });
  }
  return words;
}

/** The file the second run reads: one token a paragraph (a blank line ends Flite's utterance). */
export function loneWordsInput(tokens: readonly string[]): string {
  // The last line needs its newline: Flite drops a last utterance that ends at the end of the file.
  return `${tokens.join('\n\n')}\n`;
}

/**
 * The phones of each token of `loneWordsInput(tokens)` from the second run's `-ps` output (one line
 * an utterance, pauses left out), or undefined when the lines do not match the tokens one to one.
 */
export function parseLoneWords(out: string, count: number): string[][] | undefined {
  const lines = out.split('\n');
  if (lines.at(-1) === '') lines.pop();
  if (lines.length !== count) return undefined;
  return lines.map((line) => line.split(/\s+/).filter((name) => name !== '' && name !== PAUSE));
}

/**
 * For each written word, the index in `segments` of the first segment that speaks it, or undefined
 * when none does. `phones[i]` is word i's lone reading (undefined: not asked, owns no segment).
 */
export function alignWords(
  segments: readonly FliteSegment[],
  phones: readonly (readonly string[] | undefined)[],
): (number | undefined)[] {
  const spoken: number[] = [];
  segments.forEach((s, i) => {
    if (s.name !== PAUSE) spoken.push(i);
  });
  const expected: { name: string; word: number }[] = [];
  phones.forEach((list, word) => list?.forEach((name) => expected.push({ name, word })));
  const owner = ownersOf(
    spoken.map((i) => segments[i]?.name ?? ''),
    expected,
    phones.map((list) => (list?.length ?? 0) > 0),
  );
  const first: (number | undefined)[] = phones.map(() => undefined);
  owner.forEach((word, k) => {
    if (word !== undefined && first[word] === undefined) first[word] = spoken[k];
  });
  return first;
}

/**
 * The word each of `actual` belongs to: the word of the expected segment it is matched with on a
 * longest common subsequence; a run of unmatched ones goes to the first word after the last matched
 * word before it that has a lone reading and no matched segment (a word read otherwise in context),
 * else to that last matched word (an extra sound of its reading), else to the first word read.
 */
function ownersOf(
  actual: readonly string[],
  expected: readonly { name: string; word: number }[],
  read: readonly boolean[],
): (number | undefined)[] {
  const n = actual.length;
  const m = expected.length;
  const matchedWith: (number | undefined)[] = new Array<number | undefined>(n).fill(undefined);
  if (n === m && actual.every((name, k) => name === expected[k]?.name)) {
    for (let k = 0; k < n; k++) matchedWith[k] = k;
  } else {
    // lcs[i * (m + 1) + j]: the longest common subsequence of actual[i..] and expected[j..].
    const lcs = new Uint32Array((n + 1) * (m + 1));
    const at = (i: number, j: number) => lcs[i * (m + 1) + j] ?? 0;
    for (let i = n - 1; i >= 0; i--)
      for (let j = m - 1; j >= 0; j--)
        lcs[i * (m + 1) + j] =
          actual[i] === expected[j]?.name ? at(i + 1, j + 1) + 1 : Math.max(at(i + 1, j), at(i, j + 1));
    for (let i = 0, j = 0; i < n && j < m;) {
      if (actual[i] === expected[j]?.name && at(i, j) === at(i + 1, j + 1) + 1) matchedWith[i++] = j++;
      else if (at(i + 1, j) >= at(i, j + 1)) i++;
      else j++;
    }
  }
  const owner = matchedWith.map((j) => (j === undefined ? undefined : expected[j]?.word));
  const matchedWords = new Set(owner.filter((w) => w !== undefined));
  /** The first word after `after` that has a lone reading none of whose segments matched, before `before`. */
  const unmatchedBetween = (after: number, before: number): number | undefined => {
    for (let w = after + 1; w < before; w++) if (read[w] === true && !matchedWords.has(w)) return w;
    return undefined;
  };
  const firstRead = read.indexOf(true);
  for (let k = 0; k < n;) {
    if (owner[k] !== undefined) {
      k++;
      continue;
    }
    let end = k;
    while (end < n && owner[end] === undefined) end++;
    const previous = k > 0 ? owner[k - 1] : undefined;
    const next = end < n ? owner[end] : undefined;
    const word =
      unmatchedBetween(previous ?? -1, next ?? read.length) ??
      previous ??
      (firstRead === -1 ? undefined : firstRead);
    for (let i = k; i < end; i++) owner[i] = word;
    k = end;
  }
  return owner;
}

/** A word's start on the waveform Flite wrote (samples at its rate) and its text. */
export interface PlacedWord {
  sample: number;
  textStart: number;
  textEnd: number;
}

/**
 * The words of `words` placed on the waveform (`rate`), less `from` (samples left out at the
 * start), clamped to the waveform's `length` after that cut. A word starts where the segment before
 * it ends; after a pause, in the middle of the pause: spans are trimmed to voiced samples, so the
 * word before then ends and this one starts at the silence's edges, although a diphone voice's
 * sounds run a little past or before the segment times at a pause. The first word of the utterance
 * starts at its start (only silence lies before it).
 */
export function placeWords(
  segments: readonly FliteSegment[],
  words: readonly WrittenWord[],
  phones: readonly (readonly string[] | undefined)[],
  wave: { rate: number; from: number; length: number },
): PlacedWord[] {
  const starts = alignWords(segments, phones);
  const placed: PlacedWord[] = [];
  words.forEach((word, i) => {
    const first = starts[i];
    if (first === undefined) return;
    let before = first - 1;
    while (before >= 0 && segments[before]?.name === PAUSE) before--;
    const pauseStart = before < 0 ? 0 : (segments[before]?.end ?? 0);
    const pauseEnd = first === 0 ? 0 : (segments[first - 1]?.end ?? 0);
    const seconds = before < 0 ? 0 : (pauseStart + pauseEnd) / 2;
    const sample = Math.round(seconds * wave.rate) - wave.from;
    const last = placed.at(-1)?.sample ?? 0;
    placed.push({
      sample: Math.max(last, Math.min(Math.max(sample, 0), Math.max(wave.length - 1, 0))),
      textStart: word.textStart,
      textEnd: word.textEnd,
    });
  });
  return placed;
}
