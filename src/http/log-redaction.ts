/**
 * What the logs must never hold: credentials (stream `auth` tokens in any
 * spelling of the parameter name, API keys, bearer tokens, the admin token, remote engines' keys),
 * what users wrote (the one-shot GET form's `text`, a download's file name, any parameter the
 * service does not know) and the data a database error carries (SQL text, parameters, the failing
 * row). Two layers: the
 * serializers below keep structure (URLs, errors) free of them, and `scrubLogLine` runs over every
 * serialized line as the last word, so a secret that slips into a message is still removed.
 */

const REDACTED = '[redacted]';

/** Query parameters whose values are credentials, compared after percent-decoding, case-insensitively. */
const SECRET_QUERY_NAMES = new Set(['auth', 'token', 'access_token', 'api_key', 'apikey', 'key']);

/**
 * Query parameters whose values are logged as sent: ids, numbers, flags and enumerations the routes
 * read, compared with the name as the server reads it (percent-decoded once, case-sensitive). Any
 * other value — `text`, `response-content-disposition`, a parameter no route reads — may be what a
 * user wrote, so it is redacted: a parameter added later is redacted until it is listed here.
 */
const LOGGED_QUERY_NAMES = new Set([
  // lists
  'limit',
  'offset',
  'status',
  'stream',
  // stream sessions
  'i',
  // one-shot GET form: the content item's switches, never its text
  'voiceId',
  'promptId',
  'preset',
  'language',
  'speechRate',
  'seed',
  'interval',
  'emo_switch',
  'reference_mode',
  'vivid',
  'break_clone',
  'flash',
  'srt',
  'infinite_mode',
  'instruct_mode',
  'direct_stream',
  'type',
]);

/** True when a raw parameter name, read as the server reads it, is one whose value may be logged. */
function loggedAsSent(rawName: string): boolean {
  try {
    return LOGGED_QUERY_NAMES.has(decodeURIComponent(rawName.replace(/\+/g, ' ')));
  } catch {
    return false; // a malformed escape names no parameter we read
  }
}

/** A parameter name as the server would read it: `+` as space, percent-decoded until stable (at most 3 rounds). */
function decodedName(raw: string): string {
  let name = raw.replace(/\+/g, ' ');
  for (let round = 0; round < 3; round++) {
    // Decode each valid escape on its own, so one malformed escape does not hide the others.
    const next = name.replace(/%[0-9a-f]{2}/gi, (escape) => {
      try {
        return decodeURIComponent(escape);
      } catch {
        return String.fromCharCode(parseInt(escape.slice(1), 16));
      }
    });
    if (next === name) break;
    name = next;
  }
  return name.trim().toLowerCase();
}

/**
 * `url` with the value of every query parameter but LOGGED_QUERY_NAMES replaced by `[redacted]`:
 * credentials in any spelling (`auth`, `AUTH`, `%61uth`, `a%75th`, repeated) and user content
 * (`text`, file names, unknown parameters). Names and parameters without a value are kept.
 */
export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const query = url
    .slice(q + 1)
    .split(/([&;])/)
    .map((part) => {
      if (part === '&' || part === ';') return part;
      const eq = part.indexOf('=');
      const name = eq < 0 ? part : part.slice(0, eq);
      if (eq < 0) return part;
      return SECRET_QUERY_NAMES.has(decodedName(name)) || !loggedAsSent(name) ? `${name}=${REDACTED}` : part;
    })
    .join('');
  return `${url.slice(0, q + 1)}${query}`;
}

/** A parameter name, each character literal or percent-encoded (either letter case, re-encoded any times). */
function spelledAnyWay(name: string): string {
  const hex = (c: string) => c.charCodeAt(0).toString(16);
  return [...name]
    .map((c) => `(?:${c}|%(?:25)*(?:${hex(c.toLowerCase())}|${hex(c.toUpperCase())}))`)
    .join('');
}

const SECRET_NAME_SPELLINGS = [...SECRET_QUERY_NAMES].map(spelledAnyWay).join('|');

