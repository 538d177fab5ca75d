/**
 * BlobStore on the local file system under a root folder (DATA_DIR/blobs by default). Blobs are
 * written once under a key (a put renames a new file over it), so the descriptors and metadata of
 * recently read blobs are kept open in a bounded cache: a Range request of a finished file then
 * costs one positional read, not a stat, an open, a read and a close. Hot blobs
 * are kept in memory by CachedBlobStore in front of this store (src/adapters.ts). Every change
 * through this store forgets the cached entry; this process is the data dir's only writer.
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { constants, createWriteStream, type WriteStream } from 'node:fs';
import {
  access,
  mkdir,
  open,
  readdir,
  rename,
  rm,
  stat,
  unlink,
  writeFile,
  type FileHandle,
} from 'node:fs/promises';
import { basename, dirname, join, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { OWNER_DIR_MODE, OWNER_FILE_MODE } from '../common/owner-only.js';
import {
  assertBlobKey,
  assertBlobPrefix,
  assertBlobRange,
  type BlobInfo,
  type BlobStore,
} from './blob-store.js';
import { storageUnavailable } from './storage-errors.js';

/** Name prefix of a file being written (keys cannot start with a dot, so none is ever a blob). */
const TMP_PREFIX = '.tmp-';

/** Open blob files kept for reuse when no reader holds them (readers may hold more meanwhile). */
export const OPEN_BLOB_FILES = 64;

/** Bytes a blob reader reads at a time. */
const READ_CHUNK_BYTES = 64 * 1024;

/** Options of FsBlobStore's descriptor cache. */
export interface FsBlobStoreOptions {
  /** Open blob files kept for reuse (default OPEN_BLOB_FILES). */
  maxOpenFiles?: number;
}

/** One open blob file: its descriptor, its metadata, and how many readers hold it. */
interface OpenBlob {
  handle: FileHandle;
  info: BlobInfo;
  holders: number;
  /** Forgotten (deleted, replaced or evicted): closed when the last holder lets go. */
  retired: boolean;
}

function infoOf(s: { size: number; mtime: Date; mtimeMs: number; ino: number }): BlobInfo {
  return {
    size: s.size,
    modifiedAt: s.mtime,
    etag: `"${s.size.toString(16)}-${Math.floor(s.mtimeMs).toString(16)}-${s.ino.toString(16)}"`,
  };
}

function isMissing(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  return code === 'ENOENT' || code === 'ENOTDIR' || code === 'EISDIR';
}

/** The embedded BlobStore: one file per key under `root`, written to a temporary name then renamed. */
export class FsBlobStore implements BlobStore {
  private readonly root: string;
  /** Open blobs by key, least recently used first; pending opens are shared. */
  private readonly files = new Map<string, Promise<OpenBlob | undefined>>();

  private readonly maxOpenFiles: number;

  constructor(root: string, options: FsBlobStoreOptions = {}) {
    this.root = resolve(root);
    this.maxOpenFiles = options.maxOpenFiles ?? OPEN_BLOB_FILES;
  }

  /** How many blob files this store holds open (tests: bounded, and none after close). */
  async openFileCount(): Promise<number> {
    const entries = await Promise.all(this.files.values());
    return entries.filter((e) => e !== undefined).length;
  }

  /** Closes every cached descriptor nobody reads (shutdown); readers close theirs when they end. */
  async close(): Promise<void> {
    const keys = [...this.files.keys()];
    await Promise.all(keys.map((key) => this.forget(key)));
  }

  /** The open blob at `key`, held for the caller (release it), or undefined when there is none. */
  private async hold(key: string): Promise<OpenBlob | undefined> {
    for (;;) {
      let pending = this.files.get(key);
      if (pending === undefined) {
        // Only keys that passed pathOf's checks are ever cached.
        const opening = this.openBlob(this.pathOf(key));
        pending = opening;
        this.files.set(key, opening);
        // A missing blob is not remembered: it may be written next.
        void opening.then(
          (entry) => {
            if (entry === undefined && this.files.get(key) === opening) this.files.delete(key);
          },
          () => {
            if (this.files.get(key) === opening) this.files.delete(key);
          },
        );
        this.evictIdle();
      } else {
        // Most recently used last.
        this.files.delete(key);
        this.files.set(key, pending);
      }
      const entry = await pending;
      if (entry === undefined) return undefined;
      // Forgotten while this caller waited (replaced, deleted, evicted): open it again.
      if (entry.retired) continue;
      entry.holders++;
      return entry;
    }
  }

