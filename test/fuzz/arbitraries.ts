/**
 * fast-check generators of the fuzz suite, shared by the CI test
 * (test/fuzz.http.test.ts) and the long run (bench/fuzz.ts). Mostly-valid requests with one or two
 * mutations find more than noise: each family starts from the real shape of a route's input
 * (generate bodies, splitter configs, voice bodies, stream/audio queries and conditional headers)
 * and replaces one value with an odd one (control characters, lone surrogates, 1e309, -0, deep
 * nesting, long strings, wrong types, `__proto__` keys), drops or adds a key, breaks the JSON text,
 * or sends it with another Content-Type, method or credential.
 *
 * Generation stays cheap: generate and one-shot bodies name voices that do not exist (validation
 * runs in full, then 404 VOICE_NOT_FOUND), so no case starts a synthesis; DELETE never names the
 * context's own resources, so the fixtures stay for the whole run.
 */
import fc from 'fast-check';
import type { FuzzRequest } from './invariants.js';

/** The resources a fuzz run works against, created before it starts. */
export interface FuzzContext {
  /** Bearer key of the fuzzing account. */
  key: string;
  /** Bearer key of another account (cross-tenant credentials). */
  otherKey: string;
  adminToken: string;
  accountId: string;
  /** A ready voice of the account (never used in generate bodies, so nothing is synthesised). */
  voiceId: string;
  /** A stored splitter whose voices do not exist (generate with it answers 404, never synthesises). */
  splitterId: string;
  /** A generated task with stored audio, and its stream token. */
  taskId: string;
  authToken: string;
  /** ETag of the task's finished audio (conditional headers that match). */
  audioEtag: string;
  /** The app's BODY_LIMIT_BYTES (bodies just over it). */
  bodyLimitBytes: number;
}

/** A JSON literal written as is: numbers JSON.stringify cannot produce (1e309, -0, 1E400) or invalid JSON. */
export class RawJson {
  constructor(readonly text: string) {}
}

/** A JSON value of a fuzzed body; RawJson splices literal text in. */
export type JsonValue =
  null | boolean | number | string | RawJson | JsonValue[] | { [key: string]: JsonValue };

/** Serialises a JsonValue; own `__proto__` keys are written like any key. */
export function toJsonText(value: JsonValue): string {
  if (value instanceof RawJson) return value.text;
  if (Array.isArray(value)) return `[${value.map(toJsonText).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value)
      .map(([k, v]) => `${JSON.stringify(k)}:${toJsonText(v)}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}

/** An object with `key` as an own property, `__proto__` included. */
function withKey(
  obj: { [key: string]: JsonValue },
  key: string,
  value: JsonValue,
): { [key: string]: JsonValue } {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
  return obj;
}

function copyJson(value: JsonValue): JsonValue {
  if (value instanceof RawJson || value === null || typeof value !== 'object') return value;
  if (Array.isArray(value)) return value.map(copyJson);
  const out: { [key: string]: JsonValue } = {};
  for (const [k, v] of Object.entries(value)) withKey(out, k, copyJson(v));
  return out;
}

const UNKNOWN_VOICE = '00000000-0000-4000-8000-00000000f022';

/** Strings that have broken services before: controls, NUL, lone surrogates, bidi, BOM, names of prototypes. */
const ODD_STRINGS = [
  '',
  ' ',
  '\u0000',
  'a\u0000b',
  '\u0007\u001b[31m',
  '\u007f',
  '\r\n',
  '\t',
  '\ud800',
  '\udfff',
  'x\ud83dy',
  '\u202e\u2066',
  '\ufeff',
  '\u00ff\u0100',
  '💥🔊',
  '__proto__',
  'constructor',
  'prototype',
  '%00',
  '../../etc/passwd',
  "'; drop table tasks; --",
  '<script>alert(1)</script>',
  '${jndi:ldap://x}',
  'null',
  'NaN',
  '1e309',
  '【】',
  '<>',
  '<A>',
] as const;

/** Any UTF-16 code unit, lone surrogates included. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((c) => String.fromCharCode(c));

/** An odd string: a known troublemaker, random code units, or a long run. */
export const oddString: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.constantFrom(...ODD_STRINGS), weight: 5 },
  { arbitrary: fc.string({ unit: codeUnit, maxLength: 24 }), weight: 3 },
  { arbitrary: fc.string({ unit: 'grapheme', maxLength: 24 }), weight: 2 },
  {
    arbitrary: fc
      .tuple(fc.constantFrom('a', 'é', '😀', '<A>', '\u0000', ' '), fc.integer({ min: 60, max: 12_000 }))
      .map(([unit, n]) => unit.repeat(n)),
    weight: 1,
  },
);

/** Numbers that are out of range, not finite, negative zero, huge or not numbers at all. */
export const oddNumber: fc.Arbitrary<JsonValue> = fc.oneof(
  fc.constantFrom<JsonValue>(
    new RawJson('1e309'),
    new RawJson('-1e309'),
    new RawJson('-0'),
    new RawJson('1E400'),
    new RawJson('1e-400'),
    new RawJson('123456789012345678901234567890'),
    new RawJson('0.30000000000000004'),
    0,
    -1,
    0.49999,
    2.0000001,
    1e308,
    2 ** 53 + 1,
    2 ** 32,
    -(2 ** 31),
  ),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.integer(),
);

