/** BlobStore on the local file system under a root folder (DATA_DIR/blobs by default). */
import { randomUUID } from 'node:crypto';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rename, rm, stat, unlink, writeFile } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { BlobInfo, BlobStore } from './blob-store.js';

const KEY_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._/-]*$/;

export class FsBlobStore implements BlobStore {
  private readonly root: string;

  constructor(root: string) {
    this.root = resolve(root);
  }

  /** Maps a key to a path inside the root; rejects keys that could escape it. */
  localPath(key: string): string {
    if (!KEY_PATTERN.test(key) || key.split('/').includes('..')) throw new Error(`invalid blob key: ${key}`);
    const path = resolve(this.root, key);
    if (!path.startsWith(this.root + sep)) throw new Error(`invalid blob key: ${key}`);
    return path;
  }

  async put(key: string, body: Readable | Uint8Array, _contentType: string): Promise<BlobInfo> {
    const path = this.localPath(key);
    await mkdir(dirname(path), { recursive: true });
    const tmp = join(dirname(path), `.tmp-${randomUUID()}`);
    try {
      if (body instanceof Uint8Array) await writeFile(tmp, body);
      else await pipeline(body, createWriteStream(tmp));
      await rename(tmp, path);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
    const info = await this.stat(key);
    if (!info) throw new Error(`blob ${key} vanished after write`);
    return info;
  }

  async stat(key: string): Promise<BlobInfo | undefined> {
    try {
      const s = await stat(this.localPath(key));
      if (!s.isFile()) return undefined;
      return {
        size: s.size,
        modifiedAt: s.mtime,
        etag: `"${s.size.toString(16)}-${Math.floor(s.mtimeMs).toString(16)}-${s.ino.toString(16)}"`,
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
  }

  read(key: string, range?: { start: number; end: number }): Readable {
    if (range && range.end < range.start) return Readable.from([]);
    return createReadStream(this.localPath(key), range ? { start: range.start, end: range.end } : {});
  }

  async delete(key: string): Promise<void> {
    await unlink(this.localPath(key)).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'ENOENT') throw err;
    });
  }

  async deletePrefix(prefix: string): Promise<void> {
    const path = this.localPath(prefix.replace(/\/+$/, ''));
    await rm(path, { recursive: true, force: true });
  }
}
