/**
 * One stream session: one build of the audio of a (task, `i`) or (task, content, `i`)
 * key. Its source runs once and appends to a growing file on disk; every request reads from
 * that cache. Each build has its own cache file and its own strong ETag. The source is this node's
 * audio pipeline, or (scale-out) a relay of the build that another node runs, whose ETag it takes.
 */
import { randomBytes } from 'node:crypto';
import type { GrowingFile, GrowingFileFolder } from '../storage/growing-file.js';

/** Produces the MP3 bytes of a session; aborting `signal` stops it. */
export type PipelineFactory = (signal: AbortSignal) => AsyncIterable<Uint8Array>;

/** What a session build is made of: its strong ETag and its bytes. */
export interface SessionBuild {
  etag: string;
  bytes: AsyncIterable<Uint8Array>;
}

/** Starts a session build; aborting `signal` stops it. A rejection fails the session before any byte. */
export type SessionSource = (signal: AbortSignal) => Promise<SessionBuild>;

/** A new strong entity tag for a build (RFC 9110 §8.8.3): base64url characters are all etagc. */
export function newSessionEtag(): string {
  return `"${randomBytes(16).toString('base64url')}"`;
}

/** The source of a build made by this node's own pipeline, with a new ETag. */
export function pipelineSource(pipeline: PipelineFactory): SessionSource {
  return (signal) => Promise.resolve({ etag: newSessionEtag(), bytes: pipeline(signal) });
}

/** How a session tells its owner that it should go away. */
export interface SessionHooks {
  /** No lease for `idleReclaimMs`: the owner reclaims the session. */
  onIdle(session: StreamSession): void;
  /** The pipeline failed: the owner stops handing the session out (readers see a truncated stream). */
  onFailed(session: StreamSession, error: Error): void;
}

/** Options of one session build. */
export interface StreamSessionOptions {
  /** Where the cache file is created (ready). */
  files: GrowingFileFolder;
  /** Sliding idle time after which an unleased session is reclaimed. */
  idleReclaimMs: number;
  source: SessionSource;
  hooks: SessionHooks;
}

function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

/** A session build: its cache, its ETag, its running source and the leases of the requests using it. */
export class StreamSession {
  /**
   * Strong entity tag of this build (RFC 9110 §8.8.3); a rebuild gets another one. Resolves once the
   * source has started (at once for a local pipeline; when the owner answers for a relay); rejects
   * with the source's error when it fails before that.
   */
  readonly etag: Promise<string>;
  private resolveEtag: (etag: string) => void = () => undefined;
  private rejectEtag: (err: Error) => void = () => undefined;
  readonly cache: GrowingFile;
  /** Settles (never rejects) once the pipeline has ended, whichever way. */
  readonly pipelineDone: Promise<void>;
  private leases = 0;
  /** When the last lease went (creation time before the first); null while leased. */
  private idleSinceMs: number | null = Date.now();
  /** When the session started (ms since the epoch): its first reader has played about this long since. */
  readonly startedAt = Date.now();
  private idleTimer: NodeJS.Timeout | undefined;
  private readonly controller = new AbortController();
  /** Set once the owner stopped handing the session out; the last lease then destroys it. */
  private retired = false;
  private destroying: Promise<void> | null = null;
  private readonly idleReclaimMs: number;
  private readonly hooks: SessionHooks;

  /** Creates the cache file and starts the source at once. */
  constructor(options: StreamSessionOptions) {
    this.etag = new Promise<string>((resolve, reject) => {
      this.resolveEtag = resolve;
      this.rejectEtag = reject;
    });
    this.etag.catch(() => undefined); // a failed build is reported to its readers, not as unhandled
    this.cache = options.files.create(`${randomBytes(16).toString('base64url')}.mp3`);
    this.idleReclaimMs = options.idleReclaimMs;
    this.hooks = options.hooks;
    this.pipelineDone = this.run(options.source);
    this.armIdleTimer();
  }

  /** Requests currently holding the session (readers attached or requests being answered). */
  get leaseCount(): number {
    return this.leases;
  }

  /** Since when no request holds the session (ms since the epoch); null while one does. */
  get idleSince(): number | null {
    return this.idleSinceMs;
  }

  /** True once destroy() started: the cache file is gone or going. */
  get isDestroyed(): boolean {
    return this.destroying !== null;
  }

  /**
   * Takes a lease: an access that keeps the session alive until released. The idle window
   * restarts when the last lease is released. Returns the (idempotent) release function.
   */
  acquire(): () => void {
    if (this.destroying !== null) throw new Error('stream session is destroyed');
    this.leases++;
    this.idleSinceMs = null;
    this.clearIdleTimer();
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.leases--;
      if (this.leases > 0) return;
      this.idleSinceMs = Date.now();
      if (this.retired) void this.destroy();
      else this.armIdleTimer();
    };
  }

  /** The owner no longer hands the session out: destroy it now, or when the last lease goes. */
  retire(): void {
    this.retired = true;
    this.clearIdleTimer();
    if (this.leases === 0) void this.destroy();
  }

  /** Stops the pipeline and deletes the cache file; readers still attached error out. Idempotent. */
  destroy(): Promise<void> {
    this.destroying ??= (async () => {
      this.retired = true;
      this.clearIdleTimer();
      this.controller.abort(new Error('stream session closed'));
      await this.cache.destroy().catch(() => undefined); // best effort: the file is ours alone
      await this.pipelineDone;
    })();
    return this.destroying;
  }

  private async run(source: SessionSource): Promise<void> {
    // Start on a later tick, so that even a synchronous failure reaches an owner that already holds the session.
    await Promise.resolve();
    try {
      const build = await source(this.controller.signal);
      this.resolveEtag(build.etag);
      for await (const chunk of build.bytes) await this.cache.append(chunk);
      await this.cache.finish();
    } catch (err) {
      const error = toError(err);
      this.rejectEtag(error);
      this.cache.fail(error);
      if (this.destroying === null) this.hooks.onFailed(this, error);
    } finally {
      // Releases whatever the pipeline still holds (piece readers opened with this signal).
      this.controller.abort(new Error('stream pipeline ended'));
    }
  }

  private armIdleTimer(): void {
    this.clearIdleTimer();
    if (this.retired || this.leases > 0) return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      if (this.leases === 0 && this.destroying === null) this.hooks.onIdle(this);
    }, this.idleReclaimMs);
    // An idle session must not keep the process alive.
    this.idleTimer.unref();
  }

  private clearIdleTimer(): void {
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }
}
