/**
 * SessionCache backed by one append-only file: the producer awaits each write (disk back-pressure),
 * readers open their own descriptor and read the file in bounded chunks, so memory stays flat
 * however many readers there are and however slowly they consume.
 */
import { open, unlink, type FileHandle } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { Readable } from 'node:stream';
import type { SessionCache, SessionCacheLocation } from './session-cache.js';

/** Size of one file read and of a reader's buffer: the most a reader holds in memory at a time. */
export const READ_CHUNK_SIZE = 64 * 1024;

function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error
    ? signal.reason
    : new Error('The operation was aborted', { cause: signal.reason });
}

function checkByteOffset(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0)
    throw new RangeError(`${name} must be a non-negative integer`);
}

/** File-backed SessionCache; the file is created (exclusively) at construction and deleted by `destroy()`. */
export class FsSessionCache implements SessionCache {
  /** Absolute path of the backing file. */
  readonly path: string;
  private producedBytes = 0;
  private finalSize: number | null = null;
  private failure: Error | null = null;
  private destroyed = false;
  /** Set by finish(): no more appends are accepted from then on. */
  private closing = false;
  private finishing: Promise<void> | null = null;
  private readonly opened: Promise<FileHandle>;
  private writerClosed: Promise<void> | null = null;
  /** Serialises appends so `produced` always grows over a gap-free prefix of the file. */
  private tail: Promise<void> = Promise.resolve();
  /** Wake-up callbacks of waitFor; each re-checks its own condition (no timers, no polling). */
  private readonly waiters = new Set<() => void>();

  /** Creates the backing file `dir/name` (`name` must be unique to this session build: it is opened with `wx`). */
  constructor(location: SessionCacheLocation) {
    const { dir, name } = location;
    if (name === '' || name === '.' || name === '..' || basename(name) !== name || name.includes('\0')) {
      throw new TypeError(`session cache name must be a plain file name, got ${JSON.stringify(name)}`);
    }
    this.path = join(dir, name);
    this.opened = open(this.path, 'wx');
    // A failed open fails the cache; appends and readers then report that error.
    this.opened.catch((err: unknown) => this.fail(toError(err)));
  }

  get produced(): number {
    return this.producedBytes;
  }
  get finished(): boolean {
    return this.finalSize !== null;
  }
  get failed(): boolean {
    return this.failure !== null;
  }
  get error(): Error | null {
    return this.failure;
  }
  get size(): number | null {
    return this.finalSize;
  }
  /** True once destroy() was called; readers error out from then on. */
  get isDestroyed(): boolean {
    return this.destroyed;
  }

  append(chunk: Uint8Array): Promise<void> {
    const refused = this.writeRefusal();
    if (refused !== null) return Promise.reject(refused);
    const job = this.tail.then(() => this.write(chunk));
    this.tail = job.catch(() => undefined);
    return job;
  }

  private writeRefusal(): Error | null {
    if (this.failure !== null) return this.failure;
    if (this.destroyed) return new Error('session cache was destroyed');
    if (this.closing) return new Error('session cache is finished; append refused');
    return null;
  }

  private throwIfFailed(): void {
    if (this.failure !== null) throw this.failure;
  }

  private async write(chunk: Uint8Array): Promise<void> {
    const handle = await this.opened;
    let offset = 0;
    while (offset < chunk.byteLength) {
      this.throwIfFailed();
      const { bytesWritten } = await handle.write(
        chunk,
        offset,
        chunk.byteLength - offset,
        this.producedBytes + offset,
      );
      offset += bytesWritten;
    }
    this.throwIfFailed();
    this.producedBytes += chunk.byteLength;
    this.notify();
  }

  finish(): Promise<void> {
    if (this.finishing === null) {
      const refused = this.writeRefusal();
      if (refused !== null) return Promise.reject(refused);
      this.closing = true;
      this.finishing = this.completeFinish();
    }
    return this.finishing;
  }

  private async completeFinish(): Promise<void> {
    await this.tail;
    this.throwIfFailed();
    try {
      await this.closeWriter();
    } catch (err) {
      this.fail(toError(err));
    }
    this.throwIfFailed(); // a close error, or fail() while the descriptor closed
    this.finalSize = this.producedBytes;
    this.notify();
  }