/** Arrays/objects nested `depth` deep, as raw text (depths past the parser's 64 included). */
export const deepNesting: fc.Arbitrary<JsonValue> = fc
  .tuple(fc.integer({ min: 2, max: 3000 }), fc.boolean())
  .map(([depth, arrays]) =>
    arrays
      ? new RawJson(`${'['.repeat(depth)}1${']'.repeat(depth)}`)
      : new RawJson(`${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`),
  );

/** Objects carrying prototype keys (must be parsed safely, never refused, never polluting). */
export const prototypeObject: fc.Arbitrary<JsonValue> = fc.constantFrom<JsonValue>(
  withKey({}, '__proto__', { polluted: true, voiceId: 'x' }),
  { constructor: { prototype: { polluted: true } } },
  withKey({ voiceId: 'x' }, '__proto__', null),
);

/** A replacement value of any kind. */
export const oddValue: fc.Arbitrary<JsonValue> = fc.oneof(
  { arbitrary: oddString, weight: 5 },
  { arbitrary: oddNumber, weight: 4 },
  { arbitrary: fc.constantFrom<JsonValue>(null, true, false, [], {}, [null], ['a'], { a: 1 }), weight: 3 },
  { arbitrary: deepNesting, weight: 1 },
  { arbitrary: prototypeObject, weight: 1 },
  {
    arbitrary: fc.constantFrom<JsonValue>(
      new RawJson('NaN'),
      new RawJson('Infinity'),
      new RawJson('undefined'),
      new RawJson("'single'"),
      new RawJson('0x10'),
      new RawJson('"\\ud800"'),
      new RawJson('"\\u0000"'),
      new RawJson('"a\\x00"'),
    ),
    weight: 1,
  },
);

// ---------------------------------------------------------------- valid shapes

const voiceRef = fc.constantFrom(
  UNKNOWN_VOICE,
  'voice-that-does-not-exist',
  '00000000-0000-4000-8000-000000000000',
);
const marker = fc.constantFrom('<A>', '<B>', '【N】', '[x]', '{y}', '(z)');

/** A valid splitter config whose voices do not exist. */
export const splitterConfig: fc.Arbitrary<JsonValue> = fc
  .record({
    placeholders: fc.uniqueArray(marker, { maxLength: 3 }),
    speechRate: fc.option(fc.constantFrom(0.5, 1, 1.5, 2), { nil: undefined }),
    marks: fc.option(fc.subarray(['【】', '<>', '[]', '{}', '()']), { nil: undefined }),
    lookup: fc.boolean(),
    fallback: fc.boolean(),
    voiceId: voiceRef,
  })
  .map(({ placeholders, speechRate, marks, lookup, fallback, voiceId }) => {
    const config: { [key: string]: JsonValue } = {};
    for (const key of placeholders) {
      config[key] = speechRate === undefined ? { voiceId } : { voiceId, speechRate };
    }
    if (marks !== undefined) config.splitterMarks = marks;
    if (lookup) config.lookupTable = { narrator: { tags: ['N', ['x', 'y']], voiceId, speechRate: 1 } };
    if (fallback || Object.keys(config).length === 0) config.fallbackConfig = { voiceId };
    return config;
  });

const dialogue = fc.constantFrom(
  '<A>Hello.<B>Hi!',
  '【N】One. Two.',
  'plain text',
  '<A>',
  '[x]a{y}b(z)c',
  'Hi.',
);

/** One generate content item (voice unknown, so a valid item is 404 VOICE_NOT_FOUND). */
const contentItem: fc.Arbitrary<JsonValue> = fc
  .record(
    {
      type: fc.constant('text'),
      text: fc.constantFrom('Hi.', 'Hello there.', 'a'),
      voiceId: voiceRef,
      speechRate: fc.constantFrom(0.5, 1, 2),
      preset: fc.constantFrom('creative', 'balance', 'stable'),
      language: fc.constantFrom('en', 'en-GB', 'zh_CN'),
      seed: fc.nat({ max: 2 ** 32 - 1 }),
      interval: fc.constantFrom(0, 0.5, 10),
      vivid: fc.boolean(),
      emo_switch: fc.oneof(fc.boolean(), fc.array(fc.integer({ min: 0, max: 1 }), { maxLength: 3 })),
    },
    { requiredKeys: ['text', 'voiceId'] },
  )
  .map((item) => item as JsonValue);

/** A generate body in either shape (contents, or text with an inline or saved splitter). */
function generateBody(ctx: FuzzContext): fc.Arbitrary<JsonValue> {
  return fc.oneof(
    fc.array(contentItem, { minLength: 1, maxLength: 3 }).map((contents): JsonValue => ({ contents })),
    fc.record({ text: dialogue, splitter: splitterConfig }).map((b) => b as JsonValue),
    dialogue.map((text): JsonValue => ({ text, splitterId: ctx.splitterId })),
  );
}

