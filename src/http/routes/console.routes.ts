/**
 * The web console: static files from `web/` (plain ES modules, no build step, nothing
 * from a CDN) — `/` is its page, `/console/*` its script and style. Not part of the API: unknown
 * paths stay JSON 404s.
 *
 * The page signs in with a key from its URL fragment and plays stream URLs that carry tokens, so
 * every console response forbids framing (another origin could otherwise frame `/#key=…` and sign
 * the frame in as someone else, or overlay it), sniffing and referrers, and the page may load only
 * its own script and style, talk only to this service and play only its audio (and the blob:
 * of a voice preview). Nothing inline: styles are set through the CSSOM, not style attributes.
 */
import { fileURLToPath } from 'node:url';
import fastifyStatic from '@fastify/static';
import type { FastifyInstance } from 'fastify';

/** The console's folder: `web/` at the repository root, from src/ (tsx) and from dist/ alike. */
export const CONSOLE_DIR = fileURLToPath(new URL('../../../web/', import.meta.url));

/**
 * The console's Content-Security-Policy. `publicUrl`'s origin is allowed beside 'self' because
 * the audio and stream URLs the API returns are built on PUBLIC_URL, which need not be the origin
 * the page was opened from (a proxy's name, 127.0.0.1 against localhost).
 */
export function consoleCsp(publicUrl: string): string {
  const service = new URL(publicUrl).origin;
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self'",
    // The favicon is `data:,` (no request at all).
    "img-src 'self' data:",
    `connect-src 'self' ${service}`,
    `media-src 'self' ${service} blob:`,
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join('; ');
}

/** Registers the console's routes; every answer of them carries the headers above. */
export function consoleRoutes(options: { publicUrl: string }) {
  const headers = {
    'Content-Security-Policy': consoleCsp(options.publicUrl),
    // frame-ancestors for browsers that predate it.
    'X-Frame-Options': 'DENY',
    'Referrer-Policy': 'no-referrer',
  };
  return async (app: FastifyInstance): Promise<void> => {
    app.addHook('onRequest', async (_request, reply) => {
      void reply.headers(headers);
    });
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
