/** GET /healthz: liveness plus a database round-trip; GET /metrics: counters for operators and tests. */
import type { FastifyInstance } from 'fastify';
import { sql, type Kysely } from 'kysely';
import { AppError } from '../../errors/app-error.js';
import type { Database } from '../../storage/schema.js';

export function healthRoutes(db: Kysely<Database>, counters: () => Record<string, number>) {
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/healthz', async () => {
      try {
        await sql`select 1`.execute(db);
      } catch (cause) {
        throw new AppError('STORAGE_UNAVAILABLE', 'database is not reachable', { cause });
      }
      return { status: 200, message: 'OK', data: { healthy: true } };
    });
    // Prometheus text format, so standard scrapers read it.
    app.get('/metrics', async (_request, reply) => {
      const lines = Object.entries(counters()).map(([name, value]) => {
        const metric = `voicegen_${name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}`;
        return `# TYPE ${metric} ${name.endsWith('Runs') ? 'counter' : 'gauge'}\n${metric} ${value}`;
      });
      return reply.type('text/plain; version=0.0.4').send(`${lines.join('\n')}\n`);
    });
  };
}
