/**
 * The one rate-limit registration of the service (@fastify/rate-limit): a fixed window per key, a
 * 429 RATE_LIMIT_EXCEEDED with `Retry-After` beyond it, counted in process (embedded) or in Redis so
 * that every node of a scale-out cluster counts the same requests.
 */
import rateLimit from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import { AppError } from '../errors/app-error.js';

/** Where counters live: this process, or a Redis server shared by every node. */
export type RateLimitStore = { kind: 'memory' } | { kind: 'redis'; client: Redis; keyPrefix: string };

/** One limit: `max` requests per `windowMs` per key. */
export interface RateLimitRule {
  max: number;
  windowMs: number;
  /** Counter name space, so limits of different scopes never share counters. */
  name: string;
  keyGenerator: (request: FastifyRequest) => string;
}

function rateLimitError(_request: FastifyRequest, context: { after: string; ttl: number }): AppError {
  const seconds = Math.max(1, Math.ceil(context.ttl / 1000));
  return new AppError('RATE_LIMIT_EXCEEDED', `rate limit exceeded, retry in ${context.after}`, {
    headers: { 'Retry-After': String(seconds) },
  });
}

/** Applies `rule` to every route of `scope` (an encapsulated plugin scope). */
export async function registerRateLimit(
  scope: FastifyInstance,
  rule: RateLimitRule,
  store: RateLimitStore,
): Promise<void> {
  await scope.register(rateLimit, {
    global: true,
    max: rule.max,
    timeWindow: rule.windowMs,
    keyGenerator: rule.keyGenerator,
    errorResponseBuilder: rateLimitError,
    ...(store.kind === 'redis' && {
      redis: store.client,
      nameSpace: `${store.keyPrefix}rate-limit:${rule.name}:`,
    }),
  });
}