  fail(err: Error): void {
    if (this.failure !== null || this.finalSize !== null) return;
    this.failure = err;
    this.notify();
    this.closeWriter().catch(() => undefined); // the session already failed; a close error adds nothing
  }

  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    if (this.finalSize === null && this.failure === null)
      this.failure = new Error('session cache was destroyed');
    this.notify();
    await this.tail;
    await this.closeWriter().catch(() => undefined);
    // Only the cache that created the file deletes it (a failed `wx` open means it is someone else's).
    const created = await this.opened.then(
      () => true,
      () => false,
    );
    if (!created) return;
    try {
      await unlink(this.path);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw toError(err);
    }
  }

  /** Closes the write descriptor once; FileHandle.close waits for in-flight writes. */
  private closeWriter(): Promise<void> {
    this.writerClosed ??= this.opened.then(
      (handle) => handle.close(),
      () => undefined,
    );
    return this.writerClosed;
  }

  private notify(): void {
    for (const wake of [...this.waiters]) wake();
  }

  private settled(byteCount: number): boolean {
    return (
      this.producedBytes >= byteCount || this.finalSize !== null || this.failure !== null || this.destroyed
    );
  }

  waitFor(byteCount: number, signal?: AbortSignal): Promise<void> {
    if (this.settled(byteCount)) return Promise.resolve();
    if (signal?.aborted === true) return Promise.reject(abortError(signal));
    return new Promise<void>((resolve, reject) => {
      const cleanup = (): void => {
        this.waiters.delete(wake);
        signal?.removeEventListener('abort', onAbort);
      };
      const wake = (): void => {
        if (!this.settled(byteCount)) return;
        cleanup();
        resolve();
      };
      const onAbort = (): void => {
        cleanup();
        reject(abortError(signal as AbortSignal));
      };
      this.waiters.add(wake);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  createReadStream(start: number, endExclusive: number | null, signal?: AbortSignal): Readable {
    checkByteOffset('start', start);
    if (endExclusive !== null) {
      checkByteOffset('endExclusive', endExclusive);
      if (endExclusive < start) throw new RangeError('endExclusive must not be before start');
    }
    return new CacheReader(this, start, endExclusive, signal);
  }

  /** Opens a read descriptor on the backing file (after it exists). */
  async openForRead(): Promise<FileHandle> {
    if (this.destroyed) throw new Error('session cache was destroyed');
    await this.opened;
    return open(this.path, 'r');
  }
}

/**
 * A pull-driven reader of one FsSessionCache window: `_read` reads at most one chunk from the file
 * and only when the consumer asks, so a slow consumer stops the reads instead of growing memory.
 */
class CacheReader extends Readable {
  private handle: FileHandle | null = null;
  private position: number;
  /** Cancels an in-progress waitFor when the stream is destroyed. */
  private readonly stop = new AbortController();
  private readonly onAbort: () => void;

  constructor(
    private readonly cache: FsSessionCache,
    start: number,
    private readonly endExclusive: number | null,
    private readonly signal: AbortSignal | undefined,
  ) {
    super({ highWaterMark: READ_CHUNK_SIZE });
    this.position = start;
    this.onAbort = () => this.destroy(abortError(signal as AbortSignal));
    if (signal?.aborted === true) this.destroy(abortError(signal));
    else signal?.addEventListener('abort', this.onAbort, { once: true });
  }

  override _construct(callback: (error?: Error | null) => void): void {
    this.cache.openForRead().then(
      (handle) => {
        this.handle = handle;
        callback();
      },
      (err: unknown) => callback(toError(err)),
    );
  }

  override _read(): void {
    void this.pump();
  }

  /** Pushes exactly one chunk, or the end, or destroys with an error — waiting for appends if needed. */
  private async pump(): Promise<void> {
    try {
      for (;;) {
        if (this.destroyed) return;
        const cache = this.cache;
        if (cache.isDestroyed) throw new Error('session cache was destroyed');
        const limit = Math.min(this.endExclusive ?? Infinity, cache.size ?? Infinity);
        if (this.position >= limit) {
          this.push(null);
          return;
        }
        const available = Math.min(cache.produced, limit);
        if (this.position < available) {
          const handle = this.handle;
          if (handle === null) throw new Error('session cache reader is not open');
          const want = Math.min(READ_CHUNK_SIZE, available - this.position);
          const buffer = Buffer.allocUnsafe(want);
          const { bytesRead } = await handle.read(buffer, 0, want, this.position);
          if (this.destroyed) return;
          if (bytesRead === 0) throw new Error('session cache file is shorter than its produced size');
          this.position += bytesRead;
          this.push(bytesRead === want ? buffer : buffer.subarray(0, bytesRead));
          return;
        }
        // Nothing left to read: a failed session ends here with its error (truncation, not a clean end).
        const failure = cache.error;
        if (failure !== null) throw failure;
        await cache.waitFor(this.position + 1, this.stop.signal);
      }
    } catch (err) {
      if (!this.destroyed) this.destroy(toError(err));
    }
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.stop.abort();
    this.signal?.removeEventListener('abort', this.onAbort);
    const handle = this.handle;
    this.handle = null;
    if (handle === null) {
      callback(error);
      return;
    }
    // FileHandle.close waits for an in-flight read before closing the descriptor.
    handle.close().then(
      () => callback(error),
      (closeErr: unknown) => callback(error ?? toError(closeErr)),
    );
  }
}
