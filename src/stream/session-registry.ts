/**
 * The stream sessions of this process, by key (spec §2.2: task id and `i`; per content also the
 * content index). A request gets the live session of its key or creates it; the first request of
 * a key starts the pipeline, so it runs once per session build. Idle and failed sessions leave the
 * registry; the next request for their key builds a new session (new cache, new ETag).
 */
import { StreamSession, type SessionSource } from './stream-session.js';

/** Options of a registry. */
export interface SessionRegistryOptions {
  /** Directory of the session cache files (must exist before the first `open`). */
  dir: string;
  /** Sliding idle time after which a session without leases is reclaimed (spec §8: 30 minutes). */
  idleReclaimMs: number;
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
  /** Every build not yet destroyed, including failed ones still read by their last requests. */
  private readonly builds = new Set<StreamSession>();
  private runs = 0;
  private relays = 0;
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

  /** The session of `key` if one is live (for tests and diagnostics). */
  peek(key: string): StreamSession | undefined {
    return this.sessions.get(key);
  }

  /**
   * Returns the session of `key` with a lease on it, creating it (and starting `source`) when there
   * is none. Synchronous from lookup to lease, so concurrent first requests share one build. `kind`
   * says whether the build runs a pipeline here or relays another node's (metrics).
   */
  open(key: string, source: SessionSource, kind: 'pipeline' | 'relay' = 'pipeline'): SessionLease {
    if (this.closed) throw new Error('stream session registry is closed');
    let session = this.sessions.get(key);
    if (session === undefined) {
      for (const build of this.builds) if (build.isDestroyed) this.builds.delete(build);
      session = new StreamSession({
        dir: this.options.dir,
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
      this.builds.add(session);
      if (kind === 'pipeline') this.runs++;
      else this.relays++;
    }
    return { session, release: session.acquire() };
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
  }
}
