/**
 * Splits text into sentence-sized pieces so engines can synthesise and stream one piece at a time:
 * the first audio is ready after one sentence instead of the whole text.
 */

/** Longest piece handed to an engine at once; longer sentences are cut at a comma or space. */
export const MAX_PIECE_CHARS = 400;

/** Sentences of `text` (trimmed, none empty), using the language's rules when the tag is valid. */
export function splitSentences(text: string, language?: string, maxChars = MAX_PIECE_CHARS): string[] {
  const out: string[] = [];
  for (const { segment } of segmenterFor(language).segment(text)) {
    const s = segment.trim();
    if (s.length > 0) out.push(...cutLong(s, maxChars));
  }
  return out;
}

/**
 * `sentence` cut into pieces of at most `maxChars` at clause boundaries (a comma, a semicolon),
 * else at a word boundary: for engines that speak a whole piece before its first sample.
 */
export function splitClauses(sentence: string, maxChars: number): string[] {
  return cutLong(sentence.trim(), maxChars);
}

function segmenterFor(language: string | undefined): Intl.Segmenter {
  try {
    return new Intl.Segmenter(language, { granularity: 'sentence' });
  } catch {
    // Engine voice names like 'gmw/en-US' are not BCP 47 tags; the root rules still split fine.
    return new Intl.Segmenter('en', { granularity: 'sentence' });
  }
}

function cutLong(sentence: string, maxChars: number): string[] {
  const parts: string[] = [];
  let rest = sentence;
  while (rest.length > maxChars) {
    const window = rest.slice(0, maxChars);
    // Prefer a clause boundary, then a word boundary; cut hard only inside one enormous word.
    let cut =
      Math.max(
        window.lastIndexOf(', '),
        window.lastIndexOf('; '),
        window.lastIndexOf('，'),
        window.lastIndexOf('、'),
      ) + 1;
    if (cut < maxChars / 2) cut = window.lastIndexOf(' ');
    if (cut < maxChars / 4) cut = maxChars;
    parts.push(rest.slice(0, cut).trim());
    rest = rest.slice(cut).trim();
  }
  if (rest.length > 0) parts.push(rest);
  return parts.filter((p) => p.length > 0);
}

/** The pause an engine makes after a clause's punctuation inside a sentence. */
export type ClausePause = 'comma' | 'semicolon';

/** A clause of a sentence (see `clausesOf`). */
export interface Clause {
  text: string;
  /** The punctuation it ends with inside its sentence; none on the sentence's last clause. */
  pauseAfter?: ClausePause;
}

/**
 * `sentence` cut after each comma, semicolon or colon followed by a space, joining clauses until
 * each holds at least `minChars` (a last clause shorter than that joins the one before): for an
 * engine that speaks each clause of a sentence as it would inside the sentence, so that other
 * requests' pieces can go between them. Each clause but the last says which pause it ends with.
 */
export function clausesOf(sentence: string, minChars: number): Clause[] {
  const text = sentence.trim();
  const out: Clause[] = [];
  let from = 0;
  for (const m of text.matchAll(/[,;:](?=\s)/g)) {
    const at = m.index + 1;
    if (at - from < minChars || text.length - at - 1 < minChars) continue;
    out.push({ text: text.slice(from, at).trim(), pauseAfter: m[0] === ',' ? 'comma' : 'semicolon' });
    from = at;
  }
  const last = text.slice(from).trim();
  if (last.length > 0) out.push({ text: last });
  return out;
}