const splitterName = fc.constantFrom('dialogue', 'fz', 'Narration 1', 'x'.repeat(100));

/** The JSON-body routes, each with its valid body. */
function jsonRoutes(
  ctx: FuzzContext,
): fc.Arbitrary<{ route: string; url: string; body: JsonValue; admin: boolean }> {
  const route = (name: string, url: string, body: fc.Arbitrary<JsonValue>, admin = false) =>
    body.map((b) => ({ route: name, url, body: b, admin }));
  return fc.oneof(
    route(
      'splitter-create',
      '/api/splitter',
      fc.record({ name: splitterName, config: splitterConfig }).map((b) => b as JsonValue),
    ),
    route(
      'splitter-update',
      `/api/splitter/${ctx.splitterId}`,
      fc
        .record({ name: splitterName, config: splitterConfig }, { requiredKeys: [] })
        .map((b) => b as JsonValue),
    ),
    route(
      'splitter-preview',
      '/api/splitter/preview',
      fc.oneof(
        fc.record({ text: dialogue, splitter: splitterConfig }).map((b) => b as JsonValue),
        dialogue.map((text): JsonValue => ({ text, splitterId: ctx.splitterId })),
      ),
    ),
    route('generate', '/api/tts/generate', generateBody(ctx)),
    route(
      'simple-generate',
      '/api/tts/simple-generate',
      fc
        .record(
          {
            text: fc.constantFrom('Hi.', 'Hello.'),
            voiceId: voiceRef,
            speechRate: fc.constant(1),
            stream: fc.boolean(),
            direct_stream: fc.boolean(),
          },
          { requiredKeys: ['text', 'voiceId'] },
        )
        .map((b) => b as JsonValue),
    ),
    route(
      'voice-create',
      '/api/voice',
      fc
        .record(
          {
            name: fc.constantFrom('Narrator', 'fz voice'),
            language: fc.constantFrom('en', 'en-GB'),
            description: fc.constantFrom('calm', ''),
            modelVersion: fc.constantFrom('v3.0', 'v4.0'),
            engine: fc.constant<JsonValue>({ engine: 'espeak', voice: 'en-us', variant: 'f3' }),
          },
          { requiredKeys: ['name'] },
        )
        .map((b) => b as JsonValue),
    ),
    route('voice-create-legacy', '/api/tts/voice', fc.constant<JsonValue>({ name: 'Legacy path' })),
    route(
      'admin-import',
      `/admin/accounts/${ctx.accountId}/voices/import`,
      fc
        .record({ name: fc.constantFrom('imported'), version: fc.constantFrom('v1.0', 'v2.0', 'v4.0') })
        .map((b) => b as JsonValue),
      true,
    ),
    route('admin-account', '/admin/accounts', fc.constant<JsonValue>({ name: 'fz-account' }), true),
  );
}

// ---------------------------------------------------------------- mutations

type Path = (string | number)[];

function pathsOf(value: JsonValue, path: Path = [], out: Path[] = []): Path[] {
  out.push(path);
  if (value instanceof RawJson || value === null || typeof value !== 'object') return out;
  if (Array.isArray(value)) value.forEach((v, i) => pathsOf(v, [...path, i], out));
  else for (const [k, v] of Object.entries(value)) pathsOf(v, [...path, k], out);
  return out;
}

/** One change to a JSON body at one place. */
export type Mutation =
  | { kind: 'replace'; value: JsonValue }
  | { kind: 'delete' }
  | { kind: 'add-key'; key: string; value: JsonValue }
  | { kind: 'wrap'; depth: number };

export const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { arbitrary: oddValue.map((value): Mutation => ({ kind: 'replace', value })), weight: 8 },
  { arbitrary: fc.constant<Mutation>({ kind: 'delete' }), weight: 2 },
  {
    arbitrary: fc
      .record({
        key: fc.oneof(oddString, fc.constantFrom('__proto__', 'constructor', 'voiceId', 'fallbackConfig')),
        value: oddValue,
      })
      .map(({ key, value }): Mutation => ({ kind: 'add-key', key, value })),
    weight: 2,
  },
  {
    arbitrary: fc.integer({ min: 1, max: 100 }).map((depth): Mutation => ({ kind: 'wrap', depth })),
    weight: 1,
  },
);

