/**
 * Word error rate of a recogniser's transcript against the text that was spoken (bench:voices).
 * Both sides are normalised the same way first, so that only words count: lower case, punctuation
 * dropped (an apostrophe inside a word stays: "it's" is not "its"), hyphens and slashes split
 * words, and numbers written in digits become the words a speaker says for them ("12" → "twelve",
 * "3.5" → "three point five", "21st" → "twenty first"). Numbers are read as cardinals: a year
 * ("1990" said "nineteen ninety") would count as wrong words, so the reference texts avoid them.
 */

const ONES = [
  'zero',
  'one',
  'two',
  'three',
  'four',
  'five',
  'six',
  'seven',
  'eight',
  'nine',
  'ten',
  'eleven',
  'twelve',
  'thirteen',
  'fourteen',
  'fifteen',
  'sixteen',
  'seventeen',
  'eighteen',
  'nineteen',
];
const TENS = ['', '', 'twenty', 'thirty', 'forty', 'fifty', 'sixty', 'seventy', 'eighty', 'ninety'];
const SCALES: [number, string][] = [
  [1e12, 'trillion'],
  [1e9, 'billion'],
  [1e6, 'million'],
  [1e3, 'thousand'],
];

/** The words of a whole number as American English says it, without "and" ("105" → one hundred five). */
export function numberWords(n: number): string[] {
  if (!Number.isSafeInteger(n) || n < 0) throw new RangeError(`not a whole number: ${n}`);
  if (n < 20) return [ONES[n]!];
  if (n < 100) {
    const rest = n % 10;
    return [TENS[Math.floor(n / 10)]!, ...(rest === 0 ? [] : [ONES[rest]!])];
  }
  if (n < 1000) {
    const rest = n % 100;
    return [ONES[Math.floor(n / 100)]!, 'hundred', ...(rest === 0 ? [] : numberWords(rest))];
  }
  for (const [scale, name] of SCALES) {
    if (n >= scale) {
      const rest = n % scale;
      return [...numberWords(Math.floor(n / scale)), name, ...(rest === 0 ? [] : numberWords(rest))];
    }
  }
  // Beyond trillions: digit by digit, as people read long numbers.
  return [...String(n)].map((d) => ONES[Number(d)]!);
}

const IRREGULAR_ORDINALS: Readonly<Record<string, string>> = {
  one: 'first',
  two: 'second',
  three: 'third',
  five: 'fifth',
  eight: 'eighth',
  nine: 'ninth',
  twelve: 'twelfth',
};

/** The words of an ordinal ("21" → twenty first): the cardinal's last word made ordinal. */
function ordinalWords(n: number): string[] {
  const words = numberWords(n);
  const last = words.pop()!;
  const ordinal = IRREGULAR_ORDINALS[last] ?? (last.endsWith('y') ? `${last.slice(0, -1)}ieth` : `${last}th`);
  return [...words, ordinal];
}

/** The spoken words of one token made of digits (a number, a decimal, an ordinal such as 3rd). */
function spokenNumber(token: string): string[] {
  const ordinal = /^(\d+)(?:st|nd|rd|th)$/.exec(token);
  if (ordinal) return ordinalWords(Number(ordinal[1]));
  const decimal = /^(\d+)\.(\d+)$/.exec(token);
  if (decimal) {
    return [...numberWords(Number(decimal[1])), 'point', ...[...decimal[2]!].map((d) => ONES[Number(d)]!)];
  }
  if (/^\d+$/.test(token)) {
    // Leading zeros ("007") are said digit by digit.
    return token.length > 1 && token.startsWith('0')
      ? [...token].map((d) => ONES[Number(d)]!)
      : numberWords(Number(token));
  }
  // Digits mixed with letters (a model name): letters and numbers apart.
  return token
    .split(/(\d+)/)
    .filter((part) => part !== '')
    .flatMap((part) => (/^\d+$/.test(part) ? spokenNumber(part) : [part]));
}

/** The words of `text`, normalised as described at the top of this file. */
export function normaliseWords(text: string): string[] {
  const cleaned = text
    .toLowerCase()
    .normalize('NFKC')
    // Typographic apostrophes are apostrophes.
    .replace(/[\u2018\u2019\u02bc]/g, "'")
    // Thousands separators inside numbers ("1,200"): part of the number, not a pause.
    .replace(/(\d),(?=\d{3}\b)/g, '$1')
    // Hyphens, dashes and slashes join words that are spoken apart.
    .replace(/[-\u2010-\u2015/]/g, ' ')
    // A full stop that is not a decimal point ends a word.
    .replace(/\.(?!\d)|(?<!\d)\./g, ' ')
    // Everything else that is neither a letter, a digit nor an apostrophe is punctuation.
    .replace(/[^\p{L}\p{N}'.\s]/gu, ' ');
  return cleaned
    .split(/\s+/)
    .map((token) => token.replace(/^'+|'+$/g, ''))
    .filter((token) => token !== '')
    .flatMap((token) => (/\d/.test(token) ? spokenNumber(token) : [token]));
}

/** How a transcript differs from its reference, in words. */
export interface WordErrors {
  /** Words of the (normalised) reference: the denominator. */
  referenceWords: number;
  substitutions: number;
  deletions: number;
  insertions: number;
  /** (substitutions + deletions + insertions) / referenceWords; may exceed 1. */
  wer: number;
}

/**
 * Word error rate: the fewest substitutions, deletions and insertions (word-level Levenshtein
 * distance) that turn the reference's words into the transcript's, over the reference's words.
 * Of the alignments with that fewest number, the one with the most substitutions is counted
 * (the usual convention: a wrong word is one error, not a deletion and an insertion).
 */
export function wordErrorRate(reference: string, hypothesis: string): WordErrors {
  const ref = normaliseWords(reference);
  const hyp = normaliseWords(hypothesis);
  if (ref.length === 0) throw new RangeError('the reference has no words');
  // One row of the distance matrix at a time; each cell keeps its operation counts.
  interface Cell {
    cost: number;
    s: number;
    d: number;
    i: number;
  }
  let previous: Cell[] = hyp.map((_, j) => ({ cost: j, s: 0, d: 0, i: j }));
  previous.push({ cost: hyp.length, s: 0, d: 0, i: hyp.length });
  for (let r = 1; r <= ref.length; r++) {
    const row: Cell[] = [{ cost: r, s: 0, d: r, i: 0 }];
    for (let h = 1; h <= hyp.length; h++) {
      const diagonal = previous[h - 1]!;
      const same = ref[r - 1] === hyp[h - 1];
      const candidates: Cell[] = [
        { ...diagonal, cost: diagonal.cost + (same ? 0 : 1), s: diagonal.s + (same ? 0 : 1) },
        { ...previous[h]!, cost: previous[h]!.cost + 1, d: previous[h]!.d + 1 },
        { ...row[h - 1]!, cost: row[h - 1]!.cost + 1, i: row[h - 1]!.i + 1 },
      ];
      // The cheapest; on a tie, the one with more substitutions.
      row.push(
        candidates.reduce((best, c) =>
          c.cost < best.cost || (c.cost === best.cost && c.s > best.s) ? c : best,
        ),
      );
    }
    previous = row;
  }
  const last = previous[hyp.length]!;
  return {
    referenceWords: ref.length,
    substitutions: last.s,
    deletions: last.d,
    insertions: last.i,
    wer: last.cost / ref.length,
  };
}
