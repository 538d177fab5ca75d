/**
 * Refuses route parameters and query values that no stored record can hold:
 * a NUL or other control character in an id reached PostgreSQL ("invalid byte sequence") → 500.
 * Such an id names nothing, so it answers the same 404 as an unknown id of that resource; such a
 * query value is a 400 naming the parameter. One hook for every route, present and future.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError, type ErrorCode } from '../errors/app-error.js';
import { CONTROL_CHARACTER_MESSAGE, controlCharacterIndex } from '../errors/validation.js';

/** The not-found code an unknown id gets on routes under each prefix (most specific first). */
const NOT_FOUND_BY_PREFIX: ReadonlyArray<[prefix: string, code: ErrorCode]> = [
  ['/api/tts/generate', 'GENERATE_NOT_FOUND'],
  ['/api/tts/voice', 'VOICE_NOT_FOUND'],
  ['/api/voice', 'VOICE_NOT_FOUND'],
  ['/api/splitter', 'SPLITTER_NOT_FOUND'],
];

/** The 404 code for an id on `routeUrl` (the route's pattern, e.g. `/api/voice/:id`). */
export function notFoundCodeFor(routeUrl: string): ErrorCode {
  return NOT_FOUND_BY_PREFIX.find(([prefix]) => routeUrl.startsWith(prefix))?.[1] ?? 'RESOURCE_NOT_FOUND';
}

function hasControlCharacter(value: unknown): boolean {
  if (typeof value === 'string') return controlCharacterIndex(value) !== -1;
  return Array.isArray(value) && value.some((v) => typeof v === 'string' && controlCharacterIndex(v) !== -1);
}

/** Throws the 404 / 400 for a request whose params or query hold a control character. */
export function checkStorableParams(request: FastifyRequest): void {
  const params = (request.params ?? {}) as Record<string, unknown>;
  for (const [name, value] of Object.entries(params)) {
    if (hasControlCharacter(value)) {
      throw new AppError(notFoundCodeFor(request.routeOptions.url ?? ''), `no resource with that ${name}`);
    }
  }
  const query = (request.query ?? {}) as Record<string, unknown>;
  for (const [name, value] of Object.entries(query)) {
    if (controlCharacterIndex(name) !== -1 || hasControlCharacter(value)) {
      throw new AppError(
        'VALIDATION_INVALID_VALUE',
        `query parameter ${JSON.stringify(name)} ${CONTROL_CHARACTER_MESSAGE}`,
      );
    }
  }
}

/** Registers `checkStorableParams` before every route's handler (and before body parsing). */
export function registerStorableParamsCheck(app: FastifyInstance): void {
  app.addHook('preParsing', async (request) => {
    checkStorableParams(request);
  });
}
