/**
 * The one rate-limit registration of the service (@fastify/rate-limit): a fixed window per key, a
 * 429 RATE_LIMIT_EXCEEDED with `Retry-After` beyond it, counted in process (embedded) or in Redis so
 * that every node of a scale-out cluster counts the same requests. Keys are never multipliable by
 * a client: a client address (IPv6 by /64) or an authenticated account, and the
 * in-process store never evicts a live counter (src/http/rate-limit-store.memory.ts).
 */
import rateLimit, { normalizeIP } from '@fastify/rate-limit';
import type { FastifyInstance, FastifyRequest, onRequestAsyncHookHandler } from 'fastify';
import type { Redis } from 'ioredis';
import { AppError } from '../errors/app-error.js';
import { MemoryRateLimitCounters, memoryRateLimitStore } from './rate-limit-store.memory.js';

/**
 * Where counters live: this process (at most `capacity` live keys per rule, default 100,000), or a
 * Redis server shared by every node (keys expire with their window).
 */
export type RateLimitStore =
  { kind: 'memory'; capacity?: number } | { kind: 'redis'; client: Redis; keyPrefix: string };

/** One limit: `max` requests per `windowMs` per key. */
export interface RateLimitRule {
  max: number;
  windowMs: number;
  /** Counter name space, so limits of different scopes never share counters. */
  name: string;
  keyGenerator: (request: FastifyRequest) => string;
}

/**
 * The client's address as a rate-limit key: `request.ip` (the proxy's client when TRUST_PROXY names
 * the proxy), IPv4-mapped IPv6 as IPv4, and IPv6 by its /64, which one client usually holds whole.
 */
export function clientAddressKey(request: FastifyRequest): string {
  return addressKey(request.ip);
}

/** The rate-limit key of a client address, as clientAddressKey makes it for a request. */
export function addressKey(address: string): string {
  return `ip:${normalizeIP(address)}`;
}

function rateLimitError(_request: FastifyRequest, context: { after: string; ttl: number }): AppError {
  const seconds = Math.max(1, Math.ceil(context.ttl / 1000));
  return new AppError('RATE_LIMIT_EXCEEDED', `rate limit exceeded, retry in ${context.after}`, {
    headers: { 'Retry-After': String(seconds) },
  });
}

/** What a request admitted under a rule is told: the plugin's `x-ratelimit-*` header values. */
export interface RateLimitAdmission {
  limit: number;
  remaining: number;
  resetSeconds: number;
}

/**
 * A rule's in-process counters, for a path that answers without the plugin's hook (the
 * finished-audio shortcut): it counts in the same windows as the routes of the rule.
 */
export interface InProcessRateLimit {
  /**
   * Counts one request under `key` and answers what the plugin would tell it; undefined, counting
   * nothing, when the plugin would refuse it: that request is left to the routes, which count and
   * answer the 429 themselves.
   */
  admit(key: string): RateLimitAdmission | undefined;
}

/**
 * Applies `rule` to every route registered afterwards in `scope` (an encapsulated plugin scope).
 * Answers the rule's in-process counters when they live in this process, undefined with Redis.
 */
export async function registerRateLimit(
  scope: FastifyInstance,
  rule: RateLimitRule,
  store: RateLimitStore,
): Promise<InProcessRateLimit | undefined> {
  const counters = store.kind === 'memory' ? new MemoryRateLimitCounters(store.capacity) : undefined;
  await scope.register(rateLimit, {
    global: true,
    max: rule.max,
    timeWindow: rule.windowMs,
    keyGenerator: rule.keyGenerator,
    errorResponseBuilder: rateLimitError,
    ...(store.kind === 'redis'
      ? { redis: store.client, nameSpace: `${store.keyPrefix}rate-limit:${rule.name}:` }
      : { store: memoryRateLimitStore(store.capacity, counters) }),
  });
  if (counters === undefined) return undefined;
  const { max, windowMs } = rule;
  return {
    admit(key) {
      // The plugin refuses the request that makes a window's count exceed `max`.
      if (counters.read(key, windowMs).current >= max) return undefined;
      const count = counters.increment(key, windowMs, max);
      // A new key while the counters are full of live windows is counted as over, and not stored.
      if (count.current > max) return undefined;
      return {
        limit: max,
        remaining: Math.max(0, max - count.current),
        resetSeconds: Math.ceil(count.ttl / 1000),
      };
    },
  };
}

/**
 * Adds `hook` to the onRequest hooks of every route registered afterwards in `scope`, after the
 * rate limits registered before this call and before those registered after it. Rate limits are
 * route-level hooks, which Fastify runs after every `addHook` hook: an authentication hook added
 * with `addHook` would run (and refuse) before any limit could count the request.
 */
export function addRouteOnRequestHook(scope: FastifyInstance, hook: onRequestAsyncHookHandler): void {
  scope.addHook('onRoute', (route) => {
    const hooks = route.onRequest;
    route.onRequest = hooks === undefined ? [hook] : [...(Array.isArray(hooks) ? hooks : [hooks]), hook];
  });
}
