/**
 * The JSON body parser every route shares: Fastify's own parser (secure-json-parse), preceded by a
 * nesting-depth limit (a body nested 2,000 deep would overflow the stack in recursive code after
 * parsing). The depth scan is iterative, so hostile input never recurses, and
 * it runs before JSON.parse and before anything walks the parsed value.
 *
 * `__proto__` keys and `constructor.prototype` are removed while parsing
 * instead of refusing the body (a client echoing such keys is not an attacker; nothing downstream
 * can merge them into a prototype because they are gone), and an empty body is no body (`undefined`)
 * even when Content-Type says JSON (DELETE/POST from clients that always send the header); routes
 * that need a body then say which field is missing.
 *
 * Strings holding an unpaired UTF-16 surrogate (only a `\uD800`–`\uDFFF` escape can make one) are
 * not Unicode text: no database can store them and no engine can speak them, so such a body is a
 * 400 here instead of a 500 wherever the string would have gone.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../errors/app-error.js';

/** Deepest array/object nesting a request body may have; splitter configs need about 5. */
export const MAX_JSON_DEPTH = 64;

/**
 * True when JSON text nests arrays/objects deeper than `maxDepth`. Brackets inside strings do not
 * count; malformed text is left for JSON.parse to reject. Stops at the first level too deep.
 */
export function jsonNestsDeeperThan(text: string, maxDepth: number): boolean {
  let depth = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === 0x22) {
      // A string: jump to its closing quote (strings are most of a large body's text), i.e. the
      // next quote not escaped — preceded by an even number of backslashes.
      let end = i;
      do {
        end = text.indexOf('"', end + 1);
        if (end === -1) return false; // unterminated: JSON.parse refuses it
      } while (backslashesBefore(text, end) % 2 === 1);
      i = end;
    } else if (c === 0x5b || c === 0x7b) {
      depth++;
      if (depth > maxDepth) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/** How many backslashes come right before position `at`. */
function backslashesBefore(text: string, at: number): number {
  let n = 0;
  while (at - n - 1 >= 0 && text.charCodeAt(at - n - 1) === 0x5c) n++;
  return n;
}

/** Replaces the `application/json` parser with one that refuses bodies nested deeper than `maxDepth`. */
export function registerJsonBodyParser(app: FastifyInstance, maxDepth = MAX_JSON_DEPTH): void {
  const parseJson = app.getDefaultJsonParser('remove', 'remove');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.length === 0) {
      done(null, undefined);
      return;
    }
    if (jsonNestsDeeperThan(text, maxDepth)) {
      done(
        new AppError(
          'VALIDATION_INVALID_FORMAT',
          `request body nests arrays/objects deeper than ${maxDepth} levels`,
        ),
        undefined,
      );
      return;
    }
    void parseJson(request, text, (err: Error | null, value?: unknown) => {
      if (err === null && !wellFormedStrings(value)) {
        done(
          new AppError(
            'VALIDATION_INVALID_FORMAT',
            'request body holds a string with an unpaired UTF-16 surrogate (not Unicode text)',
          ),
          undefined,
        );
        return;
      }
      done(err, value);
    });
  });
}

/** In unicode mode a surrogate pair is one code point, so only an unpaired surrogate is `Cs`. */
const LONE_SURROGATE = /\p{Cs}/u;

/** True when every string (keys included) in a parsed JSON value is well-formed Unicode; iterative. */
export function wellFormedStrings(value: unknown): boolean {
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const item = pending.pop();
    if (typeof item === 'string') {
      if (LONE_SURROGATE.test(item)) return false;
    } else if (Array.isArray(item)) {
      for (const child of item as unknown[]) pending.push(child); // no spread: arrays may be huge
    } else if (item !== null && typeof item === 'object') {
      for (const [key, child] of Object.entries(item)) {
        if (LONE_SURROGATE.test(key)) return false;
        pending.push(child);
      }
    }
  }
  return true;
}

/**
 * The size of a request's body as its Content-Length declares it (the body parser has refused a
 * body of another size); unknown (a chunked body) → Infinity, so it counts as large.
 */
export function declaredBodyBytes(request: FastifyRequest): number {
  const declared = request.headers['content-length'];
  return declared === undefined ? Number.POSITIVE_INFINITY : Number(declared);
}
