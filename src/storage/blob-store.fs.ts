/** BlobStore on the local file system under a root folder (DATA_DIR/blobs by default). */
import { randomUUID } from 'node:crypto';
import { constants, createReadStream, createWriteStream } from 'node:fs';
import { access, mkdir, readdir, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { basename, dirname, join, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
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

/** The embedded BlobStore: one file per key under `root`, written to a temporary name then renamed. */
export class FsBlobStore implements BlobStore {
  private readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
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
    const tmp = join(dirname(path), `${TMP_PREFIX}${randomUUID()}`);
    try {
      await mkdir(dirname(path), { recursive: true });
      if (body instanceof Uint8Array) await writeFile(tmp, body);
      else await pipeline(body, createWriteStream(tmp));
      await rename(tmp, path);
    } catch (err) {
      if (!(body instanceof Uint8Array)) body.destroy();
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
    try {
      const s = await stat(this.pathOf(key));
      if (!s.isFile()) return undefined;
      return {
        size: s.size,
        modifiedAt: s.mtime,
        etag: `"${s.size.toString(16)}-${Math.floor(s.mtimeMs).toString(16)}-${s.ino.toString(16)}"`,
      };
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
      throw err;
    }
  }

  read(key: string, range?: { start: number; end: number }): Readable {
    const path = this.pathOf(key);
    if (range) assertBlobRange(range);
    if (range && range.end < range.start) return Readable.from([]);
    return createReadStream(path, range ? { start: range.start, end: range.end } : {});
  }

  async delete(key: string): Promise<void> {
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
    if (found?.isDirectory()) await rm(path, { recursive: true, force: true });
  }
}
