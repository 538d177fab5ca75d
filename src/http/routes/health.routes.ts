/**
 * GET /healthz: liveness plus a database round-trip; GET /metrics: counters for operators and tests.
 * Both are limited per client address (counted on this node: they describe this node), and /metrics
 * is for operators only (issue 11 finding 6): with METRICS_TOKEN it takes `Authorization: Bearer
 * <METRICS_TOKEN>`; without, it answers only clients on the loopback address that did not come
 * through a proxy (docs/decisions.md).
 */
import { BlockList, isIP } from 'node:net';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { sql, type Kysely } from 'kysely';
import { secretsEqual } from '../../common/secret-compare.js';
import { AppError, errors } from '../../errors/app-error.js';
import type { Database } from '../../storage/schema.js';
import { bearerToken } from '../auth.js';
import { addRouteOnRequestHook, clientAddressKey, registerRateLimit } from '../rate-limit.js';

/** Requests per client address and minute: /healthz (load-balancer probes), /metrics (scrapers). */
export const HEALTH_RATE_LIMIT_MAX = 600;
export const METRICS_RATE_LIMIT_MAX = 120;
const WINDOW_MS = 60_000;

/** Options of the health and metrics routes. */
export interface HealthRouteOptions {
  /** Bearer token /metrics requires; undefined = loopback clients only. */
  metricsToken: string | undefined;
}

/** Headers a reverse proxy adds: a request bearing them came from somewhere else. */
const FORWARDING_HEADERS = ['forwarded', 'x-forwarded-for', 'x-real-ip'] as const;

const LOOPBACK = new BlockList();
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4');
LOOPBACK.addAddress('::1', 'ipv6');

/** True for 127.0.0.0/8, ::1 and IPv4-mapped loopback (::ffff:127.x.y.z). */
export function isLoopbackAddress(address: string): boolean {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  const v4 = mapped ?? address;
  if (isIP(v4) === 4) return LOOPBACK.check(v4, 'ipv4');
  return isIP(address) === 6 && LOOPBACK.check(address, 'ipv6');
}

/** A local client: on loopback, and not a request a proxy on this machine relayed for someone else. */
function isLocalClient(request: FastifyRequest): boolean {
  if (!isLoopbackAddress(request.ip)) return false;
  // request.ip differs from the socket's peer only when TRUST_PROXY resolved the forwarding headers.
  const resolved = request.ip !== request.socket.remoteAddress;
  return resolved || FORWARDING_HEADERS.every((name) => request.headers[name] === undefined);
}

/** The onRequest check of /metrics. */
function metricsAccess(token: string | undefined) {
  return async (request: FastifyRequest): Promise<void> => {
    if (token !== undefined) {
      const given = bearerToken(request);
      if (given === undefined || !secretsEqual(given, token)) {
        throw errors.unauthorized('/metrics needs Authorization: Bearer <METRICS_TOKEN>');
      }
      return;
    }
    if (!isLocalClient(request)) {
      throw errors.forbidden('/metrics answers only local clients unless METRICS_TOKEN is set');
    }
  };
}

export function healthRoutes(
  db: Kysely<Database>,
  counters: () => Record<string, number>,
  options: HealthRouteOptions,
) {
  return async (app: FastifyInstance): Promise<void> => {
    await app.register(async (scope) => {
      await registerRateLimit(
        scope,
        { name: 'healthz', max: HEALTH_RATE_LIMIT_MAX, windowMs: WINDOW_MS, keyGenerator: clientAddressKey },
        { kind: 'memory' },
      );
      scope.get('/healthz', async () => {
        try {
          await sql`select 1`.execute(db);
        } catch (cause) {
          throw new AppError('STORAGE_UNAVAILABLE', 'database is not reachable', { cause });
        }
        return { status: 200, message: 'OK', data: { healthy: true } };
      });
    });

    await app.register(async (scope) => {
      await registerRateLimit(
        scope,
        { name: 'metrics', max: METRICS_RATE_LIMIT_MAX, windowMs: WINDOW_MS, keyGenerator: clientAddressKey },
        { kind: 'memory' },
      );
      // After the limit, so that token guesses are counted too.
      addRouteOnRequestHook(scope, metricsAccess(options.metricsToken));
      // Prometheus text format, so standard scrapers read it.
      scope.get('/metrics', async (_request, reply) => {
        const lines = Object.entries(counters()).map(([name, value]) => {
          const metric = `voicegen_${name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`)}`;
          return `# TYPE ${metric} ${name.endsWith('Runs') ? 'counter' : 'gauge'}\n${metric} ${value}`;
        });
        return reply.type('text/plain; version=0.0.4').send(`${lines.join('\n')}\n`);
      });
    });
  };
}
