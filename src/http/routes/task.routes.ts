/**
 * Generation task routes: create, detail, list, delete, and our extensions
 * `POST /api/tts/generate/{id}/cancel` and `POST /api/tts/generate/{id}/rotate-token`.
 * Bearer-protected.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { SplitterService } from '../../splitter/splitter-service.js';
import type { TaskService } from '../../tasks/task-service.js';
import { accountOf } from '../auth.js';
import { ok, okNoData } from '../envelope.js';
import { declaredBodyBytes } from '../json-body.js';
import { taskSchemas } from './task.schemas.js';

/**
 * Bodies above this are checked against the account's quotas before they are read: what a parse
 * costs beyond here (JSON on the event loop, validation on the parser's thread) is more than one read.
 */
const EARLY_REFUSAL_BODY_BYTES = 16 * 1024;

interface IdParams {
  id: string;
}

export function taskRoutes(tasks: TaskService, splitters: SplitterService) {
  return async (app: FastifyInstance): Promise<void> => {
    // A large body is read only when the account could be given a task (see refuseWhenFull).
    const refuseLargeWhenFull = async (request: FastifyRequest): Promise<void> => {
      if (declaredBodyBytes(request) > EARLY_REFUSAL_BODY_BYTES)
        await tasks.refuseWhenFull(accountOf(request).id);
    };
    app.post(
      '/api/tts/generate',
      { schema: taskSchemas.create, preParsing: refuseLargeWhenFull },
      async (request) => {
        const accountId = accountOf(request).id;
        return ok(
          await tasks.create(
            accountId,
            request.body,
            (id) => splitters.configFor(accountId, id),
            declaredBodyBytes(request),
          ),
        );
      },
    );

    app.get<{ Querystring: Record<string, string> }>(
      '/api/tts/generate',
      { schema: taskSchemas.list },
      async (request) => {
        const { items, total } = await tasks.list(accountOf(request).id, request.query);
        return { ...ok(items), total };
      },
    );

    app.get<{ Params: IdParams; Querystring: { stream?: string } }>(
      '/api/tts/generate/:id',
      { schema: taskSchemas.get },
      async (request) => ok(await tasks.get(accountOf(request).id, request.params.id, request.query)),
    );

    // Cancels a pending or processing task; answers the task record (status failed once stopped).
    app.post<{ Params: IdParams }>(
      '/api/tts/generate/:id/cancel',
      { schema: taskSchemas.cancel },
      async (request) => ok(await tasks.cancel(accountOf(request).id, request.params.id)),
    );

    // Gives the task a new stream token; answers the task with its new stream and audio URLs.
    app.post<{ Params: IdParams }>(
      '/api/tts/generate/:id/rotate-token',
      { schema: taskSchemas.rotateToken },
      async (request) => ok(await tasks.rotateToken(accountOf(request).id, request.params.id)),
    );

    app.delete<{ Params: IdParams }>(
      '/api/tts/generate/:id',
      { schema: taskSchemas.delete },
      async (request) => {
        await tasks.delete(accountOf(request).id, request.params.id);
        return okNoData();
      },
    );
  };
}
