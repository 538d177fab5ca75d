/**
 * Session ownership across nodes in Redis (the scale-out adapter).
 *
 * Keys (all under the deployment's prefix):
 * - `<prefix>session-lease:<key>` — the lease, a string `"<token> <holder>"` with a PX expiry;
 * - `<prefix>session-lease-token` — one counter for every key: INCR makes each new token greater
 *   than every token before it, for this key and all others, and leaves no key behind per session.
 *
 * Every operation is one Lua script, so nothing reads and then writes: take = "no lease? INCR,
 * then SET NX PX" (a losing taker burns no token and sees the winner in the same step), extend =
 * compare-token-and-PEXPIRE, drop = compare-token-and-DEL. A single Redis server (or a primary
 * with replicas) is assumed: the take script touches two keys, which a Redis Cluster would need in
 * one hash slot. As with any Redis lease, a failover to a replica that missed the last writes can
 * hand a lease out twice; the fencing token then still orders the writers.
 */
import { createHash } from 'node:crypto';
import type { Redis } from 'ioredis';
import {
  RenewingSessionOwnership,
  type LeaseHolder,
  type LeaseStore,
  type SessionOwnershipOptions,
} from './session-ownership.js';

/** A Lua script run by its SHA1 (EVALSHA), loaded with EVAL the first time a server lacks it. */
class LuaScript {
  private readonly sha: string;

  constructor(private readonly source: string) {
    this.sha = createHash('sha1').update(source).digest('hex');
  }

  async run(redis: Redis, keys: string[], args: (string | number)[]): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args);
    } catch (err) {
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err;
      return redis.eval(this.source, keys.length, ...keys, ...args);
    }
  }
}

// KEYS[1] lease, KEYS[2] token counter; ARGV[1] holder, ARGV[2] ttl ms.
// Returns {1, value} when taken, {0, current value} when someone holds the lease.
const TAKE = new LuaScript(`
local current = redis.call('GET', KEYS[1])
if current then return {0, current} end
local value = string.format('%d', redis.call('INCR', KEYS[2])) .. ' ' .. ARGV[1]
redis.call('SET', KEYS[1], value, 'NX', 'PX', ARGV[2])
return {1, value}
`);

// KEYS[1] lease; ARGV[1] token, ARGV[2] ttl ms. 1 when extended, 0 when the token no longer holds it.
const EXTEND = new LuaScript(`
local current = redis.call('GET', KEYS[1])
if current and string.match(current, '^%d+') == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
`);

// KEYS[1] lease; ARGV[1] token. 1 when deleted, 0 when the token no longer holds it.
const DROP = new LuaScript(`
local current = redis.call('GET', KEYS[1])
if current and string.match(current, '^%d+') == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`);

/** Parses a lease value `"<token> <holder>"`. */
function parseLease(value: string): LeaseHolder {
  const space = value.indexOf(' ');
  const token = Number(value.slice(0, space));
  if (space <= 0 || !Number.isSafeInteger(token)) throw new Error(`malformed session lease value: ${value}`);
  return { token, holder: value.slice(space + 1) };
}

/** What `RedisLeaseStore` and `RedisSessionOwnership` need. */
export interface RedisLeaseStoreOptions {
  /** Runs the scripts; shared with other users and never closed here. */
  connection: Redis;
  /** Prefix of every Redis key of this deployment (tests: one per test). */
  prefix: string;
}

/** Leases as Redis keys with PX expiry, changed only by compare-token Lua scripts. */
export class RedisLeaseStore implements LeaseStore {
  private readonly redis: Redis;
  private readonly prefix: string;

  constructor(options: RedisLeaseStoreOptions) {
    this.redis = options.connection;
    this.prefix = options.prefix;
  }

  async take(
    key: string,
    holder: string,
    ttlMs: number,
  ): Promise<{ token: number } | { heldBy: LeaseHolder }> {
    const reply = await TAKE.run(
      this.redis,
      [this.leaseKey(key), `${this.prefix}session-lease-token`],
      [holder, ttlMs],
    );
    if (!Array.isArray(reply) || typeof reply[1] !== 'string')
      throw new Error('unexpected reply of the lease take script');
    const lease = parseLease(reply[1]);
    return reply[0] === 1 ? { token: lease.token } : { heldBy: lease };
  }

  async extend(key: string, token: number, ttlMs: number): Promise<boolean> {
    return (await EXTEND.run(this.redis, [this.leaseKey(key)], [token, ttlMs])) === 1;
  }

  async drop(key: string, token: number): Promise<void> {
    await DROP.run(this.redis, [this.leaseKey(key)], [token]);
  }

  async holderOf(key: string): Promise<LeaseHolder | undefined> {
    const value = await this.redis.get(this.leaseKey(key));
    return value === null ? undefined : parseLease(value);
  }

  private leaseKey(key: string): string {
    return `${this.prefix}session-lease:${key}`;
  }
}

/** What `RedisSessionOwnership` needs. */
export interface RedisSessionOwnershipOptions extends RedisLeaseStoreOptions, SessionOwnershipOptions {}

/** `SessionOwnership` shared by every node through Redis. */
export class RedisSessionOwnership extends RenewingSessionOwnership {
  constructor(options: RedisSessionOwnershipOptions) {
    super(new RedisLeaseStore(options), options);
  }
}
