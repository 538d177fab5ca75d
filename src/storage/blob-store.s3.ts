/**
 * BlobStore on an S3-compatible bucket (AWS S3, MinIO, Ceph RGW, Cloudflare R2, s3rver) for
 * scale-out: every node reads and writes the same objects. S3 makes each PUT atomic, so a key is
 * either absent or complete, as the port requires.
 */
import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  type GetObjectCommandInput,
  HeadBucketCommand,
  HeadObjectCommand,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
  S3ServiceException,
  paginateListObjectsV2,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import type { S3Config } from '../config/config.js';
import {
  assertBlobKey,
  assertBlobPrefix,
  assertBlobRange,
  type BlobInfo,
  type BlobStore,
} from './blob-store.js';

/** Options of an S3BlobStore beyond the bucket settings. */
export interface S3BlobStoreOptions {
  /** A folder of the bucket (`voicegen/`) that holds every key, so a bucket can be shared; none by default. */
  keyPrefix?: string;
}

/** How long checkAccess waits for the bucket by default. */
const CHECK_ACCESS_TIMEOUT_MS = 15_000;
/** A TCP connection that takes longer than this fails instead of hanging on a dead endpoint. */
const CONNECTION_TIMEOUT_MS = 10_000;

/** The BlobStore of scale-out mode: one object per key in an S3-compatible bucket. */
export class S3BlobStore implements BlobStore {
  private readonly client: S3Client;
  private readonly bucket: string;
  private readonly keyPrefix: string;
  /** The bucket and endpoint, for error messages. */
  private readonly where: string;

  constructor(config: S3Config, options: S3BlobStoreOptions = {}) {
    const keyPrefix = options.keyPrefix ?? '';
    if (keyPrefix !== '') assertBlobPrefix(keyPrefix);
    this.bucket = config.bucket;
    this.keyPrefix = keyPrefix;
    this.where = `S3 bucket "${config.bucket}" at ${config.endpoint ?? `AWS S3 (${config.region})`}`;
    const clientConfig: S3ClientConfig = {
      region: config.region,
      forcePathStyle: config.forcePathStyle,
      requestHandler: { connectionTimeout: CONNECTION_TIMEOUT_MS },
    };
    if (config.credentials) clientConfig.credentials = config.credentials;
    if (config.endpoint !== undefined) {
      clientConfig.endpoint = config.endpoint;
      // Many S3-compatible stores reject the SDK's default CRC checksum headers (and the
      // aws-chunked uploads that carry them): checksum only where the API requires one.
      clientConfig.requestChecksumCalculation = 'WHEN_REQUIRED';
      clientConfig.responseChecksumValidation = 'WHEN_REQUIRED';
    }
    this.client = new S3Client(clientConfig);
    if (config.endpoint !== undefined) sendContentMd5WithDeleteObjects(this.client);
  }