/** Applies `m` at the `pick`-th place of `body` (a copy; the input is left as it is). */
export function applyMutation(body: JsonValue, pick: number, m: Mutation): JsonValue {
  const root = copyJson(body);
  const paths = pathsOf(root);
  const path = paths[pick % paths.length] ?? [];
  const transform = (current: JsonValue): JsonValue | undefined => {
    switch (m.kind) {
      case 'replace':
        return m.value;
      case 'delete':
        return undefined;
      case 'add-key':
        if (
          current !== null &&
          typeof current === 'object' &&
          !Array.isArray(current) &&
          !(current instanceof RawJson)
        )
          return withKey(current, m.key, m.value);
        return withKey({}, m.key, m.value);
      case 'wrap': {
        let wrapped = current;
        for (let i = 0; i < m.depth; i++) wrapped = [wrapped];
        return wrapped;
      }
    }
  };
  if (path.length === 0) return transform(root) ?? new RawJson('');
  let parent: JsonValue = root;
  for (const step of path.slice(0, -1)) parent = (parent as Record<string | number, JsonValue>)[step] ?? null;
  const last = path[path.length - 1] as string | number;
  const container = parent as Record<string | number, JsonValue> | JsonValue[];
  const next = transform((container as Record<string | number, JsonValue>)[last] ?? null);
  if (next === undefined) {
    if (Array.isArray(container) && typeof last === 'number') container.splice(last, 1);
    else delete (container as Record<string, JsonValue>)[last];
  } else if (Array.isArray(container) && typeof last === 'number') container[last] = next;
  else withKey(container as { [key: string]: JsonValue }, String(last), next);
  return root;
}

/** What happens to the JSON text on the wire. */
export type Framing =
  'as-is' | 'truncated' | 'garbage-tail' | 'invalid-utf8' | 'empty' | 'bom' | 'over-limit';

const framing: fc.Arbitrary<{ kind: Framing; at: number }> = fc.record({
  kind: fc.oneof(
    { arbitrary: fc.constant<Framing>('as-is'), weight: 12 },
    {
      arbitrary: fc.constantFrom<Framing>(
        'truncated',
        'garbage-tail',
        'invalid-utf8',
        'empty',
        'bom',
        'over-limit',
      ),
      weight: 3,
    },
  ),
  at: fc.nat(),
});

function frame(text: string, f: { kind: Framing; at: number }, limit: number): string | Buffer {
  switch (f.kind) {
    case 'as-is':
      return text;
    case 'truncated':
      return text.slice(0, f.at % Math.max(1, text.length));
    case 'garbage-tail':
      return `${text}}]"\u0000`;
    case 'invalid-utf8': {
      const bytes = Buffer.from(text);
      const at = f.at % Math.max(1, bytes.length);
      return Buffer.concat([
        bytes.subarray(0, at),
        Buffer.from([0xc3, 0x28, 0xff, 0xfe]),
        bytes.subarray(at),
      ]);
    }
    case 'empty':
      return '';
    case 'bom':
      return `\ufeff${text}`;
    case 'over-limit':
      return `{"pad":"${'x'.repeat(limit + 16)}","body":${text}}`;
  }
}

/** Content-Type values: right, wrongly spelled, other media, malformed. */
export const contentType: fc.Arbitrary<string | undefined> = fc.oneof(
  { arbitrary: fc.constant('application/json'), weight: 14 },
  {
    arbitrary: fc.constantFrom(
      undefined,
      'application/json; charset=utf-8',
      'application/json; charset=utf-16',
      'APPLICATION/JSON',
      'application/json;',
      'application/json, text/plain',
      'application/vnd.api+json',
      'text/plain',
      'text/json',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/octet-stream',
      'application/zip',
      '*/*',
      '',
      'json',
      '/',
      ';;;',
      'application/json; charset="',
    ),
    weight: 3,
  },
);

/** Authorization values for a bearer route: the key, spellings of it, other credentials, junk. */
export function authorization(ctx: FuzzContext): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { arbitrary: fc.constant(`Bearer ${ctx.key}`), weight: 12 },
    {
      arbitrary: fc.constantFrom(
        undefined,
        '',
        'Bearer',
        'Bearer ',
        `bearer ${ctx.key}`,
        `BEARER ${ctx.key}`,
        `Bearer  ${ctx.key}`,
        `Bearer ${ctx.key} `,
        `Bearer ${ctx.key}x`,
        `Bearer ${ctx.key.slice(0, -1)}`,
        `Bearer ${ctx.key.toUpperCase()}`,
        `Bearer ${ctx.otherKey}`,
        `Bearer ${ctx.adminToken}`,
        `Basic ${Buffer.from(`${ctx.key}:`).toString('base64')}`,
        `Token ${ctx.key}`,
        `Bearer ${ctx.key}, Bearer ${ctx.otherKey}`,
        'Bearer sk-00000000000000000000000000000000',
        `Bearer ${'a'.repeat(5000)}`,
        'Bearer \u00ff\u00fe',
      ),
      weight: 3,
    },
  );
}

function adminAuthorization(ctx: FuzzContext): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { arbitrary: fc.constant(`Bearer ${ctx.adminToken}`), weight: 4 },
    fc.constantFrom(
      undefined,
      `Bearer ${ctx.key}`,
      `Bearer ${ctx.adminToken}x`,
      'Bearer ',
      `Basic ${ctx.adminToken}`,
    ),
  );
}

function headersOf(entries: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(entries)) if (v !== undefined) out[k] = v;
  return out;
}