  private async openBlob(path: string): Promise<OpenBlob | undefined> {
    let handle: FileHandle;
    try {
      handle = await open(path, 'r');
    } catch (err) {
      if (isMissing(err)) return undefined;
      throw err;
    }
    try {
      const s = await handle.stat();
      if (!s.isFile()) {
        await handle.close();
        return undefined;
      }
      return { handle, info: infoOf(s), holders: 0, retired: false };
    } catch (err) {
      await handle.close().catch(() => undefined);
      if (isMissing(err)) return undefined;
      throw err;
    }
  }

  private release(entry: OpenBlob): void {
    entry.holders--;
    if (entry.retired && entry.holders === 0) void entry.handle.close().catch(() => undefined);
  }

  /** Forgets the cached entry of `key` (its file changed or is gone); closes it once unread. */
  private async forget(key: string): Promise<void> {
    const pending = this.files.get(key);
    if (pending === undefined) return;
    this.files.delete(key);
    const entry = await pending.catch(() => undefined);
    if (entry === undefined || entry.retired) return;
    entry.retired = true;
    if (entry.holders === 0) await entry.handle.close().catch(() => undefined);
  }

  /** Keeps at most `maxOpenFiles` entries: the least recently used go first. */
  private evictIdle(): void {
    const excess = this.files.size - this.maxOpenFiles;
    if (excess <= 0) return;
    for (const key of [...this.files.keys()].slice(0, excess)) void this.forget(key);
  }

  /**
   * Removes the temporary files of writes that never finished (a process killed mid-put leaves its
   * `.tmp-*` file behind). Call it when this process is the only writer: at start, under the data
   * dir lock. Returns how many were removed.
   */
  async sweepPartialWrites(): Promise<number> {
    const names = await readdir(this.root, { recursive: true }).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT') return [];
      throw err;
    });
    const partial = names.filter((name) => basename(name).startsWith(TMP_PREFIX));
    for (const name of partial) await rm(join(this.root, name), { force: true });
    return partial.length;
  }

  /** Maps a key to a path inside the root; rejects keys that could escape it. */
  private pathOf(key: string): string {
    assertBlobKey(key);
    const path = resolve(this.root, key);
    if (!path.startsWith(this.root + sep)) throw new Error(`invalid blob key: ${key}`);
    return path;
  }

  async put(key: string, body: Readable | Uint8Array, _contentType: string): Promise<BlobInfo> {
    const path = this.pathOf(key);
    await this.forget(key);
    const tmp = join(dirname(path), `${TMP_PREFIX}${randomUUID()}`);
    let file: WriteStream | undefined;
    try {
      await mkdir(dirname(path), { recursive: true, mode: OWNER_DIR_MODE });
      if (body instanceof Uint8Array) await writeFile(tmp, body, { mode: OWNER_FILE_MODE });
      else await pipeline(body, (file = createWriteStream(tmp, { mode: OWNER_FILE_MODE })));
      await rename(tmp, path);
      // A read that opened the old file meanwhile must not stay cached for the new one.
      await this.forget(key);
    } catch (err) {
      if (!(body instanceof Uint8Array)) body.destroy();
      // The pipeline settles on the body's error without waiting for the file's stream, whose
      // opening (which creates the file) may still be under way: removed before that, the file
      // would be created afterwards and stay.
      if (file !== undefined && !file.closed)
        await once(file, 'close', { signal: AbortSignal.timeout(10_000) }).catch(() => undefined);
      // On a read-only disk even this fails (EROFS, not ENOENT): the write's error is the one to report.
      await rm(tmp, { force: true }).catch(() => undefined);
      // A full or read-only disk is 503 STORAGE_UNAVAILABLE, not a 500 (the errno stays the cause).
      // Node's recursive mkdir reports ENOENT on a read-only file system: access(W_OK) says EROFS.
      throw (
        storageUnavailable(err) ??
        storageUnavailable(await access(this.root, constants.W_OK).catch((e: unknown) => e)) ??
        err
      );
    }
    const info = await this.stat(key);
    if (!info) throw new Error(`blob ${key} vanished after write`);
    return info;
  }

  async stat(key: string): Promise<BlobInfo | undefined> {
    const entry = await this.hold(key);
    if (entry === undefined) return undefined;
    this.release(entry);
    return entry.info;
  }

  read(key: string, range?: { start: number; end: number }): Readable {
    if (!this.files.has(key)) this.pathOf(key); // a bad key throws here, as the stream would never open
    if (range) assertBlobRange(range);
    if (range && range.end < range.start) return Readable.from([]);
    return new BlobReader(
      () => this.hold(key),
      (entry) => this.release(entry),
      range,
    );
  }

  async delete(key: string): Promise<void> {
    await this.forget(key);
    await unlink(this.pathOf(key)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT' && err.code !== 'ENOTDIR') throw err;
    });
  }

  async deletePrefix(prefix: string): Promise<void> {
    assertBlobPrefix(prefix);
    const path = this.pathOf(prefix.slice(0, -1));
    // A file named like the folder is a blob whose key does not start with `prefix`: keep it.
    const found = await stat(path).catch((err: NodeJS.ErrnoException) => {
      if (err.code === 'ENOENT' || err.code === 'ENOTDIR') return undefined;
      throw err;
    });
    if (found?.isDirectory()) {
      await Promise.all(
        [...this.files.keys()].filter((k) => k.startsWith(prefix)).map((k) => this.forget(k)),
      );
      await rm(path, { recursive: true, force: true });
    }
  }
}

