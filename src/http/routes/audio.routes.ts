/**
 * Stored finished audio (metadata.audio and metadata.contents[n].audio), guarded by the task's
 * `auth` token like the stream endpoints, served with Range support and, when the client names one
 * (also through the stream endpoints' 302), `response-content-disposition`. Rate-limited per client
 * address, like the stream endpoints, with counters of its own.
 *
 * And `…/{id}/live.mp3`, the one-shot answer's `streamUrl`: the task's full stream while it is
 * generated, the stored file afterwards, from the same URL and never through a redirect — the
 * hosted API's clients download it without following redirects (docs/compatibility.md).
 */
import type { FastifyInstance } from 'fastify';
import { errors } from '../../errors/app-error.js';
import type { BlobStore } from '../../storage/blob-store.js';
import { contentDispositionFromQuery } from '../../stream/content-disposition.js';
import type { StreamService } from '../../stream/stream-service.js';
import type { TaskService } from '../../tasks/task-service.js';
import type { FinishedAudioProcess } from '../finished-audio.process.js';
import { finishedAudioShortcut, type AnswerMeter } from '../finished-audio.shortcut.js';
import { clientAddressKey, registerRateLimit, type RateLimitStore } from '../rate-limit.js';
import { plannedRequestHeaders, sendStreamResponse } from '../reply-plan.js';
import { responseClosed } from '../response-signals.js';
import { sendBlob } from '../send-blob.js';
import { answerBeforeRouting } from '../server.js';
import { audioSchemas } from './audio.schemas.js';

/** Rate-limit settings of the finished-audio routes (requests per client address and window). */
export interface AudioRouteOptions {
  rateLimitMax: number;
  rateLimitWindowMs: number;
  rateLimitStore: RateLimitStore;
  /**
   * Answer the common finished-audio request before routing (src/http/finished-audio.shortcut.ts),
   * counted in these metrics; only where its answers are the routes' (no CORS, no trusted proxy) and
   * the rate limit counts in process.
   */
  shortcut?: { metrics: AnswerMeter; process?: FinishedAudioProcess | undefined } | undefined;
}

interface AudioQuery {
  [name: string]: unknown;
  auth?: string;
  'response-content-disposition'?: unknown;
}

export function audioRoutes(
  tasks: TaskService,
  blobs: BlobStore,
  streams: StreamService,
  options: AudioRouteOptions,
) {
  return async (app: FastifyInstance): Promise<void> => {
    const limit = await registerRateLimit(
      app,
      {
        name: 'audio',
        max: options.rateLimitMax,
        windowMs: options.rateLimitWindowMs,
        keyGenerator: clientAddressKey,
      },
      options.rateLimitStore,
    );
    if (options.shortcut !== undefined && limit !== undefined) {
      const deps = {
        audioKey: (taskId: string, idx: number | null, auth: string) =>
          tasks.rememberedAudioKey(taskId, idx, auth),
        findAudioKey: (taskId: string, idx: number | null, auth: string) =>
          tasks.finishedAudioKey(taskId, idx, auth),
        blobs,
        rateLimit: limit,
        log: app.log,
        metrics: options.shortcut.metrics,
      };
      answerBeforeRouting(app.server, finishedAudioShortcut(deps));
      options.shortcut.process?.attach(app.server, deps);
    }
    app.route<{ Params: { id: string }; Querystring: AudioQuery }>({
      method: ['GET', 'HEAD'],
      url: '/api/tts/generate/:id/audio.mp3',
      schema: audioSchemas.taskAudio,
      exposeHeadRoute: false,
      handler: async (request, reply) => {
        const disposition = contentDispositionFromQuery(request.query['response-content-disposition']);
        const key = await tasks.audioKeyFor(request.params.id, null, request.query.auth);
        return sendBlob(request, reply, blobs, key, 'audio/mpeg', disposition);
      },
    });
    app.route<{ Params: { id: string }; Querystring: AudioQuery }>({
      method: ['GET', 'HEAD'],
      url: '/api/tts/generate/:id/live.mp3',
      schema: audioSchemas.liveAudio,
      exposeHeadRoute: false,
      handler: async (request, reply) => {
        const signal = responseClosed(reply);
        const response = await streams.stream({
          method: request.method === 'HEAD' ? 'HEAD' : 'GET',
          taskId: request.params.id,
          contentIndex: undefined,
          query: request.query,
          ...plannedRequestHeaders(request.headers),
          signal,
        });
        // The stream endpoint's answer, except its 302 to the stored file: that file itself here.
        if (response.status !== 302) return sendStreamResponse(reply, response);
        response.body?.destroy();
        const disposition = contentDispositionFromQuery(request.query['response-content-disposition']);
        const key = await tasks.audioKeyFor(request.params.id, null, request.query.auth);
        return sendBlob(request, reply, blobs, key, 'audio/mpeg', disposition);
      },
    });
    app.route<{ Params: { id: string; contentIndex: string }; Querystring: AudioQuery }>({
      method: ['GET', 'HEAD'],
      url: '/api/tts/generate/:id/:contentIndex/audio.mp3',
      schema: audioSchemas.contentAudio,
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
