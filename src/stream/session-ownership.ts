/**
 * Stream-session ownership: exactly one node runs a stream session's pipeline cluster-wide. A node
 * takes a lease on the session's key, renews it while it works, and fences its writes with a
 * token, so a node that lost its lease (stalled past the ttl, cut off from the store) stops
 * writing into the session instead of racing the new owner.
 *
 * The port is `SessionOwnership`. Both adapters share the lease keeping below
 * (`RenewingSessionOwnership`: renewal timer, local expiry, `lost` signal) over a small atomic
 * `LeaseStore`: in-process (`session-ownership.memory.ts`) and Redis (`session-ownership.redis.ts`).
 * One contract suite (`session-ownership.contract.test.ts`) runs against both.
 */

/** Who holds a session's lease, and the fencing token of that lease. */
export interface LeaseHolder {
  /** The holding node (its NODE_URL), as given to `acquire`. */
  holder: string;
  /** The lease's fencing token. */
  token: number;
}

/** A lease this node holds: its token, a signal for its loss, a fenced check, and release. */
export interface OwnedSession {
  /** Fencing token: strictly greater than every token handed out before for this key. */
  readonly token: number;
  /**
   * Aborts when this node must stop writing into the session: the lease was lost (a renewal
   * failed or found the lease gone or taken, or the ttl ran out before a renewal was confirmed),
   * or it was released. Its reason says which.
   */
  readonly lost: AbortSignal;
  /** True while the store still records this token as the holder: the fenced check before a write. */
  stillOwned(): Promise<boolean>;
  /** Stops renewing and gives the lease up, only if the store still records this token (compare-and-delete). */
  release(): Promise<void>;
}

/** Result of `acquire`: the lease, or who holds it now. */
export type AcquireResult = { owned: OwnedSession } | { heldBy: LeaseHolder };

/** Cluster-wide leases on stream sessions, one holder per key. */
export interface SessionOwnership {
  /**
   * Takes the lease of `key` for `holder` (this node's URL) unless anyone holds it — this node
   * included: a lease is never shared. A taken lease renews itself every ttl/3 until released or
   * lost.
   */
  acquire(key: string, holder: string): Promise<AcquireResult>;
  /** The current holder of `key`, if any. */
  holderOf(key: string): Promise<LeaseHolder | undefined>;
  /**
   * Shutdown: stops every renewal and releases every lease this instance holds (so other nodes
   * can take the sessions over at once instead of after a ttl); `acquire` is refused afterwards.
   * Leaves the store's connection open (it is the caller's).
   */
  close(): Promise<void>;
}

/** The atomic operations a lease needs from a store; each is one step, never read-then-write. */
export interface LeaseStore {
  /** If `key` has no lease: records `holder` with a new token (greater than any before) for `ttlMs`. */
  take(key: string, holder: string, ttlMs: number): Promise<{ token: number } | { heldBy: LeaseHolder }>;
  /** Compare-and-extend: resets the lease's expiry to `ttlMs` if `token` still holds `key`; false otherwise. */
  extend(key: string, token: number, ttlMs: number): Promise<boolean>;
  /** Compare-and-delete: removes the lease if `token` still holds `key`. */
  drop(key: string, token: number): Promise<void>;
  /** The current holder of `key`, if any. */
  holderOf(key: string): Promise<LeaseHolder | undefined>;
}

/** Lease timing of a `RenewingSessionOwnership`. */
export interface SessionOwnershipOptions {
  /** Lease time: an owner that stops renewing loses its lease after this long (config.leases.sessionMs). */
  ttlMs: number;
  /**
   * Interval between renewals; ttlMs / 3 by default (two renewals may fail before the lease runs
   * out). Tests set it above ttlMs to play a stalled node that lets its lease expire.
   */
  renewEveryMs?: number;
}

/**
 * Why `lost` aborted. Losses: `expired` (the ttl ran out before a renewal was confirmed), `gone`
 * (a renewal found the lease expired or taken by another token), `failed` (a renewal errored).
 * `released` is this node's own choice.
 */
export type LeaseEndReason = 'expired' | 'gone' | 'failed' | 'released';

