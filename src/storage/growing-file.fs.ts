/**
 * GrowingFile backed by one append-only file plus a bounded in-memory tail of its newest bytes:
 * the producer awaits each write (disk back-pressure), then the chunk joins the tail that every
 * reader shares. A reader inside the tail gets zero-copy views of it (no descriptor, no read). The
 * readers behind the tail share one read descriptor per cache (opened on first need, closed when
 * none of them needs it any more) and one small map of file blocks: readers at the same block at
 * about the same time (they all start at byte 0) cause one positional read and get zero-copy views
 * of its buffer. Memory stays flat however many readers there are and however slowly they consume:
 * the tail and the block map are bounded and one per cache, and a slow reader falls off the tail
 * onto the file instead of pinning it.
 */
import { open, unlink, type FileHandle } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { Readable } from 'node:stream';
import { OWNER_FILE_MODE } from '../common/owner-only.js';
import { MAX_TAIL_SLAB_SIZE, MemoryTail } from './memory-tail.js';
import type { GrowingFile, GrowingFileFolder, ReadPace } from './growing-file.js';
import { runCacheDir } from './run-dir.fs.js';

/** Where a growing file lives: a directory and a file name unique in it. */
export interface GrowingFileLocation {
  dir: string;
  name: string;
}

/**
 * Size of one file read, of a shared file block (blocks are aligned on multiples of it) and of a
 * reader's buffer: the most a reader holds in memory at a time.
 */
export const READ_CHUNK_SIZE = MAX_TAIL_SLAB_SIZE;

/**
 * Default in-memory tail per cache: 2 MiB, about 52 s of 320 kbps MP3 (24 s of 44.1 kHz mono PCM).
 * Live listeners sit within a few socket buffers of the edge, far inside it.
 */
export const DEFAULT_TAIL_BYTES = 2 * 1024 * 1024;

/**
 * Default budget of the shared file blocks per cache: 1 MiB (16 blocks). Readers that read the file
 * at about the same time (a crowd joining at byte 0 moves in lockstep) share every read. The map is
 * held only while some reader reads the file, but then even if that reader is paused, so it is
 * kept small (test/stream.backpressure.http.test.ts allows a slow listener less than 4 MiB).
 */
export const DEFAULT_SHARED_BLOCK_BYTES = 1024 * 1024;

/** Tuning of one FsGrowingFile. */
export interface FsGrowingFileOptions {
  /** Byte budget of the shared in-memory tail (default DEFAULT_TAIL_BYTES); 0 = every read from the file. */
  tailBytes?: number;
  /**
   * How readers behind the tail read the file: 'shared' (default) = one descriptor per cache and
   * shared block reads; 'per-reader' = each reader opens its own descriptor and reads for itself
   * (the path before shared reads, kept selectable for benchmarks).
   */
  fileReads?: 'shared' | 'per-reader';
  /** Byte budget of the shared file blocks (default DEFAULT_SHARED_BLOCK_BYTES); 0 = shared descriptor, unshared reads. */
  sharedBlockBytes?: number;
}

/**
 * One reader's access to the cache file while it is behind the tail: a lease on the cache's shared
 * descriptor and blocks, or (per-reader mode) a descriptor of its own.
 */
interface FileReads {
  /**
   * Bytes from `position` (< `fileEnd`, the bytes written so far) to at most `limit` and the end
   * of one block. The buffer may be shared with other readers: read-only.
   */
  read(position: number, fileEnd: number, limit: number): Promise<Buffer>;
  /** Gives the access up; resolves once no descriptor is held for it any more. */
  release(): Promise<void>;
}

/** A block of the file read once for every reader that needs it while it is remembered. */
interface SharedBlock {
  /** File offset after the block's last byte (the block was read up to the bytes written then). */
  readonly end: number;
  /** Bytes held for it: `end` minus the block's start. */
  readonly size: number;
  readonly bytes: Promise<Buffer>;
}

function toError(value: unknown): Error {
  return value instanceof Error ? value : new Error(String(value));
}

function abortError(signal: AbortSignal): Error {
  return signal.reason instanceof Error
    ? signal.reason
    : new Error('The operation was aborted', { cause: signal.reason });
}

function destroyedError(): Error {
  return new Error('session cache was destroyed');
}