/** A JSON-body request: a route's valid body with 0–2 mutations, framing, Content-Type, credentials, method. */
export function jsonBodyRequest(ctx: FuzzContext): fc.Arbitrary<FuzzRequest> {
  return fc
    .record({
      target: jsonRoutes(ctx),
      mutations: fc.array(fc.tuple(fc.nat(), mutation), { minLength: 0, maxLength: 2 }),
      framing,
      contentType,
      auth: authorization(ctx),
      adminAuth: adminAuthorization(ctx),
      method: fc.oneof(
        { arbitrary: fc.constant('POST'), weight: 10 },
        fc.constantFrom('PUT', 'PATCH', 'DELETE', 'GET', 'OPTIONS'),
      ),
    })
    .map(({ target, mutations, framing: f, contentType: type, auth, adminAuth, method }) => {
      let body = target.body;
      for (const [pick, m] of mutations) body = applyMutation(body, pick, m);
      const payload = frame(toJsonText(body), f, ctx.bodyLimitBytes);
      const what = mutations.map(([, m]) => m.kind).join('+') || 'valid';
      return {
        method,
        url: target.url,
        headers: headersOf({ 'content-type': type, authorization: target.admin ? adminAuth : auth }),
        payload,
        label: `json:${target.route}:${what}:${f.kind}`,
      };
    });
}

// ---------------------------------------------------------------- ids, queries, conditional headers

/** Path ids: real, unknown, another account's shape, and values that must never reach storage. */
export function idValue(real: string | undefined): fc.Arbitrary<string> {
  const odd = fc.constantFrom(
    '00000000-0000-4000-8000-000000000000',
    'not-a-uuid',
    '%00',
    'a%00b',
    '%0d%0a',
    '..',
    '%2e%2e',
    '..%2f..%2fetc',
    '%5c',
    '%ZZ',
    '%E0%A4%A',
    '%C0%AF',
    'x'.repeat(101),
    '%F0%9F%92%A5',
    'preview',
    '__proto__',
    '%20',
    '1',
    '-1',
    '*',
  );
  const random = fc.oneof(
    fc.uuid(),
    fc.string({
      unit: fc.constantFrom('a', 'F', '0', '-', '.', '~', '_', '%41', '%00', '%7f'),
      minLength: 1,
      maxLength: 40,
    }),
  );
  return real === undefined
    ? fc.oneof(odd, random)
    : fc.oneof(
        { arbitrary: fc.constant(real), weight: 3 },
        { arbitrary: odd, weight: 2 },
        { arbitrary: random, weight: 1 },
        fc.constant(real.toUpperCase()),
      );
}

/** `{contentIndex}` segments: valid, out of range, and not numbers. */
export const contentIndexValue: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '0',
    '1',
    '00',
    '-1',
    '1e0',
    '0x0',
    '999999',
    '9999999',
    'NaN',
    '%200',
    '0%00',
    '%EF%BC%91',
    '1.0',
    '+0',
  ),
  fc.nat({ max: 5 }).map(String),
);

const sessionIdValue = fc.oneof(
  fc.constantFrom(
    '',
    'abc',
    'A-b_9',
    'a'.repeat(64),
    'a'.repeat(65),
    'a b',
    'é',
    '%00',
    '%0d%0a',
    'a/b',
    '..',
  ),
  fc.string({ unit: fc.constantFrom('a', 'Z', '9', '_', '-'), minLength: 1, maxLength: 70 }),
);

const dispositionValue = fc.constantFrom(
  'attachment',
  'inline',
  'attachment; filename="speech.mp3"',
  "attachment; filename*=UTF-8''%E2%82%AC%20speech.mp3",
  'attachment; filename="a%0d%0aSet-Cookie: x=1"',
  'attachment%0d%0aX-Injected: 1',
  'inline; filename="../../etc/passwd"',
  'attachment; filename="\u00e9.mp3"',
  'attachment; filename=' + 'a'.repeat(3000),
  'bogus',
  '',
  '%00',
  'attachment; filename="x"; filename="y"',
);

function encodeQueryValue(v: string): string {
  // Values already written percent-encoded stay so; the rest is encoded (lone surrogates cannot be).
  if (/%[0-9A-Fa-f]{2}/.test(v)) return v.replace(/ /g, '%20');
  try {
    return encodeURIComponent(v);
  } catch {
    return '%ED%A0%80';
  }
}

/** The stream/audio query: auth, i, response-content-disposition, repeats and extras. */
function audioQuery(ctx: FuzzContext): fc.Arbitrary<string> {
  const auth = fc.oneof(
    { arbitrary: fc.constant(ctx.authToken), weight: 5 },
    fc.constantFrom(
      '',
      'x',
      ctx.authToken.toUpperCase(),
      `${ctx.authToken}0`,
      ctx.authToken.slice(1),
      ctx.key,
      '%00',
    ),
  );
  return fc
    .record(
      {
        auth,
        authTwice: fc.oneof({ arbitrary: fc.constant(undefined), weight: 3 }, fc.constant(ctx.authToken)),
        i: sessionIdValue,
        iTwice: sessionIdValue,
        rcd: dispositionValue,
        extra: fc.constantFrom('foo=bar', '%61uth=x', 'AUTH=x', 'a[b]=1', '__proto__=1', '&&&', '=', 'x=%'),
      },
      { requiredKeys: ['auth'] },
    )
    .map((q) => {
      const parts: string[] = [];
      if (q.auth !== undefined) parts.push(`auth=${encodeQueryValue(q.auth)}`);
      if (q.authTwice !== undefined) parts.push(`auth=${q.authTwice}`);
      if (q.i !== undefined) parts.push(`i=${encodeQueryValue(q.i)}`);
      if (q.iTwice !== undefined && q.i !== undefined) parts.push(`i=${encodeQueryValue(q.iTwice)}`);
      if (q.rcd !== undefined) parts.push(`response-content-disposition=${encodeQueryValue(q.rcd)}`);
      if (q.extra !== undefined) parts.push(q.extra);
      return parts.length === 0 ? '' : `?${parts.join('&')}`;
    });
}