/**
 * A credential parameter anywhere in a text: after `?`, `&`, `;` (or their encodings), a quote or
 * white space, the name in any spelling, `=` (or its encoding), then the value up to the next
 * separator (encoded separators included, so a URL inside a parameter value is covered too).
 */
const SECRET_PARAM = new RegExp(
  `((?:^|[?&;"'\\s]|%(?:25)*(?:3f|26|3b))(?:${SECRET_NAME_SPELLINGS})(?:=|%(?:25)*3d))` +
    `(?:(?!%(?:25)*26)[^&;\\s"'\\\\#])*`,
  'gi',
);

/** API keys (`sk-` + 32 lowercase alphanumerics; near misses of that form too). */
const API_KEY = /sk-[A-Za-z0-9_-]{16,}/g;
/** `Bearer <token>` in any text (a header echoed into a message). */
const BEARER = /(Bearer\s+)[^\s"',;\\]+/gi;
/** Stream `auth` tokens are 128 random bits as 32 hex digits; no other value logged has that shape. */
const STREAM_TOKEN = /(?<![0-9a-f])[0-9a-f]{32}(?![0-9a-f])/gi;

/** Literal secrets, as written and as they look inside a JSON string. */
function literalForms(secret: string): string[] {
  const json = JSON.stringify(secret).slice(1, -1);
  return json === secret ? [secret] : [secret, json];
}

/**
 * Removes every credential from one serialized log line: the patterns above plus each configured
 * `secrets` literal (admin token, remote engine keys). Secrets shorter than 8 characters are ignored
 * (they would scrub ordinary words; config refuses such tokens anyway).
 */
export function scrubLogLine(line: string, secrets: Iterable<string> = []): string {
  let out = line
    .replace(SECRET_PARAM, `$1${REDACTED}`)
    .replace(API_KEY, `sk-${REDACTED}`)
    .replace(BEARER, `$1${REDACTED}`)
    .replace(STREAM_TOKEN, REDACTED);
  for (const secret of secrets) {
    if (secret.length < 8) continue;
    for (const form of literalForms(secret)) out = out.split(form).join(REDACTED);
  }
  return out;
}

/**
 * Fields of an error that are safe to log. Everything else is dropped: PGlite's `query`, `params`
 * and `queryOptions`, PostgreSQL's `detail` ("Failing row contains (…)", "Key (…)=(…)"), `where`,
 * `hint`, `internalQuery`, Node's `rawPacket` (the bytes of a bad request, headers included), and
 * whatever else a library attaches.
 */
const SAFE_ERROR_FIELDS = [
  'code',
  'statusCode',
  'status',
  'severity',
  'routine',
  'schema',
  'table',
  'column',
  'constraint',
  'dataType',
  'errno',
  'syscall',
] as const;

const MAX_CAUSE_DEPTH = 5;

/** A serialized error for the logs: type, message, stack, the safe fields above, and its causes. */
export interface LoggedError {
  type: string;
  message: string;
  stack: string;
  cause?: LoggedError;
  errors?: LoggedError[];
  [field: string]: unknown;
}

/** pino `err` serializer: an allowlist of fields, following `cause` and AggregateError's `errors`. */
export function serializeError(err: unknown, depth = 0): LoggedError {
  if (typeof err !== 'object' || err === null) return { type: typeof err, message: String(err), stack: '' };
  const e = err as Record<string, unknown>;
  const typeName = (e.constructor as { name?: unknown } | undefined)?.name;
  const out: LoggedError = {
    type: typeof typeName === 'string' && typeName !== '' ? typeName : 'Object',
    message: typeof e.message === 'string' ? e.message : '',
    stack: typeof e.stack === 'string' ? e.stack : '',
  };
  for (const field of SAFE_ERROR_FIELDS) {
    const value = e[field];
    if (typeof value === 'string' || typeof value === 'number') out[field] = value;
  }
  if (depth < MAX_CAUSE_DEPTH) {
    if (e.cause !== undefined) out.cause = serializeError(e.cause, depth + 1);
    if (Array.isArray(e.errors)) {
      out.errors = (e.errors as unknown[]).slice(0, 10).map((inner) => serializeError(inner, depth + 1));
    }
  }
  return out;
}
