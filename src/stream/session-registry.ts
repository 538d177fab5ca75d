/**
 * The stream sessions of this process, by key (task id and `i`; per content also the content
 * index). A request gets the live session of its key or creates it; the first request of
 * a key starts the pipeline, so it runs once per session build. Idle and failed sessions leave the
 * registry; the next request for their key builds a new session (new cache, new ETag).
 *
 * Bounded: at most `maxPerTask` live sessions per task and `maxPerAccount`
 * per account, and the session caches on disk within `cacheBudgetBytes`. A new session first
 * evicts idle sessions (no request holds them; least recently used first) to stay within these
 * bounds; when every session in the way is in use, it is refused with a clear error.
 */
import { AppError } from '../errors/app-error.js';
import type { GrowingFileFolder } from '../storage/growing-file.js';
import { StreamSession, type SessionSource } from './stream-session.js';

/** Options of a registry. */
export interface SessionRegistryOptions {
  /** Where the session caches are created (ready before the first `open`). */
  files: GrowingFileFolder;
  /** Sliding idle time after which a session without leases is reclaimed (30 minutes by default). */
  idleReclaimMs: number;
  /** Live sessions one task may have (distinct `i` / content keys); 0 = unbounded. */
  maxPerTask?: number | undefined;
  /** Live sessions one account may have across its tasks; 0 = unbounded. */
  maxPerAccount?: number | undefined;
  /** Bytes the session caches of this process may hold on disk before new sessions are refused; 0 = unbounded. */
  cacheBudgetBytes?: number | undefined;
  /** Retry-After (seconds) of a session refused because the ones in the way are all in use. */
  retryAfterSeconds?: number | undefined;
}

/** Whose a session is: the bounds are counted per task and per account. */
export interface SessionOwner {
  taskId: string;
  accountId: string;
}

/** A session handed to one request, with the lease that request must release when done. */
export interface SessionLease {
  session: StreamSession;
  /** Ends the request's access (idempotent); the idle window restarts when the last lease goes. */
  release: () => void;
}

/** Get-or-create of stream sessions, idle reclaim and the pipeline-run counter. */
export class SessionRegistry {
  private readonly sessions = new Map<string, StreamSession>();
  private readonly owners = new Map<StreamSession, SessionOwner>();
  /** Every build not yet destroyed, including failed ones still read by their last requests. */
  private readonly builds = new Set<StreamSession>();
  private runs = 0;
  private relays = 0;
  private evicted = 0;
  private closed = false;

  constructor(private readonly options: SessionRegistryOptions) {}

  /** Number of pipelines started since the registry was created (one per local session build). */
  get pipelineRuns(): number {
    return this.runs;
  }

  /** Number of sessions relayed from other nodes since the registry was created. */
  get relayRuns(): number {
    return this.relays;
  }

  /** Number of sessions currently handed out. */
  get size(): number {
    return this.sessions.size;
  }

  /** Requests reading a live session now (its leases), over all sessions. */
  get listeners(): number {
    let total = 0;
    for (const session of this.sessions.values()) total += session.leaseCount;
    return total;
  }

  /** Bytes held by the session caches of this registry (live and retired builds not yet destroyed). */
  get cacheBytes(): number {
    let total = 0;
    for (const build of this.builds) if (!build.isDestroyed) total += build.cache.produced;
    return total;
  }

  /** Live sessions evicted early to make room for new ones (bounds reached), since creation. */
  get evictions(): number {
    return this.evicted;
  }

  /** The session of `key` if one is live (for tests and diagnostics). */
  peek(key: string): StreamSession | undefined {
    return this.sessions.get(key);
  }

  /**
   * Returns the session of `key` with a lease on it, creating it (and starting `source`) when there
   * is none. Synchronous from lookup to lease, so concurrent first requests share one build. `kind`
   * says whether the build runs a pipeline here or relays another node's (metrics). A new session
   * that the bounds do not allow throws 429 RATE_LIMIT_EXCEEDED (per task / per account) or 503
   * STREAM_CAPACITY_EXHAUSTED (cache budget), both with Retry-After.
   */
  open(
    key: string,
    source: SessionSource,
    kind: 'pipeline' | 'relay' = 'pipeline',
    owner: SessionOwner = { taskId: key, accountId: key },
  ): SessionLease {
    if (this.closed) throw new Error('stream session registry is closed');
    let session = this.sessions.get(key);
    if (session === undefined) {
      for (const build of this.builds) if (build.isDestroyed) this.builds.delete(build);
      this.makeRoom(owner);
      session = new StreamSession({
        files: this.options.files,
        idleReclaimMs: this.options.idleReclaimMs,
        source,
        hooks: {
          onIdle: (s) => {
            this.forget(key, s);
            void s.destroy();
          },
          onFailed: (s) => {
            this.forget(key, s);
            s.retire();
          },
        },
      });
      this.sessions.set(key, session);
      this.owners.set(session, owner);
      this.builds.add(session);
      if (kind === 'pipeline') this.runs++;
      else this.relays++;
    }
    return { session, release: session.acquire() };
  }