/** Range header values, valid and broken. */
export const rangeValue = fc.oneof(
  fc.constantFrom(
    'bytes=0-0',
    'bytes=0-10',
    'bytes=-5',
    'bytes=5-',
    'bytes=0-0,2-3',
    'bytes=0-1,0-1',
    'bytes=10-5',
    'bytes=999999999-',
    'bytes=',
    'bytes=-0',
    'bytes=0-1e3',
    'items=0-1',
    'bytes=0-99999999999999999999',
    'bytes= 0-1',
    'bytes=--1',
    'bytes=0--1',
    'bytes=a-b',
    'BYTES=0-1',
    'bytes=0-1,',
    ',',
    '',
    `bytes=${Array.from({ length: 300 }, (_, i) => `${i}-${i}`).join(',')}`,
  ),
  fc.tuple(fc.nat({ max: 50_000 }), fc.nat({ max: 50_000 })).map(([a, b]) => `bytes=${a}-${b}`),
);

/** Entity-tag lists for If-Match / If-None-Match / If-Range: matching, not matching, weak, broken. */
function etagValue(ctx: FuzzContext): fc.Arbitrary<string> {
  return fc.constantFrom(
    ctx.audioEtag,
    `W/${ctx.audioEtag}`,
    '*',
    '"x"',
    'W/"x"',
    `"x", ${ctx.audioEtag}`,
    'x',
    '"unterminated',
    '""',
    ', ,',
    `${ctx.audioEtag}, *`,
    'W/',
    '"\u00ff"',
  );
}

const dateValue = fc.constantFrom(
  'Thu, 01 Jan 1970 00:00:00 GMT',
  'Fri, 31 Dec 9999 23:59:59 GMT',
  new Date().toUTCString(),
  'Sunday, 06-Nov-94 08:49:37 GMT',
  'Sun Nov  6 08:49:37 1994',
  'yesterday',
  '0',
  '',
);

/** Conditional and range headers of an audio request. */
function conditionalHeaders(ctx: FuzzContext): fc.Arbitrary<Record<string, string>> {
  // Each header is absent more often than not, so plain 200s, 206s and 304s are reached too.
  const sometimes = <T>(arbitrary: fc.Arbitrary<T>, absentWeight: number) =>
    fc.oneof({ arbitrary: fc.constant(undefined), weight: absentWeight }, { arbitrary, weight: 1 });
  return fc
    .record({
      range: sometimes(rangeValue, 1),
      'if-range': sometimes(fc.oneof(etagValue(ctx), dateValue), 3),
      'if-none-match': sometimes(etagValue(ctx), 4),
      'if-match': sometimes(etagValue(ctx), 5),
      'if-modified-since': sometimes(dateValue, 6),
      'if-unmodified-since': sometimes(dateValue, 6),
    })
    .map((h) => headersOf(h));
}

const AUDIO_PATHS = [
  (id: string) => `/api/tts/generate/${id}/audio.mp3`,
  (id: string, idx: string) => `/api/tts/generate/${id}/${idx}/audio.mp3`,
  (id: string) => `/api/tts/generate/${id}/stream.mp3`,
  (id: string, idx: string) => `/api/tts/generate/${id}/${idx}/stream.mp3`,
  (id: string) => `/api/tts/generate/${id}/stream`,
  (id: string, idx: string) => `/api/tts/generate/${id}/${idx}/pseudo/stream.mp3`,
] as const;

/** GET/HEAD on the audio and stream endpoints with fuzzed ids, contentIndex, query and headers. */
export function audioRequest(ctx: FuzzContext): fc.Arbitrary<FuzzRequest> {
  return fc
    .record({
      path: fc.nat({ max: AUDIO_PATHS.length - 1 }),
      id: idValue(ctx.taskId),
      idx: contentIndexValue,
      query: audioQuery(ctx),
      headers: conditionalHeaders(ctx),
      method: fc.oneof(
        { arbitrary: fc.constantFrom('GET', 'HEAD'), weight: 8 },
        fc.constantFrom('POST', 'DELETE', 'OPTIONS', 'PUT'),
      ),
      bearer: fc.option(authorization(ctx), { nil: undefined }),
    })
    .map(({ path, id, idx, query, headers, method, bearer }) => {
      const build = AUDIO_PATHS[path] ?? AUDIO_PATHS[0];
      return {
        method,
        url: `${build(id, idx)}${query}`,
        headers: headersOf({ ...headers, authorization: bearer ?? undefined }),
        label: `audio:${path}`,
      };
    });
}

