/**
 * Splits text into utterances with a validated splitter config.
 *
 * The text is scanned left to right. At each position, in priority order:
 * 1. a placeholder key appearing literally starts a new utterance (the longest key wins);
 * 2. otherwise an open character of a `splitterMarks` pair followed later by its close character
 *    forms a bracket marker; its inner text, split on `,`, `|` or whitespace (empty tags dropped), is
 *    matched against lookupTable entries in declaration order, the first match winning.
 * Markers are never spoken; utterance text is trimmed and empty utterances are dropped. Pause tags
 * (`[pause:1s]`, `<break time="1s"/>`, src/text/markup.ts) are never markers: they stay in the
 * utterance's text, whatever the config's keys and marks.
 * Text, placeholder keys and lookup tags are compared in Unicode normal form C (NFC), so a marker
 * typed decomposed matches one saved composed; utterance texts and markers come out in NFC.
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
 *
 * Cost: linear in the text plus the config, times the markers found for the
 * per-marker work. The longest key at every position comes from one Aho–Corasick pass; the close
 * characters' positions from one pass; a bracket's lookupTable entry from a tag index, not a scan of
 * the table. `maxMarkers` stops the scan at the first marker past the bound, so a text cannot
 * multiply per-marker work (binding params, matching tags) without limit.
 */
import { AppError } from '../errors/app-error.js';
import { pauseTagAt } from '../text/markup.js';
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

/** Bounds of one split; absent bounds are unbounded. */
export interface SplitOptions {
  /** Most markers (placeholder keys and bracket spans) the text may hold; one more is 400 VALIDATION_TOO_LONG. */
  maxMarkers?: number;
}

/** Longest placeholder key starting at each text position (0: none), from one right-to-left pass. */
function longestKeyAt(text: string, keys: readonly string[]): Int32Array | null {
  if (keys.length === 0) return null;
  // Aho–Corasick over the reversed keys, fed the text backwards: a reversed key ending at position
  // j of that stream is a key starting at j. Code units, as `startsWith` compares. Most trie nodes
  // have one child, kept in two arrays; only branching nodes get a Map (a Map per node made the
  // build dominate the split at 100k nodes).
  const firstUnit: number[] = [-1];
  const firstChild: number[] = [-1];
  const moreChildren: Array<Map<number, number> | undefined> = [undefined];
  const child = (node: number, unit: number): number | undefined =>
    firstUnit[node] === unit ? firstChild[node] : moreChildren[node]?.get(unit);
  const parent: number[] = [0];
  const unitOf: number[] = [0];
  const depth: number[] = [0];
  const longest: number[] = [0];
  for (const key of keys) {
    let node = 0;
    for (let j = key.length - 1; j >= 0; j--) {
      const unit = key.charCodeAt(j);
      let next = child(node, unit);
      if (next === undefined) {
        next = parent.length;
        parent.push(node);
        unitOf.push(unit);
        depth.push((depth[node] as number) + 1);
        longest.push(0);
        firstUnit.push(-1);
        firstChild.push(-1);
        moreChildren.push(undefined);
        if (firstChild[node] === -1) {
          firstUnit[node] = unit;
          firstChild[node] = next;
        } else (moreChildren[node] ??= new Map()).set(unit, next);
      }
      node = next;
    }
    longest[node] = key.length;
  }
  const fail = new Int32Array(parent.length);
  /** The state after `unit` from `state`, following failure links. */
  const step = (state: number, unit: number): number => {
    let next = child(state, unit);
    while (next === undefined && state !== 0) {
      state = fail[state] as number;
      next = child(state, unit);
    }
    return next ?? 0;
  };
  // Breadth first: a node's failure link is shallower, so it is final before the node is reached.
  const byDepth: number[][] = [];
  for (let node = 1; node < parent.length; node++) (byDepth[depth[node] as number] ??= []).push(node);
  for (const node of byDepth.flat()) {
    const up = parent[node] as number;
    if (up === 0) continue; // depth 1: fails to the root
    fail[node] = step(fail[up] as number, unitOf[node] as number);
    // A node that ends no key inherits the longest key ending at its failure node (a shorter suffix).
    if (longest[node] === 0) longest[node] = longest[fail[node]] as number;
  }
  const out = new Int32Array(text.length);
  let state = 0;
  for (let j = text.length - 1; j >= 0; j--) {
    state = step(state, text.charCodeAt(j));
    out[j] = longest[state] as number;
  }
  return out;
}

interface Span {
  /** Where the close character starts (the inner text ends). */
  at: number;
  /** Just past the close character. */
  end: number;
  /** Position of the mark in splitterMarks: the tie-break between spans ending together. */
  markIndex: number;
}

/** The marks sharing one open character; the close each may end with, first mark first. */
interface MarkGroup {
  /** Close character → its first mark's index, in splitterMarks order. */
  closes: Map<string, number>;
  /** The last answer and the `from` it was computed for (see `spanFrom`). */
  cachedFrom: number;
  cached: Span | null;
}