  /**
   * Fails with a message naming the bucket and endpoint when the bucket is missing, forbidden or
   * unreachable; the app calls it at start so a bad S3 setting stops start-up, not the first upload.
   */
  async checkAccess(signal: AbortSignal = AbortSignal.timeout(CHECK_ACCESS_TIMEOUT_MS)): Promise<void> {
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }), { abortSignal: signal });
    } catch (err) {
      const status = httpStatus(err);
      const reason =
        status === 404
          ? 'the bucket does not exist'
          : status === 403
            ? 'access denied (check the S3 credentials and the bucket policy)'
            : status === 301
              ? 'the bucket is in another region (check the S3 region)'
              : status !== undefined
                ? `HTTP ${status}`
                : `unreachable (${signal.aborted ? 'no answer in time' : errorMessage(err)})`;
      throw new Error(`${this.where} is not usable: ${reason}`, { cause: err });
    }
  }

  /** Releases the client's connections; the store is unusable afterwards. */
  close(): void {
    this.client.destroy();
  }

  async put(key: string, body: Readable | Uint8Array, contentType: string): Promise<BlobInfo> {
    const objectKey = this.objectKey(key);
    try {
      if (body instanceof Uint8Array) {
        await this.client.send(
          new PutObjectCommand({
            Bucket: this.bucket,
            Key: objectKey,
            Body: body,
            ContentLength: body.byteLength,
            ContentType: contentType,
          }),
        );
      } else {
        // Unknown length: one PUT when the stream ends within the first part, else a multipart
        // upload, which S3 publishes only when completed (and lib-storage aborts on failure).
        await new Upload({
          client: this.client,
          params: { Bucket: this.bucket, Key: objectKey, Body: body, ContentType: contentType },
        }).done();
      }
    } catch (err) {
      if (!(body instanceof Uint8Array)) body.destroy();
      throw new Error(`storing blob ${key} in ${this.where} failed: ${errorMessage(err)}`, { cause: err });
    }
    const info = await this.stat(key);
    if (!info) throw new Error(`blob ${key} vanished after write`);
    return info;
  }

  async stat(key: string): Promise<BlobInfo | undefined> {
    const objectKey = this.objectKey(key);
    try {
      const head = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: objectKey }));
      if (head.ETag === undefined || head.ContentLength === undefined || head.LastModified === undefined) {
        throw new Error('the store answered without ETag, Content-Length or Last-Modified');
      }
      return { size: head.ContentLength, modifiedAt: head.LastModified, etag: head.ETag };
    } catch (err) {
      if (httpStatus(err) === 404) return undefined;
      throw new Error(`reading metadata of blob ${key} in ${this.where} failed: ${errorMessage(err)}`, {
        cause: err,
      });
    }
  }

  read(key: string, range?: { start: number; end: number }): Readable {
    const objectKey = this.objectKey(key);
    if (range) assertBlobRange(range);
    // An inverted range is empty (S3 would ignore it and send the whole object).
    if (range && range.end < range.start) return Readable.from([]);
    return new S3ObjectReadable(
      this.client,
      {
        Bucket: this.bucket,
        Key: objectKey,
        ...(range ? { Range: `bytes=${range.start}-${range.end}` } : {}),
      },
      range,
      `blob ${key} in ${this.where}`,
    );
  }

  async delete(key: string): Promise<void> {
    const objectKey = this.objectKey(key);
    try {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: objectKey }));
    } catch (err) {
      throw new Error(`deleting blob ${key} in ${this.where} failed: ${errorMessage(err)}`, { cause: err });
    }
  }

  async deletePrefix(prefix: string): Promise<void> {
    assertBlobPrefix(prefix);
    try {
      // A page holds at most 1000 keys, which is also the most one DeleteObjects takes.
      const pages = paginateListObjectsV2(
        { client: this.client },
        { Bucket: this.bucket, Prefix: this.keyPrefix + prefix },
      );
      for await (const page of pages) {
        const objects = (page.Contents ?? []).flatMap((o) => (o.Key === undefined ? [] : [{ Key: o.Key }]));
        if (objects.length === 0) continue;
        const out = await this.client.send(
          new DeleteObjectsCommand({ Bucket: this.bucket, Delete: { Objects: objects, Quiet: true } }),
        );
        const failed = out.Errors ?? [];
        if (failed.length > 0) {
          const sample = failed.slice(0, 3).map((e) => `${e.Key ?? '?'}: ${e.Code ?? e.Message ?? 'error'}`);
          throw new Error(`${failed.length} objects were not deleted (${sample.join('; ')})`);
        }
      }
    } catch (err) {
      throw new Error(`deleting blobs under ${prefix} in ${this.where} failed: ${errorMessage(err)}`, {
        cause: err,
      });
    }
  }

  /** The object key of a blob key, after checking the blob key. */
  private objectKey(key: string): string {
    assertBlobKey(key);
    return this.keyPrefix + key;
  }
}

/**
 * A GetObject as a Node stream that exists before the request does: the first read sends it,
 * its body is passed on with backpressure, and destroying the stream aborts the request or the
 * body, so an abandoned read never holds a connection. Only the asked bytes come out, even from a
 * store that ignores or stretches the Range (s3rver answers `bytes=0-0` with the whole object).
 */
class S3ObjectReadable extends Readable {
  private readonly abort = new AbortController();
  private body: Readable | undefined;
  private requested = false;
  /** Bytes of the body before the asked range (a store that served from an earlier offset). */
  private skip = 0;
  /** Bytes still to pass on; Infinity without a range. */
  private remaining: number;
  private ended = false;

  constructor(
    private readonly client: S3Client,
    private readonly input: GetObjectCommandInput,
    private readonly range: { start: number; end: number } | undefined,
    private readonly what: string,
  ) {
    super();
    this.remaining = range ? range.end - range.start + 1 : Infinity;
  }

