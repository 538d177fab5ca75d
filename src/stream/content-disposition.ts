/**
 * Validates the `response-content-disposition` query value of the stream endpoints
 * and turns it into a safe `Content-Disposition` header (RFC 6266; RFC 8187 for `filename*`).
 * Anything outside the small accepted grammar is a 400, never a header passed through as given.
 */
import { AppError } from '../errors/app-error.js';

const PARAM = 'response-content-disposition';
/** Longest accepted filename, in characters after decoding (common filesystem limit). */
export const MAX_FILENAME_LENGTH = 255;
const MAX_VALUE_LENGTH = 2048;

// C0 controls (incl. TAB, CR, LF, NUL), DEL and C1 controls.
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
// Lone UTF-16 surrogates cannot be encoded as UTF-8.
const LONE_SURROGATE = /\p{Cs}/u;
// RFC 9110 §5.6.2 tchar.
const TCHAR = /[!#$%&'*+\-.^_`|~0-9A-Za-z]/;
// RFC 8187 §3.2.1: ext-value = charset "'" [ language ] "'" value-chars.
const EXT_VALUE =
  /^([!#$%&+\-^_`{}~0-9A-Za-z]+)'([A-Za-z0-9-]*)'((?:%[0-9A-Fa-f]{2}|[!#$&+\-.^_`|~0-9A-Za-z])*)$/;
const PRINTABLE_ASCII = /^[\x20-\x7e]*$/;

function invalid(reason: string): AppError {
  return new AppError('VALIDATION_INVALID_VALUE', `${PARAM} ${reason}`);
}

/** A tiny left-to-right scanner over the header value. */
class Scanner {
  pos = 0;
  constructor(readonly text: string) {}
  get done(): boolean {
    return this.pos >= this.text.length;
  }
  peek(): string | undefined {
    return this.text[this.pos];
  }
  skipSpaces(): void {
    while (this.text[this.pos] === ' ') this.pos++;
  }
  expect(ch: string, what: string): void {
    if (this.text[this.pos] !== ch)
      throw invalid(`is malformed: expected ${what} at position ${String(this.pos)}`);
    this.pos++;
  }
  token(what: string): string {
    const start = this.pos;
    while (this.pos < this.text.length && TCHAR.test(this.text[this.pos] ?? '')) this.pos++;
    if (this.pos === start) throw invalid(`is malformed: expected ${what} at position ${String(start)}`);
    return this.text.slice(start, this.pos);
  }
  /** RFC 9110 §5.6.4 quoted-string; returns the unescaped content. */
  quoted(): string {
    this.expect('"', 'an opening quote');
    let out = '';
    for (;;) {
      const ch = this.text[this.pos++];
      if (ch === undefined) throw invalid('is malformed: unterminated quoted filename');
      if (ch === '"') return out;
      if (ch === '\\') {
        const next = this.text[this.pos++];
        if (next === undefined) throw invalid('is malformed: unterminated quoted filename');
        out += next;
      } else {
        out += ch;
      }
    }
  }
  /** Everything up to the next `;` or space (an ext-value has neither). */
  bare(): string {
    const start = this.pos;
    while (this.pos < this.text.length && this.text[this.pos] !== ';' && this.text[this.pos] !== ' ')
      this.pos++;
    return this.text.slice(start, this.pos);
  }
}

/** Decodes an RFC 8187 ext-value; only UTF-8 is accepted (the one charset recipients must support). */
function decodeExtValue(raw: string): string {
  const m = EXT_VALUE.exec(raw);
  if (m === null) throw invalid("has a malformed filename*: expected UTF-8''<percent-encoded name>");
  if ((m[1] ?? '').toLowerCase() !== 'utf-8') throw invalid('filename* must use the UTF-8 charset');
  const encoded = m[3] ?? '';
  const bytes: number[] = [];
  for (let i = 0; i < encoded.length; i++) {
    if (encoded[i] === '%') {
      bytes.push(parseInt(encoded.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(encoded.charCodeAt(i));
    }
  }
  try {
    return new TextDecoder('utf-8', { fatal: true, ignoreBOM: true }).decode(new Uint8Array(bytes));
  } catch {
    throw invalid('has a filename* that is not valid UTF-8');
  }
}

function checkFilename(name: string): void {
  if (name.length === 0) throw invalid('has an empty filename');
  if (CONTROL.test(name)) throw invalid('must not contain control characters');
  if (LONE_SURROGATE.test(name)) throw invalid('has a filename that is not valid Unicode');
  if (name.length > MAX_FILENAME_LENGTH) {
    throw invalid(`has a filename longer than ${String(MAX_FILENAME_LENGTH)} characters`);
  }
}

/** RFC 8187 §3.2.1 attr-char is kept, every other UTF-8 byte is percent-encoded. */
function encodeExtValue(name: string): string {
  let out = "UTF-8''";
  for (const byte of new TextEncoder().encode(name)) {
    const ch = String.fromCharCode(byte);
    out += /[!#$&+\-.^_`|~0-9A-Za-z]/.test(ch) ? ch : `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

function quote(name: string): string {
  return `"${name.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/**
 * Validates a `response-content-disposition` value (`inline` | `attachment`, optionally with
 * `filename="x"`, `filename=x` and/or `filename*=UTF-8''…`) and returns the header to send: ASCII
 * only, with a non-ASCII name carried in `filename*` plus an ASCII fallback `filename`.
 * Throws AppError VALIDATION_INVALID_VALUE on control characters or anything else.
 */
export function normaliseContentDisposition(value: string): string {
  if (value.length === 0) throw invalid('must not be empty');
  if (CONTROL.test(value)) throw invalid('must not contain control characters');
  if (LONE_SURROGATE.test(value)) throw invalid('is not valid Unicode');
  if (value.length > MAX_VALUE_LENGTH)
    throw invalid(`must be at most ${String(MAX_VALUE_LENGTH)} characters`);

  const s = new Scanner(value);
  s.skipSpaces();
  // RFC 6266 §4.2: disposition types are case-insensitive.
  const type = s.token('inline or attachment').toLowerCase();
  if (type !== 'inline' && type !== 'attachment') throw invalid('must be inline or attachment');

  let filename: string | undefined;
  let filenameStar: string | undefined;
  for (;;) {
    s.skipSpaces();
    if (s.done) break;
    s.expect(';', '";"');
    s.skipSpaces();
    const name = s.token('a parameter name').toLowerCase();
    s.skipSpaces();
    s.expect('=', '"="');
    s.skipSpaces();
    if (name === 'filename') {
      if (filename !== undefined) throw invalid('has filename more than once');
      filename = s.peek() === '"' ? s.quoted() : s.token('a filename');
      checkFilename(filename);
    } else if (name === 'filename*') {
      if (filenameStar !== undefined) throw invalid('has filename* more than once');
      filenameStar = decodeExtValue(s.bare());
      checkFilename(filenameStar);
    } else {
      throw invalid(`has an unsupported parameter "${name}" (only filename and filename* are accepted)`);
    }
  }

  // RFC 6266 §4.3: when both are present filename* is the name; filename is the legacy fallback.
  const chosen = filenameStar ?? filename;
  if (chosen === undefined) return type;
  if (PRINTABLE_ASCII.test(chosen)) return `${type}; filename=${quote(chosen)}`;
  const fallback =
    filename !== undefined && PRINTABLE_ASCII.test(filename)
      ? filename
      : chosen.replace(/[^\x20-\x7e]/gu, '_');
  return `${type}; filename=${quote(fallback)}; filename*=${encodeExtValue(chosen)}`;
}

/**
 * Reads the query parameter as a route receives it: absent → undefined (no header), one string →
 * the normalised header, repeated or non-string → VALIDATION_INVALID_VALUE.
 */
export function contentDispositionFromQuery(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') throw invalid('must be given once, as a string');
  return normaliseContentDisposition(value);
}
