/**
 * Storage of audio and uploaded files by key. The embedded implementation keeps files under
 * DATA_DIR; an S3-compatible one comes with scale-out. Writes are atomic: a key is either absent
 * or holds its complete content.
 */
import type { Readable } from 'node:stream';

export interface BlobInfo {
  size: number;
  modifiedAt: Date;
  /** Strong validator for HTTP caching and If-Range. */
  etag: string;
}

export interface BlobStore {
  /** Stores a whole stream under `key`, atomically (write to a temporary name, then rename). */
  put(key: string, body: Readable | Uint8Array, contentType: string): Promise<BlobInfo>;
  /** Metadata of a stored blob, or undefined. */
  stat(key: string): Promise<BlobInfo | undefined>;
  /** Reads bytes [start, endInclusive] (whole blob when omitted). */
  read(key: string, range?: { start: number; end: number }): Readable;
  delete(key: string): Promise<void>;
  /** Deletes every blob whose key starts with `prefix`. */
  deletePrefix(prefix: string): Promise<void>;
  /** A local file path for the blob when the store is file-backed (lets writers append in place). */
  localPath?(key: string): string;
}