/** Marks by open character, and the positions of every close character in the text (one pass). */
class Brackets {
  readonly groups = new Map<string, MarkGroup>();
  private readonly closeAt = new Map<string, number[]>();
  private readonly hasTwoUnitOpen: boolean;

  constructor(
    private readonly text: string,
    config: SplitterConfig,
  ) {
    let markIndex = 0;
    for (const mark of Array.isArray(config.splitterMarks) ? config.splitterMarks : []) {
      if (typeof mark !== 'string') continue;
      const chars = [...mark]; // code points, so `【】` and emoji pairs split correctly
      if (chars.length !== 2 || chars[0] === undefined || chars[1] === undefined) continue;
      const [open, close] = chars;
      let group = this.groups.get(open);
      if (group === undefined) {
        group = { closes: new Map(), cachedFrom: -1, cached: null };
        this.groups.set(open, group);
      }
      // A repeated (open, close) pair gives identical spans; the first mark already wins the tie.
      if (!group.closes.has(close)) group.closes.set(close, markIndex);
      this.closeAt.set(close, []);
      markIndex++;
    }
    this.hasTwoUnitOpen = [...this.groups.keys()].some((open) => open.length === 2);
    if (this.closeAt.size === 0) return;
    const twoUnitCloses = [...this.closeAt.keys()].some((close) => close.length === 2);
    for (let p = 0; p < text.length; p++) {
      this.closeAt.get(text[p] as string)?.push(p);
      if (twoUnitCloses && p + 1 < text.length) this.closeAt.get(text.slice(p, p + 2))?.push(p);
    }
  }

  /** `text.indexOf(close, from)`, by binary search in the close's positions. */
  private nextClose(close: string, from: number): number {
    const positions = this.closeAt.get(close) as number[];
    let lo = 0;
    let hi = positions.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if ((positions[mid] as number) < from) lo = mid + 1;
      else hi = mid;
    }
    return lo < positions.length ? (positions[lo] as number) : -1;
  }

  /** The span of `group` whose inner text starts at `from` and that closes first (ties: the earlier mark). */
  private spanFrom(group: MarkGroup, from: number): Span | null {
    // Still the answer while its close lies ahead: every other close's next position only moves on.
    if (
      group.cachedFrom !== -1 &&
      group.cachedFrom <= from &&
      (group.cached === null || group.cached.at >= from)
    )
      return group.cached;
    let best: Span | null = null;
    for (const [close, markIndex] of group.closes) {
      const at = this.nextClose(close, from);
      if (at !== -1 && (best === null || at + close.length < best.end))
        best = { at, end: at + close.length, markIndex };
    }
    group.cachedFrom = from;
    group.cached = best;
    return best;
  }

  /** The bracket span opening at `i` that closes first (ties: the earlier mark), with its open length. */
  spanAt(i: number): (Span & { openLength: number }) | null {
    let chosen: (Span & { openLength: number }) | null = null;
    const consider = (open: string): void => {
      const group = this.groups.get(open);
      if (group === undefined) return;
      const span = this.spanFrom(group, i + open.length);
      if (
        span !== null &&
        (chosen === null ||
          span.end < chosen.end ||
          (span.end === chosen.end && span.markIndex < chosen.markIndex))
      )
        chosen = { ...span, openLength: open.length };
    };
    consider(this.text[i] as string);
    if (this.hasTwoUnitOpen && i + 1 < this.text.length) consider(this.text.slice(i, i + 2));
    return chosen;
  }
}

/** The lookupTable indexed by tag: a bracket's entry is found from its own tags, not by scanning the table. */
class LookupIndex {
  private readonly params: UtteranceParams[] = [];
  /** Tag → the first entry holding it as a single-tag element. */
  private readonly firstSingle = new Map<string, number>();
  /** Tag → the all-of elements holding it (element ids). */
  private readonly allOfByTag = new Map<string, number[]>();
  /** Per all-of element id: its entry and its number of distinct tags. */
  private readonly allOfEntry: number[] = [];
  private readonly allOfSize: number[] = [];
  /** Per element id: tags of the current bracket seen so far, valid while `seenIn` holds the bracket's number. */
  private hits = new Int32Array(0);
  private seenIn = new Int32Array(0);
  private bracket = 0;
  /** Inner text → matched entry (-1: none); a text repeats its brackets, and each is then matched once. */
  private readonly memo = new Map<string, number>();

  constructor(config: SplitterConfig) {
    const table = config.lookupTable;
    if (!isPlainRecord(table)) return;
    for (const value of Object.values(table)) {
      if (!isPlainRecord(value) || !Array.isArray(value.tags)) continue;
      const { tags, ...params } = value as Record<string, unknown> & { tags: TagElement[] };
      const entry = this.params.length;
      this.params.push(params);
      for (const element of tags) {
        if (typeof element === 'string') {
          const tag = element.normalize('NFC');
          if (!this.firstSingle.has(tag)) this.firstSingle.set(tag, entry);
        } else if (Array.isArray(element) && element.length > 0) {
          const distinct = new Set(
            element.map((tag) => (typeof tag === 'string' ? tag.normalize('NFC') : tag)),
          );
          // The empty tag is never present (parseTags drops it), so such an element never matches.
          if ([...distinct].some((tag) => typeof tag !== 'string' || tag === '')) continue;
          const id = this.allOfEntry.length;
          this.allOfEntry.push(entry);
          this.allOfSize.push(distinct.size);
          for (const tag of distinct) {
            const holders = this.allOfByTag.get(tag);
            if (holders === undefined) this.allOfByTag.set(tag, [id]);
            else holders.push(id);
          }
        }
      }
    }
    this.hits = new Int32Array(this.allOfEntry.length);
    this.seenIn = new Int32Array(this.allOfEntry.length);
  }

