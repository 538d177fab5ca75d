/** GET /api/account/info: the authenticated account. */
import type { FastifyInstance } from 'fastify';
import { accountOf } from '../auth.js';
import { ok } from '../envelope.js';

export async function accountRoutes(app: FastifyInstance): Promise<void> {
  app.get('/api/account/info', async (request) => {
    const account = accountOf(request);
    return ok({ id: account.id, name: account.name, createdAt: account.createdAt.toISOString() });
  });
}
