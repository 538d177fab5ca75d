/**
 * The voice catalogue (our extension): GET /api/engines lists every engine with its availability,
 * GET /api/engines/voices every voice of the available engines, filtered by language and engine.
 * Bearer-protected like the rest of the tenant API; remote endpoints appear by name, never by URL.
 */
import type { FastifyInstance } from 'fastify';
import type { EngineRegistry } from '../../audio/engines/engine-registry.js';
import { parseInput } from '../../errors/validation.js';
import { engineSchemas, engineVoicesQuerySchema } from './engines.schemas.js';
import { ok } from '../envelope.js';

/** The engine catalogue routes. */
export function engineRoutes(engines: Pick<EngineRegistry, 'engines' | 'voices'>) {
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/api/engines', { schema: engineSchemas.list }, async () => ok(await engines.engines()));
    app.get('/api/engines/voices', { schema: engineSchemas.voices }, async (request) => {
      const filter = parseInput(engineVoicesQuerySchema, request.query);
      return ok(await engines.voices(filter));
    });
  };
}
