/** GET /healthz: liveness plus a database round-trip. */
import type { FastifyInstance } from 'fastify';
import { sql, type Kysely } from 'kysely';
import { AppError } from '../../errors/app-error.js';
import type { Database } from '../../storage/schema.js';

export function healthRoutes(db: Kysely<Database>) {
  return async (app: FastifyInstance): Promise<void> => {
    app.get('/healthz', async () => {
      try {
        await sql`select 1`.execute(db);
      } catch (cause) {
        throw new AppError('STORAGE_UNAVAILABLE', 'database is not reachable', { cause });
      }
      return { status: 200, message: 'OK', data: { healthy: true } };
    });
  };
}
