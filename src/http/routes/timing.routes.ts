/**
 * Subtitles and timestamps of a task (`…/{id}/subtitles.srt`, `subtitles.vtt`, `timestamps.json`)
 * and of each content (`…/{id}/{contentIndex}/…`, beside that content's own audio). Registered
 * outside the bearer-auth scope, like the audio routes: a `<track src>` carries the task's `auth`
 * token and no header; the owner's API key is taken as well. Rate-limited per client address.
 */
import type { FastifyInstance, FastifyReply } from 'fastify';
import type { TimingService } from '../../tasks/timings/timing-service.js';
import { bearerToken } from '../auth.js';
import { clientAddressKey, registerRateLimit, type RateLimitStore } from '../rate-limit.js';
import { timingSchemas } from './timing.schemas.js';

/** Rate-limit settings of these routes (requests per client address and window). */
export interface TimingRouteOptions {
  rateLimitMax: number;
  rateLimitWindowMs: number;
  rateLimitStore: RateLimitStore;
}

interface Params {
  id: string;
  contentIndex?: string;
}
type Query = Record<string, unknown>;

const BASE = '/api/tts/generate/:id';

/** Their content grows while the task generates: a player that polls must not get a stale copy. */
function noStore(reply: FastifyReply, complete: boolean): void {
  reply.header('Cache-Control', complete ? 'private, no-cache' : 'no-store');
}

export function timingRoutes(timings: TimingService, options: TimingRouteOptions) {
  return async (app: FastifyInstance): Promise<void> => {
    await registerRateLimit(
      app,
      {
        name: 'timings',
        max: options.rateLimitMax,
        windowMs: options.rateLimitWindowMs,
        keyGenerator: clientAddressKey,
      },
      options.rateLimitStore,
    );
    for (const perContent of [false, true]) {
      const base = perContent ? `${BASE}/:contentIndex` : BASE;
      for (const format of ['srt', 'vtt'] as const) {
        app.get<{ Params: Params; Querystring: Query }>(
          `${base}/subtitles.${format}`,
          { schema: timingSchemas[perContent ? (format === 'srt' ? 'contentSrt' : 'contentVtt') : format] },
          async (request, reply) => {
            const { body, complete } = await timings.subtitles(
              format,
              request.params.id,
              request.params.contentIndex,
              {
                auth: request.query.auth,
                bearer: bearerToken(request),
              },
            );
            noStore(reply, complete);
            reply.type(format === 'srt' ? 'application/x-subrip; charset=utf-8' : 'text/vtt; charset=utf-8');
            return body;
          },
        );
      }
      app.get<{ Params: Params; Querystring: Query }>(
        `${base}/timestamps.json`,
        { schema: timingSchemas[perContent ? 'contentTimestamps' : 'timestamps'] },
        async (request, reply) => {
          const stamps = await timings.timestamps(request.params.id, request.params.contentIndex, {
            auth: request.query.auth,
            bearer: bearerToken(request),
          });
          noStore(reply, stamps.complete);
          reply.type('application/json; charset=utf-8');
          return JSON.stringify(stamps);
        },
      );
    }
  };
}