/** Reads `[start, end)` of the file into a new buffer; the bytes exist (they were written before `produced` grew). */
async function readExactly(
  handle: FileHandle,
  start: number,
  end: number,
  onRead: () => void,
): Promise<Buffer> {
  const buffer = Buffer.allocUnsafeSlow(end - start);
  let filled = 0;
  while (filled < buffer.byteLength) {
    onRead();
    const { bytesRead } = await handle.read(buffer, filled, buffer.byteLength - filled, start + filled);
    if (bytesRead === 0) throw new Error('session cache file is shorter than its produced size');
    filled += bytesRead;
  }
  return buffer;
}

/**
 * The read side of one cache file shared by all readers behind the tail: one descriptor, opened
 * on the first read and closed when the last lease is given up (or the cache is destroyed), and
 * an LRU map of aligned blocks (in flight or read), bounded by a byte budget. A reader that needs
 * a block the map holds (up to its position) joins that read instead of issuing its own. Evicting
 * a block only forgets it: readers still holding views of its buffer keep that alive, never the map.
 */
class SharedFileBlocks {
  private handle: Promise<FileHandle> | null = null;
  /** The last close of the descriptor; the next open waits for it, so at most one is open. */
  private closing: Promise<void> = Promise.resolve();
  private leases = 0;
  /** Block index → block, least recently used first. */
  private readonly blocks = new Map<number, SharedBlock>();
  private blockBytes = 0;

  constructor(
    private readonly openFile: () => Promise<FileHandle>,
    private readonly budgetBytes: number,
    private readonly onRead: () => void,
  ) {
    if (!Number.isSafeInteger(budgetBytes) || budgetBytes < 0)
      throw new RangeError('shared block budget must be a non-negative integer');
  }

  /** Bytes of blocks remembered now (at most the budget). */
  get heldBytes(): number {
    return this.blockBytes;
  }

  /** Access for one reader; the descriptor is opened by the first read that needs it. */
  lease(): FileReads {
    this.leases++;
    let released = false;
    return {
      read: (position, fileEnd, limit) => this.read(position, fileEnd, limit),
      release: () => {
        if (released) return this.closing;
        released = true;
        this.leases--;
        return this.leases === 0 ? this.close() : Promise.resolve();
      },
    };
  }

  private async read(position: number, fileEnd: number, limit: number): Promise<Buffer> {
    const index = Math.floor(position / READ_CHUNK_SIZE);
    const start = index * READ_CHUNK_SIZE;
    let block = this.blocks.get(index);
    if (block !== undefined && position < block.end) {
      this.blocks.delete(index); // most recently used goes last
      this.blocks.set(index, block);
    } else {
      // Not remembered, or remembered while the file ended before `position`: read it (again).
      const end = Math.min(start + READ_CHUNK_SIZE, fileEnd);
      const bytes = this.descriptor().then((handle) => readExactly(handle, start, end, this.onRead));
      const fresh: SharedBlock = { end, size: end - start, bytes };
      this.remember(index, fresh);
      bytes.catch(() => {
        if (this.blocks.get(index) === fresh) this.forget(index, fresh);
      });
      block = fresh;
    }
    const stop = Math.min(limit, block.end);
    return (await block.bytes).subarray(position - start, stop - start);
  }

  private remember(index: number, block: SharedBlock): void {
    const previous = this.blocks.get(index);
    if (previous !== undefined) this.forget(index, previous);
    if (block.size > this.budgetBytes) return;
    this.blocks.set(index, block);
    this.blockBytes += block.size;
    for (const [oldest, old] of this.blocks) {
      if (this.blockBytes <= this.budgetBytes) break;
      this.forget(oldest, old);
    }
  }

  private forget(index: number, block: SharedBlock): void {
    this.blocks.delete(index);
    this.blockBytes -= block.size;
  }

  private descriptor(): Promise<FileHandle> {
    if (this.handle === null) {
      const opening = this.closing.then(() => this.openFile());
      this.handle = opening;
      opening.catch(() => {
        if (this.handle === opening) this.handle = null; // a later read may try again
      });
    }
    return this.handle;
  }

  /** Forgets every block and closes the descriptor (after its in-flight reads: FileHandle.close waits for them). */
  close(): Promise<void> {
    this.blocks.clear();
    this.blockBytes = 0;
    const handle = this.handle;
    if (handle !== null) {
      this.handle = null;
      this.closing = handle.then(
        (opened) => opened.close().catch(() => undefined),
        () => undefined,
      );
    }
    return this.closing;
  }
}

