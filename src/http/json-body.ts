/**
 * The JSON body parser every route shares: Fastify's own parser (same prototype-poisoning policy),
 * preceded by a nesting-depth limit (issue 11 finding 10: a body nested 2,000 deep overflowed the
 * stack in recursive code after parsing). The depth scan is iterative, so hostile input never
 * recurses, and it runs before JSON.parse and before anything walks the parsed value.
 */
import type { FastifyInstance } from 'fastify';
import { AppError } from '../errors/app-error.js';

/** Deepest array/object nesting a request body may have; splitter configs need about 5. */
export const MAX_JSON_DEPTH = 64;

/**
 * True when JSON text nests arrays/objects deeper than `maxDepth`. Brackets inside strings do not
 * count; malformed text is left for JSON.parse to reject. Stops at the first level too deep.
 */
export function jsonNestsDeeperThan(text: string, maxDepth: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x5b || c === 0x7b) {
      depth++;
      if (depth > maxDepth) return true;
    } else if (c === 0x5d || c === 0x7d) {
      depth--;
    }
  }
  return false;
}

/** Replaces the `application/json` parser with one that refuses bodies nested deeper than `maxDepth`. */
export function registerJsonBodyParser(app: FastifyInstance, maxDepth = MAX_JSON_DEPTH): void {
  const parseJson = app.getDefaultJsonParser(
    app.initialConfig.onProtoPoisoning ?? 'error',
    app.initialConfig.onConstructorPoisoning ?? 'error',
  );
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
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
    void parseJson(request, text, done);
  });
}
