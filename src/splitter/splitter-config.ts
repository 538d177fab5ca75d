/**
 * Validation of a splitter `config` object, nothing stricter.
 *
 * Decisions the rules leave open:
 * - A placeholder entry's contents are free-form; only `voiceId` (string) and `speechRate` (number)
 *   are type-checked, and only when present. A placeholder without `voiceId` is valid: it inherits
 *   the voice in force. The same two type checks apply to lookupTable entries and to
 *   `fallbackConfig`, because their parameters flow into the same typed `UtteranceParams`.
 * - "Present" means an own property, whatever its value: `{fallbackConfig: null}` is present and
 *   fails rule 5; it does not count as absent.
 * - Mark length is counted in Unicode code points, so `【】` and a pair of emoji are 2 characters.
 * - Beyond the spec: no key or string anywhere in the config may hold a
 *   control character other than tab, line feed and carriage return (NUL cannot be stored and would
 *   reach piece texts and voice ids), and every number must be finite (JSON's 1e309 parses to
 *   Infinity, which JSON.stringify would store as null and so corrupt the saved config). Checked
 *   after rules 1–6, iteratively; the request body's nesting depth is already bounded.
 * - Rules are checked in spec order (1, 2, then 3–6 key by key in the input's key order); the first
 *   failure is reported, naming the rule and the path that broke it.
 * - The result is a deep copy of the input's plain objects and arrays in the input's key order (the
 *   service returns config "as stored"). Note that JavaScript itself lists integer-like keys
 *   ("1", "42") before other keys, so such keys cannot keep their written position.
 */
import { codePointLength } from '../common/code-points.js';
import { AppError } from '../errors/app-error.js';
import { CONTROL_CHARACTER_MESSAGE, controlCharacterIndex } from '../errors/validation.js';

/** Parameters bound to an utterance; keys other than voiceId/speechRate are passed through. */
export interface UtteranceParams {
  voiceId?: string;
  speechRate?: number;
  [param: string]: unknown;
}

/** One element of a lookupTable entry's `tags`: a single tag, or tags that must all be present. */
export type TagElement = string | string[];

/** A lookupTable entry: the tags that select it plus the parameters it binds. */
export interface LookupEntry extends UtteranceParams {
  tags: TagElement[];
}

/** The fallbackConfig entry; unlike other entries it must name a voice. */
export interface FallbackConfig extends UtteranceParams {
  voiceId: string;
}

/** A validated splitter config; every key other than the three reserved ones is a placeholder (see `placeholderEntries`). */
export interface SplitterConfig {
  splitterMarks?: string[];
  lookupTable?: Record<string, LookupEntry>;
  fallbackConfig?: FallbackConfig;
  [placeholderKey: string]: unknown;
}

/** The three reserved config keys; every other key is a placeholder key. */
export const RESERVED_KEYS: ReadonlySet<string> = new Set(['splitterMarks', 'lookupTable', 'fallbackConfig']);

/** True for a non-null, non-array object (the spec's "non-array object"). */
export function isPlainRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The placeholder keys of a validated config with their parameters, in config key order. */
export function placeholderEntries(config: SplitterConfig): Array<[string, UtteranceParams]> {
  const out: Array<[string, UtteranceParams]> = [];
  for (const [key, value] of Object.entries(config)) {
    // Defensive: splitText must never throw, even on a config that skipped validation.
    if (!RESERVED_KEYS.has(key) && key !== '' && isPlainRecord(value)) out.push([key, value]);
  }
  return out;
}

function invalid(message: string): never {
  throw new AppError('TTS_SPLITTER_INVALID', message);
}

function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (value === undefined) return 'nothing';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `a ${typeof value}`;
}

function checkParamTypes(params: Record<string, unknown>, where: string): void {
  if (Object.hasOwn(params, 'voiceId') && typeof params.voiceId !== 'string') {
    invalid(`${where}.voiceId must be a string, got ${describeType(params.voiceId)}`);
  }
  if (Object.hasOwn(params, 'speechRate') && typeof params.speechRate !== 'number') {
    invalid(`${where}.speechRate must be a number, got ${describeType(params.speechRate)}`);
  }
}

function validatePlaceholder(key: string, value: unknown): void {
  if (key === '') invalid('placeholder keys must be non-empty strings; config has an empty key ""');
  const where = `placeholder ${JSON.stringify(key)}`;
  if (!isPlainRecord(value)) invalid(`${where} must be a non-array object, got ${describeType(value)}`);
  checkParamTypes(value, where);
}