  /** The params of the first entry (declaration order) one of whose tags elements the bracket's `inner` text satisfies. */
  match(inner: string): UtteranceParams | undefined {
    let best = this.memo.get(inner);
    if (best === undefined) {
      best = this.firstMatch(new Set(parseTags(inner)));
      this.memo.set(inner, best);
    }
    return best === -1 ? undefined : this.params[best];
  }

  private firstMatch(present: ReadonlySet<string>): number {
    let best = Infinity;
    const bracket = ++this.bracket;
    for (const tag of present) {
      const single = this.firstSingle.get(tag);
      if (single !== undefined && single < best) best = single;
      for (const id of this.allOfByTag.get(tag) ?? []) {
        if (this.seenIn[id] !== bracket) {
          this.seenIn[id] = bracket;
          this.hits[id] = 0;
        }
        const entry = this.allOfEntry[id] as number;
        if (++(this.hits[id] as number) === this.allOfSize[id] && entry < best) best = entry;
      }
    }
    return best === Infinity ? -1 : best;
  }
}

/** Splits a bracket's inner text into its tags: separators are `,`, `|` and whitespace; empty tags are dropped. */
export function parseTags(inner: string): string[] {
  return inner.split(/[,|\s]+/u).filter((tag) => tag !== '');
}

/**
 * Splits `text` into utterances bound to params by the placeholders, bracket markers and fallback of
 * `config`. Throws 400 VALIDATION_TOO_LONG when the text holds more than `options.maxMarkers` markers.
 */
export function splitText(written: string, config: SplitterConfig, options: SplitOptions = {}): Utterance[] {
  // One form for text, keys and tags: a marker typed decomposed (NFD) matches one saved composed.
  const text = written.normalize('NFC');
  const placeholderParams = new Map<string, UtteranceParams>();
  for (const [key, params] of placeholderEntries(config)) {
    const normal = key.normalize('NFC');
    // Two keys that differ only in form are one marker; the first written wins, as for lookup tags.
    if (!placeholderParams.has(normal)) placeholderParams.set(normal, params);
  }
  const keyLengthAt = longestKeyAt(text, [...placeholderParams.keys()]);
  const brackets = new Brackets(text, config);
  const lookup = new LookupIndex(config);
  const fallback = isPlainRecord(config.fallbackConfig) ? (config.fallbackConfig as UtteranceParams) : null;
  const maxMarkers = options.maxMarkers ?? Infinity;

  const utterances: Utterance[] = [];
  let inForce: UtteranceParams | null = fallback === null ? null : { ...fallback };
  let marker: string | null = null;
  let markers = 0;
  let segmentStart = 0;

  const flush = (end: number): void => {
    const spoken = text.slice(segmentStart, end).trim();
    if (inForce !== null && spoken !== '') utterances.push({ text: spoken, params: { ...inForce }, marker });
  };
  const bind = (own: UtteranceParams): UtteranceParams => ({ ...inForce, ...own });
  const countMarker = (): void => {
    if (++markers > maxMarkers)
      throw new AppError(
        'VALIDATION_TOO_LONG',
        `text holds more than ${maxMarkers} markers (placeholder keys and bracket spans); at most ${maxMarkers} are allowed`,
      );
  };

  let i = 0;
  while (i < text.length) {
    // A pause tag is text of the utterance (the engines make it silence), never a marker: its
    // brackets are not a span, and keys inside it do not count.
    const pause = pauseTagAt(text, i);
    if (pause !== null) {
      i = pause.end;
      continue;
    }
    const keyLength = keyLengthAt?.[i] ?? 0;
    if (keyLength > 0) {
      countMarker();
      flush(i);
      const key = text.slice(i, i + keyLength);
      inForce = bind(placeholderParams.get(key) as UtteranceParams);
      marker = key;
      i += keyLength;
      segmentStart = i;
      continue;
    }
    const span = brackets.groups.size === 0 ? null : brackets.spanAt(i);
    if (span !== null) {
      countMarker();
      flush(i);
      const match = lookup.match(text.slice(i + span.openLength, span.at));
      if (match !== undefined) inForce = bind(match);
      else inForce = fallback === null ? null : { ...fallback };
      marker = text.slice(i, span.end);
      i = span.end;
      segmentStart = i;
      continue;
    }
    i++;
  }
  flush(text.length);
  return utterances;
}
