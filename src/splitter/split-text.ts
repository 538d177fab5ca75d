/**
 * Splits text into utterances with a validated splitter config (decisions §7).
 *
 * The text is scanned left to right. At each position, in priority order:
 * 1. a placeholder key appearing literally starts a new utterance (the longest key wins);
 * 2. otherwise an open character of a `splitterMarks` pair followed later by its close character
 *    forms a bracket marker; its inner text, split on `,`, `|` or whitespace (empty tags dropped), is
 *    matched against lookupTable entries in declaration order, the first match winning.
 * Markers are never spoken; utterance text is trimmed and empty utterances are dropped.
 *
 * Decisions where the spec is silent:
 * - "Params in force" is a running state independent of what is spoken: a marker's params are the
 *   params in force merged with the marker's own (own keys win; a lookup entry's `tags` is not a
 *   param). A dropped (empty) utterance still passes its params on to the next marker.
 * - Initial state: a copy of fallbackConfig; without fallbackConfig, "nothing in force", and text is
 *   dropped until the first placeholder or matched bracket.
 * - A bracket that matches no entry (including an empty span `[]`) resets the state to the initial
 *   state: the following text uses exactly fallbackConfig (nothing inherited from before the
 *   bracket), or is dropped — and the next marker then inherits nothing — without fallbackConfig.
 * - A marker applied while nothing is in force uses only its own params; if it has no voiceId, the
 *   utterance carries none, and the generate layer decides what that means.
 * - An open character with no later close character is plain text (spoken); scanning continues
 *   right after it, so markers later in the text still count.
 * - A bracket span is taken whole, from its open character to the first close character after it:
 *   placeholder keys inside it are tag text, not markers, and spans do not nest.
 * - When several marks open at the same position, the span that closes first wins (ties: the
 *   earlier mark in splitterMarks).
 * - Tags match by exact, case-sensitive string equality. A tags element that is an empty array, or
 *   the empty string, matches nothing (an empty AND would otherwise match every bracket).
 * - `marker` is the placeholder key or the whole bracket span (brackets included) that started the
 *   utterance — also for an unmatched bracket — and null for text before any marker.
 * - Each utterance gets its own shallow copy of the params.
 */
import {
  isPlainRecord,
  placeholderEntries,
  type SplitterConfig,
  type TagElement,
  type UtteranceParams,
} from './splitter-config.js';

/** One piece of speech: trimmed text, the params bound to it, and the marker that started it. */
export interface Utterance {
  text: string;
  params: UtteranceParams;
  /** The placeholder key or bracket span that started it; null for fallback text before any marker. */
  marker: string | null;
}

interface Mark {
  open: string;
  close: string;
}

interface CompiledEntry {
  tags: TagElement[];
  params: UtteranceParams;
}

/** Finds the next occurrence of each close string; the scan only moves forward, so results are reused (amortised linear). */
class CloseFinder {
  private readonly cache = new Map<string, { from: number; at: number }>();

  constructor(private readonly text: string) {}

  next(close: string, from: number): number {
    const hit = this.cache.get(close);
    // Valid while no unsearched gap exists: [hit.from, hit.at) is known to hold no close.
    if (hit !== undefined && hit.from <= from && (hit.at === -1 || hit.at >= from)) return hit.at;
    const at = this.text.indexOf(close, from);
    this.cache.set(close, { from, at });
    return at;
  }
}

function compileMarks(config: SplitterConfig): Mark[] {
  const marks: Mark[] = [];
  for (const mark of Array.isArray(config.splitterMarks) ? config.splitterMarks : []) {
    if (typeof mark !== 'string') continue;
    const chars = [...mark]; // code points, so `【】` and emoji pairs split correctly
    if (chars.length !== 2 || chars[0] === undefined || chars[1] === undefined) continue;
    marks.push({ open: chars[0], close: chars[1] });
  }
  return marks;
}

function compileEntries(config: SplitterConfig): CompiledEntry[] {
  const table = config.lookupTable;
  if (!isPlainRecord(table)) return [];
  const entries: CompiledEntry[] = [];
  for (const entry of Object.values(table)) {
    if (!isPlainRecord(entry) || !Array.isArray(entry.tags)) continue;
    const { tags, ...params } = entry as Record<string, unknown> & { tags: TagElement[] };
    entries.push({ tags, params });
  }
  return entries;
}

function entryMatches(entry: CompiledEntry, present: ReadonlySet<string>): boolean {
  return entry.tags.some((element) =>
    typeof element === 'string'
      ? present.has(element)
      : Array.isArray(element) && element.length > 0 && element.every((tag) => present.has(tag)),
  );
}

/** Splits a bracket's inner text into its tags: separators are `,`, `|` and whitespace; empty tags are dropped. */
export function parseTags(inner: string): string[] {
  return inner.split(/[,|\s]+/u).filter((tag) => tag !== '');
}

/** Splits `text` into utterances bound to params by the placeholders, bracket markers and fallback of `config`. */
export function splitText(text: string, config: SplitterConfig): Utterance[] {
  // Keys bucketed by first code unit, longest first, so each position checks only plausible keys.
  const keysByFirst = new Map<string, string[]>();
  const placeholderParams = new Map<string, UtteranceParams>();
  for (const [key, params] of placeholderEntries(config)) {
    placeholderParams.set(key, params);
    const first = key[0] as string;
    const bucket = keysByFirst.get(first);
    if (bucket === undefined) keysByFirst.set(first, [key]);
    else bucket.push(key);
  }
  for (const bucket of keysByFirst.values()) bucket.sort((a, b) => b.length - a.length);

  const marks = compileMarks(config);
  const entries = compileEntries(config);
  const fallback = isPlainRecord(config.fallbackConfig) ? (config.fallbackConfig as UtteranceParams) : null;
  const closes = new CloseFinder(text);

  const utterances: Utterance[] = [];
  let inForce: UtteranceParams | null = fallback === null ? null : { ...fallback };
  let marker: string | null = null;
  let segmentStart = 0;

  const flush = (end: number): void => {
    const spoken = text.slice(segmentStart, end).trim();
    if (inForce !== null && spoken !== '') utterances.push({ text: spoken, params: { ...inForce }, marker });
  };
  const bind = (own: UtteranceParams): UtteranceParams => ({ ...inForce, ...own });

  let i = 0;
  while (i < text.length) {
    const key = keysByFirst.get(text[i] as string)?.find((k) => text.startsWith(k, i));
    if (key !== undefined) {
      flush(i);
      inForce = bind(placeholderParams.get(key) as UtteranceParams);
      marker = key;
      i += key.length;
      segmentStart = i;
      continue;
    }

    // The chosen span: inner text [innerStart, innerEnd), whole span [i, spanEnd).
    let innerStart = -1;
    let innerEnd = -1;
    let spanEnd = -1;
    for (const { open, close } of marks) {
      if (!text.startsWith(open, i)) continue;
      const at = closes.next(close, i + open.length);
      if (at !== -1 && (spanEnd === -1 || at + close.length < spanEnd)) {
        innerStart = i + open.length;
        innerEnd = at;
        spanEnd = at + close.length;
      }
    }
    if (spanEnd !== -1) {
      flush(i);
      const span = text.slice(i, spanEnd);
      const present = new Set(parseTags(text.slice(innerStart, innerEnd)));
      const match = entries.find((entry) => entryMatches(entry, present));
      if (match !== undefined) inForce = bind(match.params);
      else inForce = fallback === null ? null : { ...fallback };
      marker = span;
      i = spanEnd;
      segmentStart = i;
      continue;
    }
    i++;
  }
  flush(text.length);
  return utterances;
}