/** Per-reader mode: the reader's own descriptor, opened on its first read (after `after`, its previous one's close). */
class OwnFileReads implements FileReads {
  private handle: Promise<FileHandle> | null = null;

  constructor(
    private readonly cache: FsGrowingFile,
    private readonly after: Promise<void>,
  ) {}

  async read(position: number, fileEnd: number, limit: number): Promise<Buffer> {
    this.handle ??= this.after.then(() => this.cache.openForRead());
    const handle = await this.handle;
    const want = Math.min(READ_CHUNK_SIZE, Math.min(fileEnd, limit) - position);
    const buffer = Buffer.allocUnsafe(want);
    this.cache.countFileRead();
    const { bytesRead } = await handle.read(buffer, 0, want, position);
    if (bytesRead === 0) throw new Error('session cache file is shorter than its produced size');
    return bytesRead === want ? buffer : buffer.subarray(0, bytesRead);
  }

  release(): Promise<void> {
    const handle = this.handle;
    this.handle = null;
    if (handle === null) return this.after;
    // FileHandle.close waits for an in-flight read before closing the descriptor.
    return handle.then(
      (opened) => opened.close().catch(() => undefined),
      () => undefined,
    );
  }
}

function checkByteOffset(name: string, value: number): void {
  if (!Number.isSafeInteger(value) || value < 0)
    throw new RangeError(`${name} must be a non-negative integer`);
}

/** File-backed GrowingFile; the file is created (exclusively) at construction and deleted by `destroy()`. */
export class FsGrowingFile implements GrowingFile {
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
  /** The shared read descriptor and blocks; null in per-reader mode. */
  private readonly sharedBlocks: SharedFileBlocks | null;
  private fileReads = 0;