function validateLookupTable(table: unknown): void {
  if (!isPlainRecord(table)) invalid(`lookupTable must be a non-array object, got ${describeType(table)}`);
  for (const [name, entry] of Object.entries(table)) {
    const where = `lookupTable[${JSON.stringify(name)}]`;
    if (!isPlainRecord(entry)) invalid(`${where} must be a non-array object, got ${describeType(entry)}`);
    const tags = entry.tags;
    if (!Array.isArray(tags)) invalid(`${where}.tags must be a non-empty array, got ${describeType(tags)}`);
    if (tags.length === 0) invalid(`${where}.tags must be a non-empty array, got an empty array`);
    tags.forEach((element: unknown, i) => {
      if (typeof element === 'string') return;
      if (!Array.isArray(element))
        invalid(`${where}.tags[${i}] must be a string or an array of strings, got ${describeType(element)}`);
      element.forEach((inner: unknown, j) => {
        if (typeof inner !== 'string')
          invalid(`${where}.tags[${i}][${j}] must be a string, got ${describeType(inner)}`);
      });
    });
    checkParamTypes(entry, where);
  }
}

function validateFallbackConfig(fallback: unknown): void {
  if (!isPlainRecord(fallback))
    invalid(`fallbackConfig must be a non-array object, got ${describeType(fallback)}`);
  if (typeof fallback.voiceId !== 'string') {
    invalid(`fallbackConfig.voiceId must be a string, got ${describeType(fallback.voiceId)}`);
  }
  checkParamTypes(fallback, 'fallbackConfig');
}

function validateSplitterMarks(marks: unknown): void {
  if (!Array.isArray(marks)) invalid(`splitterMarks must be an array, got ${describeType(marks)}`);
  marks.forEach((mark: unknown, i) => {
    if (typeof mark !== 'string' || codePointLength(mark) !== 2) {
      const got = typeof mark === 'string' ? `${codePointLength(mark)} characters` : describeType(mark);
      invalid(`splitterMarks[${i}] must be a string of exactly 2 characters, got ${got}`);
    }
  });
}

function describePath(path: string, key: string | number): string {
  if (typeof key === 'number') return `${path}[${key}]`;
  return path === ''
    ? JSON.stringify(key)
    : `${path}.${/^[A-Za-z_$][\w$]*$/.test(key) ? key : JSON.stringify(key)}`;
}

/** Refuses control characters in keys and strings and non-finite numbers anywhere in `config` (no recursion). */
function validateStorableValues(config: Record<string, unknown>): void {
  const pending: Array<[value: unknown, path: string]> = [[config, '']];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    const [value, path] = next;
    if (typeof value === 'string') {
      if (controlCharacterIndex(value) !== -1) invalid(`${path} ${CONTROL_CHARACTER_MESSAGE}`);
    } else if (typeof value === 'number') {
      if (!Number.isFinite(value)) invalid(`${path} must be a finite number`);
    } else if (Array.isArray(value)) {
      for (let i = value.length - 1; i >= 0; i--) pending.push([value[i], describePath(path, i)]);
    } else if (isPlainRecord(value)) {
      const entries = Object.entries(value);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [key, child] = entries[i] as [string, unknown];
        if (controlCharacterIndex(key) !== -1)
          invalid(
            `key ${JSON.stringify(key)}${path === '' ? '' : ` in ${path}`} ${CONTROL_CHARACTER_MESSAGE}`,
          );
        pending.push([child, describePath(path, key)]);
      }
    }
  }
}

/**
 * Bounds on a splitter config beyond the spec, far above any real dialogue script: with them and
 * SPLITTER_MAX_MARKERS one split costs at most a few milliseconds, and a config stored, listed or
 * echoed in a task record stays small (free-form parameters would otherwise fill the whole body).
 */
export const SPLITTER_CONFIG_BOUNDS = {
  /** UTF-8 bytes of the whole config as JSON. */
  configBytes: 64 * 1024,
  /** UTF-8 bytes of one placeholder entry or of fallbackConfig as JSON. */
  entryBytes: 4 * 1024,
  /** Placeholder keys (every key but the three reserved ones). */
  placeholderKeys: 500,
  /** Characters (UTF-16 code units) of one placeholder key. */
  placeholderKeyLength: 100,
  /** Entries of splitterMarks: each open character found in a text is checked against its marks. */
  splitterMarks: 64,
  lookupTableEntries: 500,
  /** Tag strings across every lookupTable entry's tags. */
  lookupTableTags: 2000,
  /** Distinct parameter names across placeholders, lookupTable entries and fallbackConfig: the params in force, copied at every marker, hold at most this many keys. */
  parameterNames: 64,
  /** JSON values (objects, arrays, strings, numbers, …) in the whole config. */
  values: 10_000,
} as const;

function overBound(field: string, count: number | string, unit: string, bound: number): never {
  invalid(`${field} has ${count} ${unit}; at most ${bound} are allowed`);
}

/**
 * Refuses a config beyond SPLITTER_CONFIG_BOUNDS with 400 TTS_SPLITTER_INVALID naming the field and
 * the bound. Run on create/update and before every split, not when a saved row is loaded, so a
 * splitter saved before the bounds still lists and reads (and is refused only when used).
 */