/** Resource routes (detail, delete, migrate, lora, lists, account, health) under every method. */
export function resourceRequest(ctx: FuzzContext): fc.Arbitrary<FuzzRequest> {
  const listQuery = fc
    .record(
      {
        limit: fc.constantFrom('0', '1', '50', '51', '-1', '1e2', 'abc', '', '99999999999999999999', '%00'),
        offset: fc.constantFrom('0', '-1', '1.5', '9999999999', 'x', ''),
        status: fc.constantFrom('pending', 'generated', 'failed', 'bogus', ''),
        stream: fc.constantFrom('true', 'false', '1'),
      },
      { requiredKeys: [] },
    )
    .map((q) => {
      const entries = Object.entries(q).map(([k, v]) => `${k}=${v}`);
      return entries.length === 0 ? '' : `?${entries.join('&')}`;
    });
  const method = fc.oneof(
    { arbitrary: fc.constantFrom('GET', 'POST', 'DELETE'), weight: 6 },
    fc.constantFrom('PUT', 'PATCH', 'OPTIONS', 'HEAD', 'TRACE', 'PROPFIND', 'COPY', 'SEARCH'),
  );
  return fc
    .record({
      method,
      kind: fc.nat({ max: 11 }),
      real: fc.boolean(),
      query: listQuery,
      auth: authorization(ctx),
      body: fc.option(
        fc.constantFrom<string | Buffer>('{}', 'PK\u0003\u0004', Buffer.alloc(64, 1), 'null', '[]'),
        { nil: undefined },
      ),
      type: contentType,
      odd: idValue(undefined),
    })
    .map(({ method, kind, real, query, auth, body, type, odd }) => {
      // DELETE never names the fixtures, so later cases still find them.
      const pick = (id: string) => (real && method !== 'DELETE' ? id : odd);
      const urls = [
        `/api/voice/${pick(ctx.voiceId)}`,
        `/api/tts/voice/${pick(ctx.voiceId)}`,
        `/api/splitter/${pick(ctx.splitterId)}`,
        `/api/tts/generate/${pick(ctx.taskId)}${query}`,
        `/api/voice/${pick(ctx.voiceId)}/migrateV3`,
        `/api/voice/${pick(ctx.voiceId)}/migrateV2`,
        `/api/voice/${pick(ctx.voiceId)}/lora`,
        `/api/voice${query}`,
        `/api/splitter${query}`,
        `/api/tts/generate${query}`,
        '/api/account/info',
        ['/healthz', '/metrics', '/', '/api', '/api/', '/api//voice', '/API/voice', '/api/voice/', '/admin'][
          odd.length % 9
        ] ?? '/healthz',
      ];
      const url = urls[kind] ?? '/healthz';
      return {
        method,
        url,
        headers: headersOf({ authorization: auth, 'content-type': body === undefined ? undefined : type }),
        ...(body === undefined ? {} : { payload: body }),
        label: `resource:${kind}`,
      };
    });
}

/** Every in-process family, weighted toward bodies (where most validation lives). */
export function injectRequest(ctx: FuzzContext): fc.Arbitrary<FuzzRequest> {
  return fc.oneof(
    { arbitrary: jsonBodyRequest(ctx), weight: 5 },
    { arbitrary: audioRequest(ctx), weight: 3 },
    { arbitrary: resourceRequest(ctx), weight: 2 },
  );
}

// ---------------------------------------------------------------- raw socket

/** One request as bytes, and whether its framing is incomplete (the client half-closes after it). */
export interface RawCase {
  bytes: Buffer;
  /** The body is shorter than announced or the head never ends: the client sends FIN after it. */
  incomplete: boolean;
  /** The request as the invariant checker sees it (method for HEAD handling, label). */
  request: FuzzRequest;
}

const rawMethod = fc.oneof(
  { arbitrary: fc.constantFrom('GET', 'POST', 'HEAD'), weight: 8 },
  fc.constantFrom(
    'get',
    'Post',
    'PATCH',
    'OPTIONS',
    'TRACE',
    'PROPFIND',
    'CONNECT',
    'DELETE',
    'PUT',
    'M-SEARCH',
    'BREW',
    'G ET',
    '',
    'GET\u0000',
    '\u00ff',
  ),
);

const rawVersion = fc.oneof(
  { arbitrary: fc.constant('HTTP/1.1'), weight: 10 },
  fc.constantFrom('HTTP/1.0', 'HTTP/2.0', 'HTTP/0.9', 'http/1.1', 'HTTP/1.1 x', 'HTTP/1.12', ''),
);