  /** Creates the backing file `dir/name` (`name` must be unique to this session build: it is opened with `wx`). */
  constructor(location: GrowingFileLocation, options: FsGrowingFileOptions = {}) {
    const { dir, name } = location;
    if (name === '' || name === '.' || name === '..' || basename(name) !== name || name.includes('\0')) {
      throw new TypeError(`session cache name must be a plain file name, got ${JSON.stringify(name)}`);
    }
    this.path = join(dir, name);
    this.memoryTail = new MemoryTail(options.tailBytes ?? DEFAULT_TAIL_BYTES);
    this.sharedBlocks =
      options.fileReads === 'per-reader'
        ? null
        : new SharedFileBlocks(
            () => this.openForRead(),
            options.sharedBlockBytes ?? DEFAULT_SHARED_BLOCK_BYTES,
            () => this.countFileRead(),
          );
    this.opened = open(this.path, 'wx', OWNER_FILE_MODE);
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
  /** Positional reads issued on the file so far, by all readers: shows how well reads are shared (tests, benchmarks). */
  get fileReadCount(): number {
    return this.fileReads;
  }
  /** Bytes of file blocks the shared block map holds now (at most its budget; 0 while no reader reads the file). */
  get sharedBlockHeldBytes(): number {
    return this.sharedBlocks?.heldBytes ?? 0;
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
    await this.sharedBlocks?.close();
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

  createReadStream(
    start: number,
    endExclusive: number | null,
    signal?: AbortSignal,
    pace?: ReadPace,
  ): Readable {
    checkByteOffset('start', start);
    if (endExclusive !== null) {
      checkByteOffset('endExclusive', endExclusive);
      if (endExclusive < start) throw new RangeError('endExclusive must not be before start');
    }
    return new CacheReader(this, start, endExclusive, signal, pace);
  }

  /** Opens a read descriptor on the backing file (after it exists). */
  async openForRead(): Promise<FileHandle> {
    if (this.destroyed) throw destroyedError();
    await this.opened;
    if (this.destroyed) throw destroyedError();
    return open(this.path, 'r');
  }

  /** File access for a reader behind the tail (CacheReader); `after` is when its previous access closed. */
  openFileReads(after: Promise<void>): FileReads {
    return this.sharedBlocks?.lease() ?? new OwnFileReads(this, after);
  }

  /** Counts one positional read of the file (fileReadCount). */
  countFileRead(): void {
    this.fileReads++;
  }
}

/**
 * A pull-driven reader of one FsGrowingFile window: `_read` pushes at most one chunk and only when
 * the consumer asks, so a slow consumer stops the reads instead of growing memory. A chunk is a
 * shared, read-only view of the cache's tail when the position is in it, else one block of the file
 * (shared with the other readers behind the tail, or its own read in per-reader mode) through file
 * access taken on first need and given up again when the reader waits at the live edge.
 */
class CacheReader extends Readable {
  /** File access while behind the tail, else null. */
  private file: FileReads | null = null;
  /** Resolves once the file access this reader gave up holds no descriptor; destroy waits for it. */
  private released: Promise<void> = Promise.resolve();
  private position: number;
  /** Cancels an in-progress waitFor when the stream is destroyed. */
  private readonly stop = new AbortController();
  private readonly onAbort: () => void;

  constructor(
    private readonly cache: FsGrowingFile,
    start: number,
    private readonly endExclusive: number | null,
    private readonly signal: AbortSignal | undefined,
    private readonly pace: ReadPace | undefined,
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
        if (cache.isDestroyed) throw destroyedError();
        const limit = Math.min(this.endExclusive ?? Infinity, cache.size ?? Infinity);
        if (this.position >= limit) {
          this.push(null);
          return;
        }
        let available = Math.min(cache.produced, limit);
        if (this.position < available && this.pace !== undefined) {
          // Paced: only what the pace grants now goes out (cut views, never copies); with nothing
          // granted the reader waits for the pace, holding its place in the file.
          const granted = this.pace.grant(available - this.position);
          if (granted <= 0) {
            await this.pace.ready(this.stop.signal);
            continue;
          }
          available = Math.min(available, this.position + granted);
        }
        if (this.position < available) {
          const view = cache.viewInTail(this.position, available);
          if (view !== null) {
            this.position += view.byteLength;
            this.pace?.take(view.byteLength);
            this.push(view);
            return;
          }
          // Behind the tail: the file (the page cache, for recently written bytes).
          this.file ??= cache.openFileReads(this.released);
          const chunk = await this.file
            .read(this.position, cache.produced, available)
            .catch((err: unknown) => {
              // A destroyed cache closes the descriptor under in-flight reads: report the destroy.
              throw cache.isDestroyed ? destroyedError() : err;
            });
          if (this.destroyed) return;
          // An empty chunk would make the stream ask again at once, forever: a bug, so fail loudly.
          if (chunk.byteLength === 0) throw new Error('session cache file read returned no bytes');
          this.position += chunk.byteLength;
          this.pace?.take(chunk.byteLength);
          this.push(chunk);
          return;
        }
        // Nothing left to read: a failed session ends here with its error (truncation, not a clean end).
        const failure = cache.error;
        if (failure !== null) throw failure;
        // At the live edge the next bytes will be in the tail: hold no file access while waiting.
        if (cache.keepsTail) this.releaseFile();
        await cache.waitFor(this.position + 1, this.stop.signal);
      }
    } catch (err) {
      if (!this.destroyed) this.destroy(toError(err));
    }
  }

  private releaseFile(): void {
    const file = this.file;
    if (file === null) return;
    this.file = null;
    this.released = Promise.all([this.released, file.release()]).then(() => undefined);
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    this.stop.abort();
    this.pace?.close();
    this.signal?.removeEventListener('abort', this.onAbort);
    this.cache.detachReader();
    // The close event waits until this reader holds no descriptor (the last lease closes the shared one).
    this.releaseFile();
    this.released.then(
      () => callback(error),
      () => callback(error),
    );
  }
}

/**
 * The growing files of one process under `root`: a run directory of its own (`run-<pid>-<random>`),
 * made on first use and deleted by remove(); run directories of processes that are gone are swept
 * when the next one is made.
 */
export function runGrowingFileFolder(root: string, options: FsGrowingFileOptions = {}): GrowingFileFolder {
  const run = runCacheDir(root);
  let dir: string | undefined;
  return {
    ready: async () => {
      dir = await run.ready();
    },
    create: (name) => {
      if (dir === undefined) throw new Error('growing file folder is not ready');
      return new FsGrowingFile({ dir, name }, options);
    },
    remove: () => run.remove(),
  };
}
