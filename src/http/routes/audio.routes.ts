/**
 * Stored finished audio (metadata.audio and metadata.contents[n].audio), guarded by the task's
 * `auth` token like the stream endpoints, served with Range support and, when the client names one
 * (also through the stream endpoints' 302), `response-content-disposition`. Rate-limited per client
 * address (issue 11 finding 6), like the stream endpoints, with counters of its own.
 */
import type { FastifyInstance } from 'fastify';
import { errors } from '../../errors/app-error.js';
import type { BlobStore } from '../../storage/blob-store.js';
import { contentDispositionFromQuery } from '../../stream/content-disposition.js';
import type { TaskService } from '../../tasks/task-service.js';
import { clientAddressKey, registerRateLimit, type RateLimitStore } from '../rate-limit.js';
import { sendBlob } from '../send-blob.js';

/** Rate-limit settings of the finished-audio routes (requests per client address and window). */
export interface AudioRouteOptions {
  rateLimitMax: number;
  rateLimitWindowMs: number;
  rateLimitStore: RateLimitStore;
}

interface AudioQuery {
  auth?: string;
  'response-content-disposition'?: unknown;
}

export function audioRoutes(tasks: TaskService, blobs: BlobStore, options: AudioRouteOptions) {
  return async (app: FastifyInstance): Promise<void> => {
    await registerRateLimit(
      app,
      {
        name: 'audio',
        max: options.rateLimitMax,
        windowMs: options.rateLimitWindowMs,
        keyGenerator: clientAddressKey,
      },
      options.rateLimitStore,
    );
    app.route<{ Params: { id: string }; Querystring: AudioQuery }>({
      method: ['GET', 'HEAD'],
      url: '/api/tts/generate/:id/audio.mp3',
      exposeHeadRoute: false,
      handler: async (request, reply) => {
        const disposition = contentDispositionFromQuery(request.query['response-content-disposition']);
        const key = await tasks.audioKeyFor(request.params.id, null, request.query.auth);
        return sendBlob(request, reply, blobs, key, 'audio/mpeg', disposition);
      },
    });
    app.route<{ Params: { id: string; contentIndex: string }; Querystring: AudioQuery }>({
      method: ['GET', 'HEAD'],
      url: '/api/tts/generate/:id/:contentIndex/audio.mp3',
      exposeHeadRoute: false,
      handler: async (request, reply) => {
        const disposition = contentDispositionFromQuery(request.query['response-content-disposition']);
        const idx = Number(request.params.contentIndex);
        if (!/^\d{1,6}$/.test(request.params.contentIndex))
          throw errors.notFound('RESOURCE_NOT_FOUND', 'content');
        const key = await tasks.audioKeyFor(request.params.id, idx, request.query.auth);
        return sendBlob(request, reply, blobs, key, 'audio/mpeg', disposition);
      },
    });
  };
}