  override _read(): void {
    if (this.body) {
      this.body.resume();
      return;
    }
    if (this.requested) return;
    this.requested = true;
    this.client.send(new GetObjectCommand(this.input), { abortSignal: this.abort.signal }).then(
      (out) => this.attach(out.Body, out.ContentRange),
      (err: unknown) => {
        if (this.destroyed) return;
        // A range starting past the end: empty, as a file read past its end is.
        if (httpStatus(err) === 416) this.push(null);
        else this.destroy(readError(this.what, err));
      },
    );
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.abort.abort();
    this.body?.destroy();
    callback(err);
  }

  private attach(body: unknown, contentRange: string | undefined): void {
    if (!(body instanceof Readable)) {
      if (body !== undefined && typeof (body as { destroy?: unknown }).destroy === 'function') {
        (body as { destroy: () => void }).destroy();
      }
      this.destroy(new Error(`reading ${this.what}: the S3 client returned no Node stream`));
      return;
    }
    if (this.destroyed) {
      body.destroy();
      return;
    }
    if (this.range) {
      // A 200 without Content-Range is the whole object: the store ignored the Range.
      const servedFrom = contentRange === undefined ? 0 : Number(/^bytes (\d+)-/.exec(contentRange)?.[1]);
      if (!(servedFrom <= this.range.start)) {
        body.destroy();
        this.destroy(
          new Error(`reading ${this.what}: asked for bytes from ${this.range.start}, got ${contentRange}`),
        );
        return;
      }
      this.skip = this.range.start - servedFrom;
    }
    this.body = body;
    body.on('data', (chunk: Buffer) => this.pass(chunk));
    body.once('end', () => this.finish());
    body.once('error', (err) => {
      if (!this.ended) this.destroy(readError(this.what, err));
    });
  }

  private pass(chunk: Buffer): void {
    if (this.ended) return;
    let bytes = chunk;
    if (this.skip > 0) {
      const skipped = Math.min(this.skip, bytes.length);
      this.skip -= skipped;
      bytes = bytes.subarray(skipped);
    }
    if (bytes.length > this.remaining) bytes = bytes.subarray(0, this.remaining);
    this.remaining -= bytes.length;
    const more = bytes.length === 0 || this.push(bytes);
    if (this.remaining === 0) {
      // Everything asked for is here: end now, and drop the rest a store sent beyond it.
      this.finish();
      this.body?.destroy();
    } else if (!more) {
      this.body?.pause();
    }
  }

  private finish(): void {
    if (this.ended || this.destroyed) return;
    this.ended = true;
    this.remaining = 0;
    this.push(null);
  }
}

/** A read failure; a missing blob gets code ENOENT, as the file system adapter's does. */
function readError(what: string, err: unknown): Error {
  const status = httpStatus(err);
  if (status === 404) {
    return Object.assign(new Error(`${what} not found`, { cause: err }), { code: 'ENOENT' });
  }
  return new Error(`reading ${what} failed: ${errorMessage(err)}`, { cause: err });
}

/** The HTTP status of an S3 error response, or undefined (network error, abort). */
function httpStatus(err: unknown): number | undefined {
  return err instanceof S3ServiceException ? err.$metadata.httpStatusCode : undefined;
}

function errorMessage(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  // The SDK names bodiless errors (HEAD) only by status: say which.
  const status = httpStatus(err);
  return status !== undefined && err.message === 'UnknownError' ? `HTTP ${status}` : err.message;
}

/**
 * DeleteObjects requires a body checksum; the SDK now sends CRC32, but older MinIO releases,
 * Dell ECS and other stores still demand Content-MD5 (aws-sdk-js-v3 supplemental-docs/MD5_FALLBACK.md).
 * Sending both satisfies every store.
 */
function sendContentMd5WithDeleteObjects(client: S3Client): void {
  client.middlewareStack.add(
    (next, context) => async (args) => {
      const request = args.request as { headers?: Record<string, string>; body?: unknown };
      if (context.commandName === 'DeleteObjectsCommand' && request.headers) {
        const body = request.body;
        if (typeof body === 'string' || body instanceof Uint8Array) {
          request.headers['content-md5'] = createHash('md5').update(body).digest('base64');
        }
      }
      return next(args);
    },
    { step: 'build', name: 'voicegenDeleteObjectsContentMd5' },
  );
}
