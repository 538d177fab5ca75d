/**
 * SessionCache backed by one append-only file plus a bounded in-memory tail of its newest bytes:
 * the producer awaits each write (disk back-pressure), then the chunk joins the tail that every
 * reader shares. A reader inside the tail gets zero-copy views of it (no descriptor, no read); a
 * reader behind the tail opens its own descriptor lazily and reads the file (the OS page cache) in
 * bounded chunks. Memory stays flat however many readers there are and however slowly they consume:
 * the tail is one per cache, and a slow reader falls off it onto the file instead of pinning it.
 */
import { open, unlink, type FileHandle } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { Readable } from 'node:stream';
import { MAX_TAIL_SLAB_SIZE, MemoryTail } from './memory-tail.js';
import type { SessionCache, SessionCacheLocation } from './session-cache.js';

/** Size of one file read and of a reader's buffer: the most a reader holds in memory at a time. */
export const READ_CHUNK_SIZE = MAX_TAIL_SLAB_SIZE;

/**
 * Default in-memory tail per cache: 2 MiB, about 52 s of 320 kbps MP3 (24 s of 44.1 kHz mono PCM).
 * Live listeners sit within a few socket buffers of the edge, far inside it.
 */
export const DEFAULT_TAIL_BYTES = 2 * 1024 * 1024;

