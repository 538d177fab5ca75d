/**
 * Splitter configuration routes; envelopes are `{status:200, data}`.
 * `POST /api/splitter/preview` shows how a text splits (generation's own parsing) without a task.
 */
import type { FastifyInstance } from 'fastify';
import type { SplitterService } from '../../splitter/splitter-service.js';
import type { RequestParser } from '../../tasks/requests/request-parser.js';
import { accountOf } from '../auth.js';
import { declaredBodyBytes } from '../json-body.js';
import { splitterSchemas } from './splitter.schemas.js';

interface IdParams {
  id: string;
}

/** `parser` parses previews as generation parses its requests (large ones off the event loop). */
export function splitterRoutes(splitters: SplitterService, parser: RequestParser) {
  return async (app: FastifyInstance): Promise<void> => {
    // Static path: find-my-way prefers it over `/api/splitter/:id`, so "preview" is never taken for an id.
    app.post('/api/splitter/preview', { schema: splitterSchemas.preview }, async (request) => {
      const accountId = accountOf(request).id;
      const utterances = await parser.preview(
        request.body,
        (id) => splitters.configFor(accountId, id),
        declaredBodyBytes(request),
      );
      return { status: 200, data: { utterances } };
    });

    app.post('/api/splitter', { schema: splitterSchemas.create }, async (request) => ({
      status: 200,
      data: await splitters.create(accountOf(request).id, request.body),
    }));

    app.get<{ Querystring: { limit?: string; offset?: string } }>(
      '/api/splitter',
      { schema: splitterSchemas.list },
      async (request) => {
        const { items, total } = await splitters.list(accountOf(request).id, request.query);
        return { status: 200, data: items, total };
      },
    );

    app.get<{ Params: IdParams }>('/api/splitter/:id', { schema: splitterSchemas.get }, async (request) => ({
      status: 200,
      data: await splitters.get(accountOf(request).id, request.params.id),
    }));

    app.post<{ Params: IdParams }>(
      '/api/splitter/:id',
      { schema: splitterSchemas.update },
      async (request) => ({
        status: 200,
        data: await splitters.update(accountOf(request).id, request.params.id, request.body),
      }),
    );

    app.delete<{ Params: IdParams }>(
      '/api/splitter/:id',
      { schema: splitterSchemas.delete },
      async (request) => {
        await splitters.delete(accountOf(request).id, request.params.id);
        return { status: 200 };
      },
    );
  };
}
