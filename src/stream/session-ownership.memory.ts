/**
 * Session ownership within one process (the embedded adapter): leases in a Map, tokens from a
 * counter, expiry by timer — the same observable behaviour as the Redis adapter, so the contract
 * suite holds for both. Instances built on one `MemoryLeaseStore` share its leases (tests use that
 * to play several nodes).
 */
import {
  RenewingSessionOwnership,
  type LeaseHolder,
  type LeaseStore,
  type SessionOwnershipOptions,
} from './session-ownership.js';

interface MemoryLease extends LeaseHolder {
  expiry: NodeJS.Timeout;
}

/** Leases of one process; every operation is synchronous inside, hence atomic. */
export class MemoryLeaseStore implements LeaseStore {
  private readonly leases = new Map<string, MemoryLease>();
  private lastToken = 0;

  async take(
    key: string,
    holder: string,
    ttlMs: number,
  ): Promise<{ token: number } | { heldBy: LeaseHolder }> {
    const current = this.leases.get(key);
    if (current !== undefined) return { heldBy: { holder: current.holder, token: current.token } };
    const token = ++this.lastToken;
    this.leases.set(key, { holder, token, expiry: this.expireAfter(key, token, ttlMs) });
    return { token };
  }

  async extend(key: string, token: number, ttlMs: number): Promise<boolean> {
    const current = this.leases.get(key);
    if (current?.token !== token) return false;
    clearTimeout(current.expiry);
    current.expiry = this.expireAfter(key, token, ttlMs);
    return true;
  }

  async drop(key: string, token: number): Promise<void> {
    const current = this.leases.get(key);
    if (current?.token !== token) return;
    clearTimeout(current.expiry);
    this.leases.delete(key);
  }

  async holderOf(key: string): Promise<LeaseHolder | undefined> {
    const current = this.leases.get(key);
    return current === undefined ? undefined : { holder: current.holder, token: current.token };
  }

  private expireAfter(key: string, token: number, ttlMs: number): NodeJS.Timeout {
    const timer = setTimeout(() => {
      if (this.leases.get(key)?.token === token) this.leases.delete(key);
    }, ttlMs);
    timer.unref();
    return timer;
  }
}

/** What `MemorySessionOwnership` needs. */
export interface MemorySessionOwnershipOptions extends SessionOwnershipOptions {
  /** The leases to share with other instances (tests' "other nodes"); a store of its own by default. */
  store?: MemoryLeaseStore;
}

/** `SessionOwnership` within one process. */
export class MemorySessionOwnership extends RenewingSessionOwnership {
  constructor(options: MemorySessionOwnershipOptions) {
    super(options.store ?? new MemoryLeaseStore(), options);
  }
}