/** Tuning of one FsSessionCache. */
export interface FsSessionCacheOptions {
  /** Byte budget of the shared in-memory tail (default DEFAULT_TAIL_BYTES); 0 = every read from the file. */
  tailBytes?: number;
}

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
  private appendQueue: Promise<void> = Promise.resolve();
  /** The newest written bytes, shared by all readers; its `end` is always `produced`. */
  private readonly memoryTail: MemoryTail;
  /** Readers created and not yet destroyed: a settled cache keeps its tail only while some remain. */
  private attachedReaders = 0;
  /** Wake-up callbacks of waitFor; each re-checks its own condition (no timers, no polling). */
  private readonly waiters = new Set<() => void>();

  /** Creates the backing file `dir/name` (`name` must be unique to this session build: it is opened with `wx`). */
  constructor(location: SessionCacheLocation, options: FsSessionCacheOptions = {}) {
    const { dir, name } = location;
    if (name === '' || name === '.' || name === '..' || basename(name) !== name || name.includes('\0')) {
      throw new TypeError(`session cache name must be a plain file name, got ${JSON.stringify(name)}`);
    }
    this.path = join(dir, name);
    this.memoryTail = new MemoryTail(options.tailBytes ?? DEFAULT_TAIL_BYTES);
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
  /** First offset served from memory (`produced` when the tail holds nothing): readers before it read the file. */
  get tailStart(): number {
    return this.memoryTail.start;
  }
  /** Bytes of memory the shared tail holds now (at most the tail budget). */
  get tailHeldBytes(): number {
    return this.memoryTail.heldBytes;
  }
  /** True when a tail is kept at all (budget above 0); readers then need no descriptor at the live edge. */
  get keepsTail(): boolean {
    return this.memoryTail.budgetBytes > 0;
  }

  append(chunk: Uint8Array): Promise<void> {
    const refused = this.writeRefusal();
    if (refused !== null) return Promise.reject(refused);
    const job = this.appendQueue.then(() => this.write(chunk));
    this.appendQueue = job.catch(() => undefined);
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
    // Written: from now on readers may see it, served from memory while it stays in the tail.
    this.memoryTail.append(chunk);
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
    await this.appendQueue;
    this.throwIfFailed();
    try {
      await this.closeWriter();
    } catch (err) {
      this.fail(toError(err));
    }
    this.throwIfFailed(); // a close error, or fail() while the descriptor closed
    this.finalSize = this.producedBytes;
    this.notify();
    this.releaseTailIfUnread();
  }

  fail(err: Error): void {
    if (this.failure !== null || this.finalSize !== null) return;
    this.failure = err;
    this.notify();
    this.releaseTailIfUnread();
    this.closeWriter().catch(() => undefined); // the session already failed; a close error adds nothing
  }

  async destroy(): Promise<void> {
    if (this.destroyed) return;
    this.destroyed = true;
    if (this.finalSize === null && this.failure === null)
      this.failure = new Error('session cache was destroyed');
    this.notify();
    this.memoryTail.clear();
    await this.appendQueue;
    this.memoryTail.clear();
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

  /** A finished or failed cache no longer grows: its tail is only worth its memory while readers remain. */
  private releaseTailIfUnread(): void {
    if (this.attachedReaders === 0 && (this.finalSize !== null || this.failure !== null))
      this.memoryTail.clear();
  }

  /** Counts a reader (CacheReader's constructor). */
  attachReader(): void {
    this.attachedReaders++;
  }

  /** Uncounts a reader (CacheReader's destroy); the last one leaving a settled cache frees the tail. */
  detachReader(): void {
    this.attachedReaders--;
    this.releaseTailIfUnread();
  }

  /** Zero-copy view of written bytes from `position` (at most to `limit` and one slab), or null when not in the tail. */
  viewInTail(position: number, limit: number): Buffer | null {
    return this.memoryTail.view(position, limit);
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
 * A pull-driven reader of one FsSessionCache window: `_read` pushes at most one chunk and only when
 * the consumer asks, so a slow consumer stops the reads instead of growing memory. A chunk is a
 * shared, read-only view of the cache's tail when the position is in it, else one file read through
 * a descriptor opened on first need and closed again when the reader waits at the live edge.
 */
class CacheReader extends Readable {
  private handle: FileHandle | null = null;
  /** A descriptor being opened; destroy waits for it, then closes it. */
  private handleOpening: Promise<unknown> = Promise.resolve();
  /** A descriptor being closed; destroy waits for it so none outlives the stream. */
  private handleClosing: Promise<void> = Promise.resolve();
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
    cache.attachReader();
    this.onAbort = () => this.destroy(abortError(signal as AbortSignal));
    if (signal?.aborted === true) this.destroy(abortError(signal));
    else signal?.addEventListener('abort', this.onAbort, { once: true });
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
          const view = cache.viewInTail(this.position, available);
          if (view !== null) {
            this.position += view.byteLength;
            this.push(view);
            return;
          }
          // Behind the tail: the file (the page cache, for recently written bytes).
          const handle = this.handle ?? (await this.openHandle());
          if (this.destroyed) return;
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
        // At the live edge the next bytes will be in the tail: hold no descriptor while waiting.
        if (cache.keepsTail) this.closeHandle();
        await cache.waitFor(this.position + 1, this.stop.signal);
      }
    } catch (err) {
      if (!this.destroyed) this.destroy(toError(err));
    }
  }

  /** Opens this reader's descriptor; if the stream is destroyed meanwhile, _destroy closes it. */
  private openHandle(): Promise<FileHandle> {
    const opening = this.handleClosing
      .then(() => this.cache.openForRead())
      .then((handle) => {
        this.handle = handle;
        return handle;
      });
    this.handleOpening = opening.catch(() => undefined);
    return opening;
  }

  private closeHandle(): void {
    const handle = this.handle;
    if (handle === null) return;
    this.handle = null;
    // FileHandle.close waits for an in-flight read before closing the descriptor.
    const closing = this.handleClosing.then(() => handle.close());
    this.handleClosing = closing.catch(() => undefined);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.stop.abort();
    this.signal?.removeEventListener('abort', this.onAbort);
    this.cache.detachReader();
    // The close event waits until this reader holds no descriptor (one may be opening right now).
    this.handleOpening
      .then(() => {
        this.closeHandle();
        return this.handleClosing;
      })
      .then(
        () => callback(error),
        () => callback(error),
      );
  }
}