/** A header line that breaks a rule: bytes outside the grammar, obs-fold, no colon, huge. */
const rawOddHeader: fc.Arbitrary<string> = fc.constantFrom(
  'X-Nul: a\u0000b',
  'X-Cr: a\rb',
  'X-Lf-Only: a\nb',
  'X-Obs: caf\u00e9',
  'X-Fold: a\r\n  folded',
  'NoColon',
  'Space : before-colon',
  ': empty-name',
  'X-Ctl: \u0007',
  `X-Huge: ${'h'.repeat(20_000)}`,
  'Transfer-Encoding: chunked',
  'Transfer-Encoding: gzip, chunked',
  'Transfer-Encoding: chunked, identity',
  'Transfer-Encoding:\tchunked',
  'Content-Length: -1',
  'Content-Length: 1e3',
  'Content-Length: 0x10',
  'Content-Length: 5, 6',
  'Expect: 100-continue',
  'Expect: 200-ok',
  'Expect: ',
  'Host: a\r\nHost: b',
  'Connection: keep-alive, Upgrade',
  'Upgrade: websocket',
  'X-Service-App-Request-Id: spoofed',
  'Authorization: Bearer \u00ff\u00fe',
  'Authorization: Bearer a\u0000b',
  'Range: bytes=0-1\u0000',
  'If-None-Match: "a\u0000"',
);

function rawTargets(ctx: FuzzContext): fc.Arbitrary<string> {
  return fc.oneof(
    { arbitrary: audioRequest(ctx).map((r) => r.url), weight: 3 },
    { arbitrary: resourceRequest(ctx).map((r) => r.url), weight: 2 },
    fc.constantFrom(
      '*',
      '/',
      'http://example.com/healthz',
      '//healthz',
      '/healthz#frag',
      '/healthz?',
      '/he alth',
      '/api/voice/a\u0000b',
      '/api/voice/\u00e9',
      '/api/voice/%',
      '/api/voice/\\..\\..',
      `/api/voice/${'v'.repeat(9000)}`,
      `/healthz?${'q'.repeat(9000)}`,
      '',
      'healthz',
    ),
  );
}

/** A raw HTTP/1.1 request: request line, real and odd headers, and a body with its framing. */
export function rawRequest(ctx: FuzzContext): fc.Arbitrary<RawCase> {
  const hosts = [
    'Host: test',
    'Host: test',
    'Host: test',
    'Host: ',
    'Host: a b',
    '', // no Host at all: 400 with the spec body (RFC 9112 §3.2)
  ];
  return fc
    .record({
      method: rawMethod,
      target: rawTargets(ctx),
      version: rawVersion,
      auth: authorization(ctx),
      conditional: conditionalHeaders(ctx),
      odd: fc.oneof(
        { arbitrary: fc.constant<string[]>([]), weight: 2 },
        fc.array(rawOddHeader, { minLength: 1, maxLength: 2 }),
      ),
      body: fc.option(jsonBodyRequest(ctx), { nil: undefined }),
      bodyFraming: fc.constantFrom(
        'content-length',
        'content-length',
        'chunked',
        'short',
        'long',
        'bad-chunk',
        'none',
      ),
      host: fc.constantFrom(...hosts),
      lineEnd: fc.oneof({ arbitrary: fc.constant('\r\n'), weight: 12 }, fc.constant('\n')),
    })
    .map(({ method, target, version, auth, conditional, odd, body, bodyFraming, host, lineEnd }) => {
      const lines = [`${method} ${target} ${version}`.trimEnd()];
      if (host !== '') lines.push(host);
      if (auth !== undefined) lines.push(`Authorization: ${auth}`);
      for (const [name, value] of Object.entries(conditional)) lines.push(`${name}: ${value}`);
      lines.push(...odd);
      let payload = Buffer.alloc(0);
      let incomplete = false;
      if (body?.payload !== undefined) {
        payload = Buffer.from(body.payload);
        const type = body.headers['content-type'];
        if (type !== undefined) lines.push(`Content-Type: ${type}`);
        switch (bodyFraming) {
          case 'content-length':
            lines.push(`Content-Length: ${payload.length}`);
            break;
          case 'chunked':
            lines.push('Transfer-Encoding: chunked');
            payload = Buffer.concat([
              Buffer.from(`${payload.length.toString(16)}\r\n`),
              payload,
              Buffer.from('\r\n0\r\n\r\n'),
            ]);
            break;
          case 'short':
            // Announces more than it sends, then half-closes.
            lines.push(`Content-Length: ${payload.length + 10}`);
            incomplete = true;
            break;
          case 'long':
            // Sends more than it announces: the rest is read as a next request.
            lines.push(`Content-Length: ${Math.max(0, payload.length - 3)}`);
            break;
          case 'bad-chunk':
            lines.push('Transfer-Encoding: chunked');
            payload = Buffer.concat([Buffer.from('zz\r\n'), payload, Buffer.from('\r\n0\r\n\r\n')]);
            break;
          case 'none':
            break;
        }
      }
      lines.push('Connection: close');
      const head = `${lines.join(lineEnd)}${lineEnd}${lineEnd}`;
      return {
        bytes: Buffer.concat([Buffer.from(head, 'latin1'), payload]),
        incomplete,
        request: {
          method: method.toUpperCase(),
          url: target,
          headers: {},
          label: `raw:${bodyFraming}:${odd.map((h) => h.split(':')[0]).join('+') || 'plain'}`,
          ...(payload.length > 0 ? { payload } : {}),
        },
      };
    });
}
