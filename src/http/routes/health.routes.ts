/**
 * GET /healthz: liveness (the process answers); GET /readyz: readiness (the database and, in
 * scale-out, Redis and S3 answer: 200, or 503 naming what does not); GET /metrics: Prometheus
 * metrics (src/http/metrics.prom.ts). All are limited per client address (counted on this node:
 * they describe this node), and /metrics
 * is for operators only: with METRICS_TOKEN it takes `Authorization: Bearer
 * <METRICS_TOKEN>`; without, it answers only clients on the loopback address that did not come
 * through a proxy (docs/decisions.md).
 */
import { BlockList, isIP } from 'node:net';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { secretsEqual } from '../../common/secret-compare.js';
import { AppError, errors } from '../../errors/app-error.js';
import { DEPENDENCY_RETRY_AFTER_SECONDS } from '../../errors/dependency-unavailable.js';
import type { ServiceMetrics } from '../metrics.prom.js';
import { bearerToken } from '../auth.js';
import { addRouteOnRequestHook, clientAddressKey, registerRateLimit } from '../rate-limit.js';
import { healthSchemas } from './health.schemas.js';

/** Requests per client address and minute: /healthz (load-balancer probes), /metrics (scrapers). */
export const HEALTH_RATE_LIMIT_MAX = 600;
export const METRICS_RATE_LIMIT_MAX = 120;
const WINDOW_MS = 60_000;

/** How long /readyz waits for each dependency. */
const READINESS_TIMEOUT_MS = 3_000;

/** Options of the health and metrics routes. */
export interface HealthRouteOptions {
  /** Bearer token /metrics requires; undefined = loopback clients only. */
  metricsToken: string | undefined;
  /** The checks /readyz runs, by dependency name; each throws when its dependency is unreachable. */
  readiness: Record<string, (signal: AbortSignal) => Promise<void>>;
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

export function healthRoutes(metrics: ServiceMetrics, options: HealthRouteOptions) {
  return async (app: FastifyInstance): Promise<void> => {
    await app.register(async (scope) => {
      await registerRateLimit(
        scope,
        { name: 'healthz', max: HEALTH_RATE_LIMIT_MAX, windowMs: WINDOW_MS, keyGenerator: clientAddressKey },
        { kind: 'memory' },
      );
      // Alive: the process answers requests (a load balancer restarts it otherwise).
      scope.get('/healthz', { schema: healthSchemas.healthz }, async () => ({
        status: 200,
        message: 'OK',
        data: { healthy: true },
      }));
      // Ready: every dependency answers; 503 names the ones that do not (take the node out of rotation).
      scope.get('/readyz', { schema: healthSchemas.readyz }, async () => {
        const names = Object.keys(options.readiness);
        const results = await Promise.all(
          names.map(async (name) => {
            const check = options.readiness[name];
            if (check === undefined) return [name, true] as const;
            const ok = await check(AbortSignal.timeout(READINESS_TIMEOUT_MS)).then(
              () => true,
              () => false,
            );
            return [name, ok] as const;
          }),
        );
        const checks = Object.fromEntries(results.map(([name, ok]) => [name, ok ? 'ok' : 'unreachable']));
        const down = results.filter(([, ok]) => !ok).map(([name]) => name);
        if (down.length > 0) {
          throw new AppError('STORAGE_UNAVAILABLE', `not ready: ${down.join(', ')} unreachable`, {
            headers: { 'Retry-After': String(DEPENDENCY_RETRY_AFTER_SECONDS) },
          });
        }
        return { status: 200, message: 'OK', data: { ready: true, checks } };
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
      scope.get('/metrics', { schema: healthSchemas.metrics }, async (_request, reply) => {
        const { contentType, body } = await metrics.render();
        return reply.type(contentType).send(body);
      });
    });
  };
}