  /**
   * The oldest live session older than the one of `key` that `sameBytes` says builds the same
   * bytes (another `i` of the same task and content), or undefined when there is none. Only older
   * sessions are offered, so no two sessions ever read each other. Reading it takes no lease: it
   * is still reclaimed and evicted as if nobody read it.
   */
  olderTwin(key: string, sameBytes: (otherKey: string) => boolean): StreamSession | undefined {
    for (const [other, session] of this.sessions) {
      if (other === key) return undefined;
      if (sameBytes(other) && !session.isDestroyed && !session.cache.failed) return session;
    }
    return undefined;
  }

  /** A lease on the live session of `key`, or undefined when there is none (never starts one: HEAD). */
  openExisting(key: string): SessionLease | undefined {
    if (this.closed) throw new Error('stream session registry is closed');
    const session = this.sessions.get(key);
    return session === undefined ? undefined : { session, release: session.acquire() };
  }

  /** The tasks with live sessions here. */
  taskIds(): Set<string> {
    const ids = new Set<string>();
    for (const session of this.sessions.values()) {
      const owner = this.owners.get(session);
      if (owner !== undefined) ids.add(owner.taskId);
    }
    return ids;
  }

  /**
   * Seconds of `taskId`'s audio its earliest live session here has had time to play (a player that
   * started with the session at real time); undefined when no live session of it is here.
   */
  playedSeconds(taskId: string): number | undefined {
    let started = Infinity;
    for (const session of this.sessions.values())
      if (this.owners.get(session)?.taskId === taskId) started = Math.min(started, session.startedAt);
    return started === Infinity ? undefined : (Date.now() - started) / 1000;
  }

  /** Whether any live session of `taskId` is here. */
  hasTask(taskId: string): boolean {
    for (const session of this.sessions.values())
      if (this.owners.get(session)?.taskId === taskId) return true;
    return false;
  }

  /** Destroys every session of `taskId` (its task was deleted): readers are cut, cache files deleted. */
  async endTask(taskId: string): Promise<void> {
    const ended: StreamSession[] = [];
    for (const [key, session] of [...this.sessions]) {
      if (this.owners.get(session)?.taskId !== taskId) continue;
      this.forget(key, session);
      ended.push(session);
    }
    await Promise.all(ended.map((s) => s.destroy()));
  }

  /** Destroys every session (pipelines aborted, cache files deleted, timers cleared). */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.builds];
    this.sessions.clear();
    this.builds.clear();
    await Promise.all(all.map((s) => s.destroy()));
  }

  private forget(key: string, session: StreamSession): void {
    if (this.sessions.get(key) === session) this.sessions.delete(key);
    this.owners.delete(session);
  }

  /**
   * Evicts idle sessions (least recently used first) until a new session of `owner` fits every
   * bound, or throws when the sessions in the way are all in use.
   */
  private makeRoom(owner: SessionOwner): void {
    const { maxPerTask = 0, maxPerAccount = 0, cacheBudgetBytes = 0 } = this.options;
    const retryAfter = { 'Retry-After': String(this.options.retryAfterSeconds ?? 5) };
    if (maxPerTask > 0 && !this.evictUntil((o) => o.taskId === owner.taskId, maxPerTask - 1)) {
      throw new AppError(
        'RATE_LIMIT_EXCEEDED',
        `task ${owner.taskId} already has ${String(maxPerTask)} stream sessions in use (distinct i values); reuse one or retry later`,
        { headers: retryAfter },
      );
    }
    if (maxPerAccount > 0 && !this.evictUntil((o) => o.accountId === owner.accountId, maxPerAccount - 1)) {
      throw new AppError(
        'RATE_LIMIT_EXCEEDED',
        `this account already has ${String(maxPerAccount)} stream sessions in use; retry later`,
        { headers: retryAfter },
      );
    }
    if (cacheBudgetBytes > 0) {
      for (const idle of this.idleOldestFirst(() => true)) {
        if (this.cacheBytes < cacheBudgetBytes) break;
        this.evict(idle);
      }
      if (this.cacheBytes >= cacheBudgetBytes) {
        throw new AppError(
          'STREAM_CAPACITY_EXHAUSTED',
          'the stream cache of this server is full with sessions in use; retry later',
          { headers: retryAfter },
        );
      }
    }
  }

  /** Evicts idle sessions matching `which` until at most `allowed` remain; false when that is impossible. */
  private evictUntil(which: (owner: SessionOwner) => boolean, allowed: number): boolean {
    const count = () => [...this.sessions.values()].filter((s) => this.matches(s, which)).length;
    if (count() <= allowed) return true;
    for (const idle of this.idleOldestFirst(which)) {
      this.evict(idle);
      if (count() <= allowed) return true;
    }
    return false;
  }

  private matches(session: StreamSession, which: (owner: SessionOwner) => boolean): boolean {
    const owner = this.owners.get(session);
    return owner !== undefined && which(owner);
  }

  /** Live sessions no request holds, matching `which`, least recently used first. */
  private idleOldestFirst(which: (owner: SessionOwner) => boolean): StreamSession[] {
    const idle = [...this.sessions.values()].filter((s) => s.idleSince !== null && this.matches(s, which));
    return idle.sort((a, b) => (a.idleSince ?? 0) - (b.idleSince ?? 0));
  }

  private evict(session: StreamSession): void {
    for (const [key, s] of this.sessions) if (s === session) this.forget(key, s);
    this.evicted++;
    void session.destroy();
  }
}
