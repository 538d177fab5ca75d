/**
 * The Fastify instance with the conventions every route shares: a UUID request id echoed in
 * X-Service-App-Request-Id on every response, the one error handler, 404 RESOURCE_NOT_FOUND for
 * unknown routes, and logs that never contain stream `auth` tokens or bearer keys.
 */
import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { AppConfig } from '../config/config.js';
import { AppError } from '../errors/app-error.js';
import { decorateAccount } from './auth.js';
import { handleError } from './error-handler.js';
import { registerJsonBodyParser } from './json-body.js';
import { registerStorableParamsCheck } from './unstorable-params.js';

export const REQUEST_ID_HEADER = 'X-Service-App-Request-Id';

/** Removes the `auth` query parameter's value from a URL before it is logged. */
export function redactUrl(url: string): string {
  return url.replace(/([?&]auth=)[^&#]*/gi, '$1[redacted]');
}

export function createHttpServer(
  config: AppConfig,
  logger?: FastifyServerOptions['logger'],
): FastifyInstance {
  const app = Fastify({
    logger: logger ?? {
      level: config.logLevel,
      redact: ['req.headers.authorization'],
      serializers: {
        req: (req: { method: string; url: string; ip?: string }) => ({
          method: req.method,
          url: redactUrl(req.url),
          ip: req.ip,
        }),
      },
    },
    genReqId: () => randomUUID(),
    requestIdHeader: false,
    bodyLimit: config.limits.bodyBytes,
    trustProxy: false,
    return503OnClosing: true,
  });
  decorateAccount(app);
  registerJsonBodyParser(app);
  registerStorableParamsCheck(app);
  app.addHook('onRequest', async (request, reply) => {
    reply.header(REQUEST_ID_HEADER, request.id);
  });
  app.setErrorHandler(handleError);
  app.setNotFoundHandler(async (request) => {
    throw new AppError(
      'RESOURCE_NOT_FOUND',
      `no route for ${request.method} ${redactUrl(request.url.split('?')[0] ?? '')}`,
    );
  });
  return app;
}