export function checkSplitterConfigBounds(config: SplitterConfig): void {
  const b = SPLITTER_CONFIG_BOUNDS;
  const keys = placeholderEntries(config).map(([key]) => key);
  if (keys.length > b.placeholderKeys)
    overBound('config', keys.length, 'placeholder keys', b.placeholderKeys);
  const long = keys.find((key) => key.length > b.placeholderKeyLength);
  if (long !== undefined)
    overBound(
      `placeholder key ${JSON.stringify(`${long.slice(0, 20)}…`)}`,
      long.length,
      'characters',
      b.placeholderKeyLength,
    );
  const marks = Array.isArray(config.splitterMarks) ? config.splitterMarks.length : 0;
  if (marks > b.splitterMarks) overBound('splitterMarks', marks, 'entries', b.splitterMarks);
  const table = isPlainRecord(config.lookupTable) ? Object.values(config.lookupTable) : [];
  if (table.length > b.lookupTableEntries)
    overBound('lookupTable', table.length, 'entries', b.lookupTableEntries);
  // The lookupTable's `tags` selects an entry and is not a parameter.
  const names = new Set<string>();
  const paramSets: Array<[params: unknown, skip: string | null]> = [
    ...placeholderEntries(config).map(([, params]): [unknown, null] => [params, null]),
    ...table.map((entry): [unknown, string] => [entry, 'tags']),
    [config.fallbackConfig, null],
  ];
  for (const [params, skip] of paramSets) {
    for (const name of isPlainRecord(params) ? Object.keys(params) : []) {
      if (name !== skip) names.add(name);
      if (names.size > b.parameterNames)
        overBound('config', `more than ${b.parameterNames}`, 'distinct parameter names', b.parameterNames);
    }
  }
  let tags = 0;
  for (const entry of table) {
    for (const element of isPlainRecord(entry) && Array.isArray(entry.tags) ? (entry.tags as unknown[]) : [])
      tags += Array.isArray(element) ? element.length : 1;
  }
  if (tags > b.lookupTableTags) overBound('lookupTable', tags, 'tags across its entries', b.lookupTableTags);
  // Iterative count that stops at the bound: no recursion, no full walk of a huge config.
  let values = 0;
  const pending: unknown[] = [config];
  while (pending.length > 0) {
    const value = pending.pop();
    if (++values > b.values) overBound('config', `more than ${b.values}`, 'JSON values', b.values);
    const children = Array.isArray(value)
      ? (value as unknown[])
      : isPlainRecord(value)
        ? Object.values(value)
        : [];
    for (const child of children) pending.push(child);
  }
  checkByteBounds(config);
}

/** UTF-8 bytes of `value` as JSON. */
export function jsonBytes(value: unknown): number {
  return Buffer.byteLength(JSON.stringify(value) ?? '', 'utf8');
}

/** The whole config, then each entry: the counts above leave one huge string or number of keys unbounded. */
function checkByteBounds(config: SplitterConfig): void {
  const b = SPLITTER_CONFIG_BOUNDS;
  const total = jsonBytes(config);
  if (total > b.configBytes) overBound('config', total, 'bytes of JSON', b.configBytes);
  const entries: Array<[string, unknown]> = [
    ...placeholderEntries(config).map(([key, params]): [string, unknown] => [
      `placeholder ${JSON.stringify(key.length > 20 ? `${key.slice(0, 20)}…` : key)}`,
      params,
    ]),
    ['fallbackConfig', config.fallbackConfig],
  ];
  for (const [field, entry] of entries) {
    const bytes = entry === undefined ? 0 : jsonBytes(entry);
    if (bytes > b.entryBytes) overBound(field, bytes, 'bytes of JSON', b.entryBytes);
  }
}

/** Deep-copies plain objects and arrays in key order; `defineProperty` keeps a `__proto__` key an ordinary key. */
export function cloneJson<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v: unknown) => cloneJson(v)) as T;
  if (!isPlainRecord(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    Object.defineProperty(out, k, {
      value: cloneJson(v),
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out as T;
}

/** Checks `config` against the splitter config rules; returns a typed copy in input key order or throws TTS_SPLITTER_INVALID. */
export function validateSplitterConfig(config: unknown): SplitterConfig {
  // Rule 1.
  if (!isPlainRecord(config)) invalid(`config must be a non-array object, got ${describeType(config)}`);
  const keys = Object.keys(config);
  // Rule 2.
  const hasPlaceholder = keys.some((k) => !RESERVED_KEYS.has(k));
  if (
    !hasPlaceholder &&
    !Object.hasOwn(config, 'fallbackConfig') &&
    !Object.hasOwn(config, 'splitterMarks')
  ) {
    invalid('config must contain at least one placeholder key, or fallbackConfig, or splitterMarks');
  }
  // Rules 3–6, in the input's key order so the first reported failure is the first one written.
  for (const key of keys) {
    const value = config[key];
    if (key === 'lookupTable') validateLookupTable(value);
    else if (key === 'fallbackConfig') validateFallbackConfig(value);
    else if (key === 'splitterMarks') validateSplitterMarks(value);
    else validatePlaceholder(key, value);
  }
  validateStorableValues(config);
  return cloneJson(config);
}
