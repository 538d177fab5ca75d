/**
 * The in-process counter store of the rate limits: fixed windows per key in a
 * bounded map that never drops a counter whose window is still running. @fastify/rate-limit's own
 * store is an LRU of 5,000 keys, so requests under new keys evicted everyone's live counters and
 * reset their budgets; here expired windows are swept first, and when the map is full of live
 * windows a new key is answered as over its limit (until the oldest window ends) instead.
 */
import type { FastifyRateLimitStore, FastifyRateLimitStoreCtor } from '@fastify/rate-limit';

/** A counter's state as @fastify/rate-limit reads it: requests in this window, ms left of it. */
export interface RateLimitCount {
  current: number;
  ttl: number;
}

interface Window {
  count: number;
  startedAt: number;
}

/** Keys a rule keeps counters for at most, unless told otherwise (about 100 bytes each). */
export const DEFAULT_RATE_LIMIT_CAPACITY = 100_000;

/**
 * Fixed-window counters with bounded memory. One instance per rule. The map is kept in the order
 * windows started (a restarted window is moved to the end), so expired windows are always at the
 * front and each sweep costs only the entries it removes.
 */
export class MemoryRateLimitCounters {
  private readonly windows = new Map<string, Window>();

  constructor(
    private readonly capacity: number = DEFAULT_RATE_LIMIT_CAPACITY,
    private readonly now: () => number = Date.now,
  ) {
    if (!Number.isInteger(capacity) || capacity < 1)
      throw new RangeError('capacity must be a positive integer');
  }

  /** Counts one request under `key`; a new key while the map is full of live windows counts as over `max`. */
  increment(key: string, windowMs: number, max: number): RateLimitCount {
    const now = this.now();
    this.sweep(now, windowMs);
    const window = this.windows.get(key);
    if (window !== undefined && window.startedAt + windowMs > now) {
      window.count += 1;
      return { current: window.count, ttl: window.startedAt + windowMs - now };
    }
    if (window !== undefined) this.windows.delete(key);
    if (this.windows.size >= this.capacity) {
      // Full of live counters: refuse the newcomer until the oldest window ends, never evict.
      const oldest = this.windows.values().next().value;
      const ttl = oldest === undefined ? windowMs : Math.max(1, oldest.startedAt + windowMs - now);
      return { current: max + 1, ttl };
    }
    this.windows.set(key, { count: 1, startedAt: now });
    return { current: 1, ttl: windowMs };
  }

  /** The state of `key` without counting a request. */
  read(key: string, windowMs: number): RateLimitCount {
    const now = this.now();
    const window = this.windows.get(key);
    if (window === undefined || window.startedAt + windowMs <= now) return { current: 0, ttl: 0 };
    return { current: window.count, ttl: window.startedAt + windowMs - now };
  }

  /** Keys currently held (live or not yet swept). */
  get size(): number {
    return this.windows.size;
  }

  private sweep(now: number, windowMs: number): void {
    for (const [key, window] of this.windows) {
      if (window.startedAt + windowMs > now) return;
      this.windows.delete(key);
    }
  }
}

type Callback = Parameters<FastifyRateLimitStore['incr']>[1];

/**
 * A @fastify/rate-limit `store` class over MemoryRateLimitCounters of `capacity` keys: `counters`
 * when given (so code outside the plugin counts in the same windows), else fresh ones.
 */
export function memoryRateLimitStore(
  capacity: number = DEFAULT_RATE_LIMIT_CAPACITY,
  counters?: MemoryRateLimitCounters,
): FastifyRateLimitStoreCtor {
  let shared = counters;
  return class MemoryRateLimitStore implements FastifyRateLimitStore {
    // The plugin makes one store per registration: it takes the shared counters, children do not.
    private readonly counters = shared ?? new MemoryRateLimitCounters(capacity);

    constructor() {
      shared = undefined;
    }

    incr(key: string, callback: Callback, timeWindow: number, max: number): void {
      callback(null, this.counters.increment(key, timeWindow, max));
    }

    // Used by the plugin's `{ increment: false }` reads.
    read(key: string, callback: Callback, timeWindow: number): void {
      callback(null, this.counters.read(key, timeWindow));
    }

    // Route-level rate-limit configs get counters of their own, as with the plugin's stores.
    child(): MemoryRateLimitStore {
      return new MemoryRateLimitStore();
    }
  };
}
