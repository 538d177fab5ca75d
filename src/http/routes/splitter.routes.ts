/** Splitter configuration routes (spec 4.3, decisions §7); envelopes are `{status:200, data}`. */
import type { FastifyInstance } from 'fastify';
import type { SplitterService } from '../../splitter/splitter-service.js';
import { accountOf } from '../auth.js';

interface IdParams {
  id: string;
}

export function splitterRoutes(splitters: SplitterService) {
  return async (app: FastifyInstance): Promise<void> => {
    app.post('/api/splitter', async (request) => ({
      status: 200,
      data: await splitters.create(accountOf(request).id, request.body),
    }));

    app.get<{ Querystring: { limit?: string; offset?: string } }>('/api/splitter', async (request) => {
      const { items, total } = await splitters.list(accountOf(request).id, request.query);
      return { status: 200, data: items, total };
    });

    app.get<{ Params: IdParams }>('/api/splitter/:id', async (request) => ({
      status: 200,
      data: await splitters.get(accountOf(request).id, request.params.id),
    }));

    app.post<{ Params: IdParams }>('/api/splitter/:id', async (request) => ({
      status: 200,
      data: await splitters.update(accountOf(request).id, request.params.id, request.body),
    }));

    app.delete<{ Params: IdParams }>('/api/splitter/:id', async (request) => {
      await splitters.delete(accountOf(request).id, request.params.id);
      return { status: 200 };
    });
  };
}
