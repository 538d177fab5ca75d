/**
 * Storage of audio and uploaded files by key. The embedded implementation keeps files under
 * DATA_DIR (blob-store.fs.ts); the scale-out one uses an S3-compatible bucket (blob-store.s3.ts).
 * Writes are atomic: a key is either absent or holds its complete content.
 */
import type { Readable } from 'node:stream';

/** Metadata of a stored blob, as HTTP serving needs it (Content-Length, Last-Modified, ETag). */
export interface BlobInfo {
  size: number;
  modifiedAt: Date;
  /** Strong validator for HTTP caching and If-Range. */
  etag: string;
}

/** A blob held in memory: its metadata and its bytes (a shared buffer: never write to it). */
export interface HeldBlob {
  info: BlobInfo;
  bytes: Buffer;
}

/** The blob-store port; one contract suite (blob-store.contract.test.ts) covers every adapter. */
export interface BlobStore {
  /** Stores a whole stream under `key`, atomically; the body is consumed (destroyed on failure). */
  put(key: string, body: Readable | Uint8Array, contentType: string): Promise<BlobInfo>;
  /** Metadata of a stored blob, or undefined. */
  stat(key: string): Promise<BlobInfo | undefined>;
  /**
   * Reads bytes [start, end] inclusive (whole blob when omitted; a range is cut at the blob's end).
   * Returns at once: a missing blob is an error event of the stream (code ENOENT), not a throw, and
   * destroying the stream releases its file or connection.
   */
  read(key: string, range?: { start: number; end: number }): Readable;
  /**
   * A blob this store holds in memory with current metadata: its metadata and bytes (read-only),
   * without I/O or a stream (finished audio answered from a buffer), else undefined: then use
   * stat() and read(). Only stores that keep blobs in memory have it.
   */
  held?(key: string): HeldBlob | undefined;
  /** Deletes a blob; deleting a missing one is not an error. */
  delete(key: string): Promise<void>;
  /** Deletes every blob whose key starts with `prefix`, which must be a folder: `a/b/`. */
  deletePrefix(prefix: string): Promise<void>;
}

/** One path segment of a key: starts with a letter or digit (so never `.`, `..` or hidden). */
const KEY_SEGMENT = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
/** Well under S3's 1024-byte key limit, leaving room for an adapter's own key prefix. */
const MAX_KEY_LENGTH = 512;

/**
 * Throws unless `key` is a valid blob key: `/`-separated segments of letters, digits and `._-`,
 * each starting with a letter or digit. Every adapter checks keys with this one rule, so a key
 * means the same relative file path and the same S3 object key, and can never escape a folder.
 */
export function assertBlobKey(key: string): void {
  if (key.length === 0 || key.length > MAX_KEY_LENGTH || !key.split('/').every((s) => KEY_SEGMENT.test(s))) {
    throw new Error(`invalid blob key: ${JSON.stringify(key)}`);
  }
}

/** Throws unless `prefix` is a valid key followed by `/` (deletePrefix removes whole folders). */
export function assertBlobPrefix(prefix: string): void {
  if (!prefix.endsWith('/'))
    throw new Error(`invalid blob prefix (must end with "/"): ${JSON.stringify(prefix)}`);
  assertBlobKey(prefix.slice(0, -1));
}

/** Throws unless `range` is a byte range the stores can serve: integers, 0 <= start. */
export function assertBlobRange(range: { start: number; end: number }): void {
  if (!Number.isSafeInteger(range.start) || !Number.isSafeInteger(range.end) || range.start < 0) {
    throw new RangeError(`invalid blob range: ${range.start}-${range.end}`);
  }
}