/** The reason of an aborted `lost` signal. */
export class LeaseEndedError extends Error {
  constructor(
    readonly key: string,
    readonly token: number,
    readonly why: LeaseEndReason,
    options?: { cause?: unknown },
  ) {
    super(`lease ${token} of ${key} ended: ${why}`, options);
    this.name = 'LeaseEndedError';
  }
}

/** `SessionOwnership` over any `LeaseStore`: renewal timer, local expiry and the `lost` signal. */
export class RenewingSessionOwnership implements SessionOwnership {
  private readonly ttlMs: number;
  private readonly renewEveryMs: number;
  private readonly held = new Set<KeptLease>();
  private closed = false;

  constructor(
    private readonly store: LeaseStore,
    options: SessionOwnershipOptions,
  ) {
    if (!(options.ttlMs > 0)) throw new RangeError('ttlMs must be positive');
    this.ttlMs = options.ttlMs;
    this.renewEveryMs = options.renewEveryMs ?? Math.max(1, Math.floor(options.ttlMs / 3));
  }

  async acquire(key: string, holder: string): Promise<AcquireResult> {
    if (this.closed) throw new Error('session ownership is closed');
    const sentAt = performance.now();
    const taken = await this.store.take(key, holder, this.ttlMs);
    if ('heldBy' in taken) return taken;
    const lease = new KeptLease(this.store, key, taken.token, this.ttlMs, this.renewEveryMs, sentAt, () =>
      this.held.delete(lease),
    );
    if (this.closed) {
      // close() ran while the lease was being taken: give it straight back.
      await lease.release();
      throw new Error('session ownership is closed');
    }
    this.held.add(lease);
    return { owned: lease };
  }

  holderOf(key: string): Promise<LeaseHolder | undefined> {
    return this.store.holderOf(key);
  }

  async close(): Promise<void> {
    this.closed = true;
    // Each release stops its renewals first, then deletes; a store error leaves that lease to expire.
    await Promise.allSettled([...this.held].map((lease) => lease.release()));
  }
}

/** One held lease: renews itself until it ends; ends on loss or release, exactly once. */
class KeptLease implements OwnedSession {
  private readonly controller = new AbortController();
  private renewTimer: NodeJS.Timeout | undefined;
  private expiryTimer: NodeJS.Timeout | undefined;

  constructor(
    private readonly store: LeaseStore,
    private readonly key: string,
    readonly token: number,
    private readonly ttlMs: number,
    private readonly renewEveryMs: number,
    takenAt: number,
    private readonly onEnd: () => void,
  ) {
    this.confirmedAt(takenAt);
    this.scheduleRenewal();
  }

  get lost(): AbortSignal {
    return this.controller.signal;
  }

  async stillOwned(): Promise<boolean> {
    return (await this.store.holderOf(this.key))?.token === this.token;
  }

  async release(): Promise<void> {
    this.end('released');
    // Even after a loss: compare-and-delete never removes a newer holder's lease.
    await this.store.drop(this.key, this.token);
  }

  /**
   * The store counts the ttl from when it ran the command, which is after `sentAt`: expiring
   * locally at sentAt + ttl means this node gives up no later than the store does.
   */
  private confirmedAt(sentAt: number): void {
    clearTimeout(this.expiryTimer);
    const remaining = Math.max(0, sentAt + this.ttlMs - performance.now());
    this.expiryTimer = setTimeout(() => this.end('expired'), remaining);
    this.expiryTimer.unref();
  }

  private scheduleRenewal(): void {
    this.renewTimer = setTimeout(() => void this.renew(), this.renewEveryMs);
    this.renewTimer.unref();
  }

  private async renew(): Promise<void> {
    if (this.lost.aborted) return;
    const sentAt = performance.now();
    let extended: boolean;
    try {
      extended = await this.store.extend(this.key, this.token, this.ttlMs);
    } catch (err) {
      this.end('failed', err);
      return;
    }
    if (this.lost.aborted) return;
    if (!extended) {
      this.end('gone');
      return;
    }
    this.confirmedAt(sentAt);
    this.scheduleRenewal();
  }

  private end(why: LeaseEndReason, cause?: unknown): void {
    if (this.lost.aborted) return;
    clearTimeout(this.renewTimer);
    clearTimeout(this.expiryTimer);
    this.onEnd();
    this.controller.abort(
      new LeaseEndedError(this.key, this.token, why, cause === undefined ? {} : { cause }),
    );
  }
}