/**
 * Reads bytes of one blob through its held descriptor with positional reads, one chunk per `_read`
 * (so a slow consumer stops the reads); releases the descriptor at the end or on destroy.
 */
class BlobReader extends Readable {
  private entry: OpenBlob | undefined;
  private position: number;

  constructor(
    private readonly acquire: () => Promise<OpenBlob | undefined>,
    private readonly letGo: (entry: OpenBlob) => void,
    private readonly range: { start: number; end: number } | undefined,
  ) {
    super({ highWaterMark: READ_CHUNK_BYTES });
    this.position = range?.start ?? 0;
  }

  override _construct(callback: (error?: Error | null) => void): void {
    this.acquire().then(
      (entry) => {
        if (entry === undefined) {
          const missing: NodeJS.ErrnoException = new Error('blob not found');
          missing.code = 'ENOENT';
          callback(missing);
          return;
        }
        this.entry = entry;
        callback();
      },
      (err: unknown) => callback(err as Error),
    );
  }

  override _read(): void {
    const entry = this.entry;
    if (entry === undefined) return;
    const end = Math.min(this.range?.end ?? Infinity, entry.info.size - 1);
    const want = Math.min(READ_CHUNK_BYTES, end - this.position + 1);
    if (want <= 0) {
      this.push(null);
      return;
    }
    const buffer = Buffer.allocUnsafe(want);
    entry.handle.read(buffer, 0, want, this.position).then(
      ({ bytesRead }) => {
        if (this.destroyed) return;
        if (bytesRead === 0) {
          this.push(null);
          return;
        }
        this.position += bytesRead;
        this.push(bytesRead === want ? buffer : buffer.subarray(0, bytesRead));
      },
      (err: unknown) => this.destroy(err as Error),
    );
  }

  override _destroy(error: Error | null, callback: (error?: Error | null) => void): void {
    const entry = this.entry;
    this.entry = undefined;
    if (entry !== undefined) this.letGo(entry);
    callback(error);
  }
}
