/**
 * The web console (issue 13): static files from `web/` (plain ES modules, no build step, nothing
 * from a CDN) — `/` is its page, `/console/*` its script and style. Not part of the API: unknown
 * paths stay JSON 404s.
 */
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';

/** The console's folder: `web/` at the repository root, from src/ (tsx) and from dist/ alike. */
export const CONSOLE_DIR = fileURLToPath(new URL('../../../web/', import.meta.url));

/** Registers the console's routes. */
export function consoleRoutes() {
  return async (app: FastifyInstance): Promise<void> => {
    await app.register(fastifyStatic, {
      root: CONSOLE_DIR,
      prefix: '/console/',
      index: false,
      // A new version of the console is picked up at once (files are small; ETags revalidate).
      cacheControl: true,
      maxAge: 0,
      schemaHide: true,
    });
    app.get('/', { schema: { hide: true } }, async (_request, reply) =>
      reply.header('Cache-Control', 'no-cache').sendFile('index.html'),
    );
  };
}
