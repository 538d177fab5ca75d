// The splitter runs in linear time (one Aho–Corasick pass for the
// placeholder keys, indexed close characters, a tag index for lookupTable). This file keeps the
// previous implementation verbatim as the reference and checks on random small inputs, chosen to
// collide (shared key prefixes, keys inside keys, marks sharing an open or a close, surrogate halves),
// that the linear splitter splits every text exactly as it did.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { parseTags, splitText, type Utterance } from './split-text.js';
import {
  isPlainRecord,
  placeholderEntries,
  validateSplitterConfig,
  type SplitterConfig,
  type TagElement,
  type UtteranceParams,
} from './splitter-config.js';

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

/** The previous splitter, verbatim: quadratic in places, but the semantics to keep. */
function referenceSplitText(text: string, config: SplitterConfig): Utterance[] {
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

// Few distinct units so that keys, opens, closes and tags collide often; 😀 and its halves on purpose.
const UNITS = ['a', 'b', '<', '>', '[', ']', ' ', ',', '|', '😀', '\ud83d', '\ude00', '【', '】'];
const unitText = (maxLength: number) =>
  fc.array(fc.constantFrom(...UNITS), { maxLength }).map((units) => units.join(''));
const codePoint = fc.constantFrom('a', 'b', '<', '>', '[', ']', '😀', '\ud83d', '\ude00', '【', '】', ',');
const params = fc.record(
  { voiceId: fc.constantFrom('v1', 'v2'), speechRate: fc.constantFrom(0.5, 1, 2), extra: fc.constant('x') },
  { requiredKeys: [] },
);
const tag = fc.constantFrom('a', 'b', 'ab', '😀', '', '[');
const tagElement = fc.oneof(tag, fc.array(tag, { maxLength: 3 }));

const configArb = fc
  .record({
    keys: fc.uniqueArray(unitText(4), { maxLength: 6 }),
    keyParams: fc.array(params, { minLength: 6, maxLength: 6 }),
    marks: fc.array(fc.tuple(codePoint, codePoint), { maxLength: 5 }),
    entries: fc.array(fc.tuple(fc.array(tagElement, { minLength: 1, maxLength: 3 }), params), {
      maxLength: 4,
    }),
    fallback: fc.option(
      params.map((p) => ({ ...p, voiceId: p.voiceId ?? 'fb' })),
      { nil: undefined },
    ),
  })
  .map((c): SplitterConfig => {
    const raw: Record<string, unknown> = {};
    c.keys.forEach((k, i) => {
      if (k !== '' && k !== 'splitterMarks' && k !== 'lookupTable' && k !== 'fallbackConfig')
        raw[k] = c.keyParams[i] ?? {};
    });
    // A high and a low surrogate half join into one code point: not a mark.
    raw.splitterMarks = c.marks.map(([o, cl]) => o + cl).filter((m) => [...m].length === 2);
    raw.lookupTable = Object.fromEntries(c.entries.map(([tags, p], i) => [`e${i}`, { tags, ...p }]));
    if (c.fallback !== undefined) raw.fallbackConfig = c.fallback;
    return validateSplitterConfig(raw);
  });

void describe('splitText equals the previous implementation', () => {
  void test('on random small colliding configs and texts', () => {
    fc.assert(
      fc.property(configArb, unitText(40), (config, text) => {
        const want: Utterance[] = referenceSplitText(text, config);
        assert.deepEqual(splitText(text, config), want);
      }),
      { numRuns: 5000 },
    );
  });

  void test('on texts built from the config’s own keys and bracket spans', () => {
    const scriptArb = configArb.chain((config) => {
      const keys = placeholderEntries(config).map(([k]) => k);
      const spans = (config.splitterMarks ?? []).map((m) => [...m]);
      const pieces = [
        unitText(4),
        ...(keys.length > 0 ? [fc.constantFrom(...keys)] : []),
        ...(spans.length > 0
          ? [
              fc
                .tuple(fc.constantFrom(...spans), fc.array(tag, { maxLength: 3 }))
                .map(([[o, cl], tags]) => `${o ?? ''}${tags.join(' ')}${cl ?? ''}`),
            ]
          : []),
      ];
      return fc.tuple(fc.constant(config), fc.array(fc.oneof(...pieces), { maxLength: 12 }));
    });
    fc.assert(
      fc.property(scriptArb, ([config, pieces]) => {
        const text = pieces.join('');
        assert.deepEqual(splitText(text, config), referenceSplitText(text, config));
      }),
      { numRuns: 5000 },
    );
  });

  void test('with maxMarkers: refused with VALIDATION_TOO_LONG, or the same answer as unbounded', () => {
    fc.assert(
      fc.property(configArb, unitText(40), fc.nat(6), (config, text, max) => {
        const want = referenceSplitText(text, config);
        let got: Utterance[] | undefined;
        try {
          got = splitText(text, config, { maxMarkers: max });
        } catch (error) {
          assert.equal((error as { code?: string }).code, 'VALIDATION_TOO_LONG');
        }
        if (got !== undefined) assert.deepEqual(got, want);
      }),
      { numRuns: 2000 },
    );
  });
});
