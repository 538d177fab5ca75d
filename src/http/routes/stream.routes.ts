/**
 * The four stream endpoints. Registered outside the bearer-auth scope: the only
 * credential is the task's `auth` query token, so a bearer header neither helps nor
 * hurts. Rate-limited per client address: never per task id, which a client can make up at will;
 * sessions per task are bounded by the stream service. GET and HEAD of stream.mp3 are registered
 * separately: Fastify's automatic HEAD would run the GET handler and follow the stream.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { RELAY_HEADER } from '../../stream/session-relay.js';
import type { StreamService } from '../../stream/stream-service.js';
import { ok } from '../envelope.js';
import { clientAddressKey, registerRateLimit, type RateLimitStore } from '../rate-limit.js';
import { plannedRequestHeaders, sendStreamResponse } from '../reply-plan.js';
import { responseClosed } from '../response-signals.js';
import { streamSchemas } from './stream.schemas.js';

/** Rate-limit settings of the stream endpoints. */
export interface StreamRouteOptions {
  rateLimitMax: number;
  rateLimitWindowMs: number;
  rateLimitStore: RateLimitStore;
}

interface TaskParams {
  id: string;
}
interface ContentParams {
  id: string;
  contentIndex: string;
}
type Query = Record<string, unknown>;

const BASE = '/api/tts/generate/:id';

/** Registers the stream endpoints and their rate limit in an encapsulated plugin. */
export function streamRoutes(stream: StreamService, options: StreamRouteOptions) {
  return async (app: FastifyInstance): Promise<void> => {
    await registerRateLimit(
      app,
      {
        name: 'stream',
        max: options.rateLimitMax,
        windowMs: options.rateLimitWindowMs,
        keyGenerator: clientAddressKey,
      },
      options.rateLimitStore,
    );

    const serve = async (
      method: 'GET' | 'HEAD',
      request: FastifyRequest<{ Params: Partial<ContentParams>; Querystring: Query }>,
      reply: FastifyReply,
    ): Promise<FastifyReply> => {
      const signal = responseClosed(reply);
      try {
        const response = await stream.stream({
          method,
          taskId: request.params.id ?? '',
          contentIndex: request.params.contentIndex,
          query: request.query,
          // Range, If-Range and the RFC 9110 §13.1 preconditions (If-Match, If-None-Match, …).
          ...plannedRequestHeaders(request.headers),
          signal,
          relay: { proof: request.headers[RELAY_HEADER], pathAndQuery: request.url },
        });
        return sendStreamResponse(reply, response);
      } catch (err) {
        // The client left while we waited for a range: nobody to answer, and not a server error.
        if (signal.aborted && !reply.sent) {
          reply.raw.destroy();
          return reply;
        }
        throw err;
      }
    };

    for (const [path, schema] of [
      [`${BASE}/stream.mp3`, streamSchemas.fullStream],
      [`${BASE}/:contentIndex/stream.mp3`, streamSchemas.contentStream],
    ] as const) {
      app.get<{ Params: Partial<ContentParams>; Querystring: Query }>(
        path,
        { exposeHeadRoute: false, schema },
        (request, reply) => serve('GET', request, reply),
      );
      app.head<{ Params: Partial<ContentParams>; Querystring: Query }>(
        path,
        // Documented: this HEAD is the spec's, answered without starting a session.
        { schema, config: { swagger: { exposeHeadRoute: true } } },
        (request, reply) => serve('HEAD', request, reply),
      );
    }

    app.get<{ Params: TaskParams; Querystring: Query }>(
      `${BASE}/stream`,
      { schema: streamSchemas.streamUrl },
      async (request) => ok(await stream.streamUrl(request.params.id, request.query)),
    );

    app.get<{ Params: ContentParams; Querystring: Query }>(
      `${BASE}/:contentIndex/pseudo/stream.mp3`,
      { schema: streamSchemas.pseudoStream },
      async (request, reply) =>
        sendStreamResponse(
          reply,
          await stream.pseudoStream(request.params.id, request.params.contentIndex, request.query),
        ),
    );
  };
}
