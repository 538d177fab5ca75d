/**
 * The BlobStore contract, run against every adapter: files in a temporary folder and an S3 bucket
 * on the real S3-compatible test server (a fresh bucket per test, dropped afterwards). Followed by
 * what only the S3 adapter has: a key prefix, checkAccess and close.
 */
import { afterEach, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { EventEmitter, once } from 'node:events';
import { readdirSync, readlinkSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { createServer, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import {
  DeleteBucketCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  PutObjectCommand,
  S3Client,
  paginateListObjectsV2,
} from '@aws-sdk/client-s3';
import type { S3Config } from '../config/config.js';
import { freshS3Bucket, type TestS3 } from '../../test/helpers/servers.js';
import type { BlobStore } from './blob-store.js';
import { CachedBlobStore } from './blob-store.cached.js';
import { FsBlobStore } from './blob-store.fs.js';
import { S3BlobStore } from './blob-store.s3.js';

const MiB = 1024 * 1024;
/** Generous upper bound for one test on a busy machine; a hang fails instead of blocking the run. */
const TEST_DEADLINE = { timeout: 120_000 };

/** Deterministic content: byte at offset o is o % 251, so any slice can be checked in place. */
function pattern(offset: number, length: number): Buffer {
  const buf = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) buf[i] = (offset + i) % 251;
  return buf;
}

/** `total` bytes of pattern() as a stream of `chunk`-sized buffers, produced on demand. */
function patternStream(total: number, chunk = 64 * 1024): Readable {
  return Readable.from(
    (function* () {
      for (let o = 0; o < total; o += chunk) yield pattern(o, Math.min(chunk, total - o));
    })(),
  );
}

/** A body that yields `bytes` of pattern() and then fails, like an upload cut off mid-way. */
function failingStream(bytes: number): Readable {
  return Readable.from(
    (async function* () {
      for (let o = 0; o < bytes; o += MiB) yield pattern(o, Math.min(MiB, bytes - o));
      throw new Error('source failed');
    })(),
  );
}

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

function sha256(data: Uint8Array): string {
  return createHash('sha256').update(data).digest('hex');
}

async function sha256OfStream(stream: Readable): Promise<{ hash: string; size: number }> {
  const hash = createHash('sha256');
  let size = 0;
  for await (const chunk of stream) {
    hash.update(chunk as Buffer);
    size += (chunk as Buffer).length;
  }
  return { hash: hash.digest('hex'), size };
}

/** The error a stream ends with (fails when it ends without one). */
async function streamError(stream: Readable): Promise<NodeJS.ErrnoException> {
  try {
    for await (const _ of stream) {
      // drain
    }
  } catch (err) {
    return err as NodeJS.ErrnoException;
  }
  assert.fail('the stream ended without an error');
}

/** Number of this process's descriptors open on `path` (Linux /proc). */
function fdsOn(path: string): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`) === path) n++;
    } catch {
      // the descriptor used to list the directory is gone already
    }
  }
  return n;
}

function s3Config(s3: TestS3, bucket = s3.bucket): S3Config {
  return {
    endpoint: s3.endpoint,
    bucket,
    region: s3.region,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
    forcePathStyle: s3.forcePathStyle,
  };
}

/** A plain SDK client on the test server, to look behind an adapter's back and drop buckets. */
function rawClient(s3: TestS3): S3Client {
  return new S3Client({
    endpoint: s3.endpoint,
    region: s3.region,
    forcePathStyle: true,
    credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
  });
}

/** Empties and deletes a test bucket. */
async function dropBucket(s3: TestS3): Promise<void> {
  const client = rawClient(s3);
  try {
    for await (const page of paginateListObjectsV2({ client }, { Bucket: s3.bucket })) {
      const objects = (page.Contents ?? []).flatMap((o) => (o.Key === undefined ? [] : [{ Key: o.Key }]));
      if (objects.length > 0) {
        await client.send(new DeleteObjectsCommand({ Bucket: s3.bucket, Delete: { Objects: objects } }));
      }
    }
    await client.send(new DeleteBucketCommand({ Bucket: s3.bucket }));
  } finally {
    client.destroy();
  }
}

/** A store under test, how a separate process builds the same store, and cleanup. */
interface OpenStore {
  store: BlobStore;
  /** JavaScript (an ES module body) that defines `store` as this same store, for a child process. */
  childSetup: string;
  /** Descriptors this process holds on a blob's file, when the adapter has files (else undefined). */
  openFiles(key: string): number | undefined;
  close(): Promise<void>;
}

interface Adapter {
  name: string;
  open(): Promise<OpenStore>;
}

const fsModule = new URL('./blob-store.fs.ts', import.meta.url).href;
const s3Module = new URL('./blob-store.s3.ts', import.meta.url).href;

/** An adapter over a fresh bucket; `wrap` puts what the composition adds in front of the S3 store. */
function s3Adapter(
  name: string,
  wrap: (bucket: S3BlobStore) => BlobStore & { close(): void | Promise<void> },
): Adapter {
  return {
    name,
    open: async () => {
      const s3 = await freshS3Bucket();
      const store = wrap(new S3BlobStore(s3Config(s3)));
      return {
        store,
        // Another process (node) writes straight to the bucket.
        childSetup: `const { S3BlobStore } = await import(${JSON.stringify(s3Module)});
          const store = new S3BlobStore(${JSON.stringify(s3Config(s3))});`,
        openFiles: () => undefined,
        close: async () => {
          await store.close();
          await dropBucket(s3);
        },
      };
    },
  };
}

const adapters: Adapter[] = [
  {
    name: 'FsBlobStore',
    open: async () => {
      const root = await realpath(await mkdtemp(join(tmpdir(), 'voicegen-blobs-')));
      const store = new FsBlobStore(root);
      return {
        store,
        childSetup: `const { FsBlobStore } = await import(${JSON.stringify(fsModule)});
          const store = new FsBlobStore(${JSON.stringify(root)});`,
        openFiles: (key) => fdsOn(join(root, key)),
        close: async () => {
          await store.close();
          await rm(root, { recursive: true, force: true });
        },
      };
    },
  },
  s3Adapter('S3BlobStore', (bucket) => bucket),
  // The scale-out composition: S3 behind the node's memory cache (a budget small enough that the
  // larger blobs of the contract stream through while small ones are held).
  s3Adapter(
    'CachedBlobStore over S3BlobStore',
    (bucket) => new CachedBlobStore(bucket, { budgetBytes: 2 * MiB }),
  ),
];

for (const adapter of adapters) {
  describe(`BlobStore contract: ${adapter.name}`, () => {
    let opened: OpenStore;
    let store: BlobStore;

    beforeEach(async () => {
      opened = await adapter.open();
      store = opened.store;
    });
    afterEach(async () => {
      await opened.close();
    });

    test('put of a Uint8Array: stat and read give back size and bytes', TEST_DEADLINE, async () => {
      const data = pattern(0, 10_000);
      const info = await store.put('tasks/t1/audio.mp3', data, 'audio/mpeg');
      assert.equal(info.size, data.length);
      assert.match(info.etag, /^"[^"]+"$/, 'a strong, quoted ETag');
      assert.ok(info.modifiedAt instanceof Date && !Number.isNaN(info.modifiedAt.getTime()));
      assert.deepEqual(await store.stat('tasks/t1/audio.mp3'), info);
      assert.deepEqual(await collect(store.read('tasks/t1/audio.mp3')), data);
    });

    test('put of a Readable of several chunks', TEST_DEADLINE, async () => {
      const info = await store.put(
        'voices/v1/lora.bin',
        patternStream(300_000, 7_000),
        'application/octet-stream',
      );
      assert.equal(info.size, 300_000);
      assert.deepEqual(await collect(store.read('voices/v1/lora.bin')), pattern(0, 300_000));
    });

    test(
      'put of a multi-MiB stream of unknown length (a multipart upload on S3)',
      TEST_DEADLINE,
      async () => {
        const size = 12 * MiB + 12_345;
        const info = await store.put('big/audio.mp3', patternStream(size), 'audio/mpeg');
        assert.equal(info.size, size);
        assert.deepEqual(await store.stat('big/audio.mp3'), info);
        assert.deepEqual(await sha256OfStream(store.read('big/audio.mp3')), {
          hash: sha256(pattern(0, size)),
          size,
        });
        // Across the 5 MiB part boundary of the upload, and the tail.
        const boundary = { start: 5 * MiB - 3, end: 5 * MiB + 2 };
        assert.deepEqual(await collect(store.read('big/audio.mp3', boundary)), pattern(boundary.start, 6));
        assert.deepEqual(
          await collect(store.read('big/audio.mp3', { start: size - 10, end: size - 1 })),
          pattern(size - 10, 10),
        );
      },
    );

    test('an empty blob', TEST_DEADLINE, async () => {
      const fromBytes = await store.put('e/bytes', new Uint8Array(0), 'application/octet-stream');
      const fromStream = await store.put('e/stream', Readable.from([]), 'application/octet-stream');
      assert.equal(fromBytes.size, 0);
      assert.equal(fromStream.size, 0);
      assert.equal((await collect(store.read('e/bytes'))).length, 0);
      assert.equal((await collect(store.read('e/stream'))).length, 0);
    });

    test('overwriting replaces the content and changes the ETag', TEST_DEADLINE, async () => {
      const first = await store.put('k/blob', pattern(0, 1000), 'audio/mpeg');
      const second = await store.put('k/blob', pattern(7, 1000), 'audio/mpeg');
      assert.notEqual(second.etag, first.etag);
      assert.equal(second.size, 1000);
      assert.deepEqual(await store.stat('k/blob'), second);
      assert.deepEqual(await collect(store.read('k/blob')), pattern(7, 1000));
      const third = await store.put('k/blob', pattern(0, 10), 'audio/mpeg');
      assert.equal(third.size, 10);
      assert.notEqual(third.etag, second.etag);
    });

    test('stat of a missing blob is undefined', TEST_DEADLINE, async () => {
      assert.equal(await store.stat('missing/blob'), undefined);
      await store.put('file', pattern(0, 3), 'application/octet-stream');
      assert.equal(await store.stat('file/below'), undefined, 'below a blob that is not a folder');
      await store.put('folder/inner', pattern(0, 3), 'application/octet-stream');
      assert.equal(await store.stat('folder'), undefined, 'a folder is not a blob');
    });

    test('read of ranges: first, last, middle and single bytes, whole', TEST_DEADLINE, async () => {
      const size = 100_000;
      await store.put('r/blob', pattern(0, size), 'audio/mpeg');
      const cases = [
        { start: 0, end: 0 },
        { start: size - 1, end: size - 1 },
        { start: 1000, end: 1999 },
        { start: 54_321, end: 54_321 },
        { start: 0, end: size - 1 },
        { start: 1, end: size - 2 },
      ];
      for (const range of cases) {
        assert.deepEqual(
          await collect(store.read('r/blob', range)),
          pattern(range.start, range.end - range.start + 1),
          `bytes ${range.start}-${range.end}`,
        );
      }
    });

    test('read of ranges reaching past the end: cut at the end, or empty', TEST_DEADLINE, async () => {
      await store.put('r/short', pattern(0, 100), 'audio/mpeg');
      assert.deepEqual(await collect(store.read('r/short', { start: 90, end: 1000 })), pattern(90, 10));
      assert.equal((await collect(store.read('r/short', { start: 100, end: 200 }))).length, 0);
      assert.equal((await collect(store.read('r/short', { start: 50, end: 49 }))).length, 0, 'inverted');
    });

    test('read of a missing blob returns a stream that fails with ENOENT', TEST_DEADLINE, async () => {
      const [whole, ranged] = await Promise.all([
        streamError(store.read('missing/blob')),
        streamError(store.read('missing/blob', { start: 0, end: 9 })),
      ]);
      assert.equal(whole.code, 'ENOENT');
      assert.equal(ranged.code, 'ENOENT');
    });

    test('delete removes a blob; deleting a missing one is fine', TEST_DEADLINE, async () => {
      await store.put('d/blob', pattern(0, 10), 'audio/mpeg');
      await store.put('d/other', pattern(0, 10), 'audio/mpeg');
      await store.delete('d/blob');
      assert.equal(await store.stat('d/blob'), undefined);
      await store.delete('d/blob');
      await store.delete('never/was');
      assert.equal((await store.stat('d/other'))?.size, 10);
    });

    test('deletePrefix deletes that folder only', TEST_DEADLINE, async () => {
      const doomed = ['p/a/1', 'p/a/2/3', 'p/a/2/4.mp3'];
      const kept = ['p/ab/1', 'p/b', 'q/a/1', 'p/a-b'];
      for (const key of [...doomed, ...kept]) await store.put(key, pattern(0, 5), 'audio/mpeg');
      await store.deletePrefix('p/a/');
      for (const key of doomed) assert.equal(await store.stat(key), undefined, key);
      for (const key of kept) assert.equal((await store.stat(key))?.size, 5, key);
      await store.deletePrefix('p/a/');
      await store.deletePrefix('nothing/here/');
    });

    // 1001 keys: more than one S3 list page and DeleteObjects batch (1000 each).
    test('deletePrefix of more than 1000 blobs', TEST_DEADLINE, async () => {
      const keys = Array.from({ length: 1001 }, (_, i) => `many/${String(i).padStart(4, '0')}`);
      const body = pattern(0, 16);
      for (let i = 0; i < keys.length; i += 25) {
        await Promise.all(
          keys.slice(i, i + 25).map((key) => store.put(key, body, 'application/octet-stream')),
        );
      }
      await store.put('many-kept/x', body, 'application/octet-stream');
      await store.deletePrefix('many/');
      for (const key of [keys[0], keys[999], keys[1000]])
        assert.equal(await store.stat(key as string), undefined);
      assert.equal((await store.stat('many-kept/x'))?.size, 16);
    });

    test('keys that could escape or are malformed are rejected', TEST_DEADLINE, async () => {
      const badKeys = [
        '',
        '../x',
        'a/../b',
        '..',
        '.',
        './a',
        '/etc/passwd',
        'a//b',
        'a/',
        '.hidden',
        'a/.tmp-1',
        'a\\b',
        'a b',
        'ä',
        'x'.repeat(513),
      ];
      for (const key of badKeys) {
        const label = JSON.stringify(key);
        await assert.rejects(store.put(key, pattern(0, 1), 'audio/mpeg'), /invalid blob key/, `put ${label}`);
        await assert.rejects(
          store.put(key, Readable.from([pattern(0, 1)]), 'audio/mpeg'),
          `put stream ${label}`,
        );
        await assert.rejects(store.stat(key), /invalid blob key/, `stat ${label}`);
        assert.throws(() => store.read(key), /invalid blob key/, `read ${label}`);
        await assert.rejects(store.delete(key), /invalid blob key/, `delete ${label}`);
      }
      for (const prefix of ['', '/', '../', 'a', 'a//', '/a/', 'a/../']) {
        await assert.rejects(
          store.deletePrefix(prefix),
          /invalid blob/,
          `deletePrefix ${JSON.stringify(prefix)}`,
        );
      }
      assert.throws(() => store.read('ok', { start: -1, end: 5 }), RangeError);
      assert.throws(() => store.read('ok', { start: 0.5, end: 5 }), RangeError);
    });

    test('a put whose body fails stores nothing and keeps the previous content', TEST_DEADLINE, async () => {
      // Within the first 5 MiB upload part, and past it (S3: a multipart upload that is aborted).
      for (const bytes of [1000, 6 * MiB]) {
        await assert.rejects(store.put(`f/new-${bytes}`, failingStream(bytes), 'audio/mpeg'));
        assert.equal(await store.stat(`f/new-${bytes}`), undefined);
      }
      const before = await store.put('f/old', pattern(3, 100), 'audio/mpeg');
      await assert.rejects(store.put('f/old', failingStream(6 * MiB), 'audio/mpeg'));
      assert.deepEqual(await store.stat('f/old'), before);
      assert.deepEqual(await collect(store.read('f/old')), pattern(3, 100));
    });

    test('concurrent puts of one key: the blob is one of them, whole', TEST_DEADLINE, async () => {
      const a = Buffer.alloc(2 * MiB, 0x61);
      const b = Buffer.alloc(3 * MiB, 0x62);
      await Promise.all([
        store.put('c/blob', Readable.from([a.subarray(0, MiB), a.subarray(MiB)]), 'audio/mpeg'),
        store.put('c/blob', Readable.from([b.subarray(0, MiB), b.subarray(MiB)]), 'audio/mpeg'),
      ]);
      const stored = await collect(store.read('c/blob'));
      assert.ok(stored.equals(a) || stored.equals(b), 'exactly one whole write');
      assert.equal((await store.stat('c/blob'))?.size, stored.length);
    });

    test('a read destroyed early releases its file or connection', TEST_DEADLINE, async () => {
      const size = 8 * MiB;
      await store.put('leak/blob', patternStream(size), 'audio/mpeg');

      // After the first chunk.
      const partial = store.read('leak/blob');
      const [first] = (await once(partial, 'data')) as [Buffer];
      assert.deepEqual(first, pattern(0, first.length));
      partial.destroy();
      await once(partial, 'close');

      // Before any byte arrived (S3: while the request is in flight), and before any read at all.
      const early = store.read('leak/blob', { start: 10, end: size - 1 });
      early.resume();
      early.destroy();
      await once(early, 'close');
      const unread = store.read('leak/blob');
      unread.destroy();
      await once(unread, 'close');

      // At most the one descriptor a store keeps for reuse (FsBlobStore), however many reads ended.
      const open = opened.openFiles('leak/blob');
      if (open !== undefined) assert.ok(open <= 1, `${open} descriptors left on the file`);
      // The store still serves reads afterwards.
      assert.deepEqual(await collect(store.read('leak/blob', { start: 0, end: 9 })), pattern(0, 10));
    });

    // A process that abandons reads and never closes the store still exits by itself: no timer,
    // pending request or handle is left behind. (That S3 requests are really aborted, not drained
    // or parked, is checked against a fake endpoint in the S3 block below.)
    test('a process that abandons reads exits by itself', TEST_DEADLINE, async () => {
      await store.put('leak/child', patternStream(6 * MiB), 'audio/mpeg');
      const script = `${opened.childSetup}
        const partial = store.read('leak/child');
        await new Promise((resolve) => partial.once('data', resolve));
        partial.destroy();
        const early = store.read('leak/child', { start: 1, end: 5000000 });
        early.resume();
        early.destroy();
        const lazy = store.read('leak/child');
        lazy.destroy();
        const head = store.read('leak/child', { start: 0, end: 0 });
        head.resume();
        await new Promise((resolve) => head.once('end', resolve));
        console.log('abandoned');`;
      const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const deadline = AbortSignal.timeout(60_000);
      const kill = (): boolean => child.kill('SIGKILL');
      deadline.addEventListener('abort', kill, { once: true });
      try {
        const [code] = (await once(child, 'exit')) as [number | null];
        assert.ok(!deadline.aborted, `the child did not exit by itself (stdout: ${stdout})`);
        assert.equal(code, 0, stderr);
        assert.match(stdout, /abandoned/);
      } finally {
        deadline.removeEventListener('abort', kill);
      }
    });
  });
}

describe('S3BlobStore beyond the contract', () => {
  let s3: TestS3;
  let stores: S3BlobStore[];

  beforeEach(async () => {
    s3 = await freshS3Bucket();
    stores = [];
  });
  afterEach(async () => {
    for (const store of stores) store.close();
    await dropBucket(s3);
  });

  function newStore(config: S3Config, keyPrefix?: string): S3BlobStore {
    const store = new S3BlobStore(config, keyPrefix === undefined ? {} : { keyPrefix });
    stores.push(store);
    return store;
  }

  test('a key prefix keeps every object in its folder of the bucket', TEST_DEADLINE, async () => {
    const tenant = newStore(s3Config(s3), 'tenant-a/');
    const raw = rawClient(s3);
    try {
      await tenant.put('x/blob', pattern(0, 10), 'audio/mpeg');
      const out = await raw.send(new GetObjectCommand({ Bucket: s3.bucket, Key: 'tenant-a/x/blob' }));
      assert.deepEqual(Buffer.from((await out.Body?.transformToByteArray()) ?? []), pattern(0, 10));
      assert.equal(out.ContentType, 'audio/mpeg');
      await raw.send(new PutObjectCommand({ Bucket: s3.bucket, Key: 'x/outside', Body: 'outside' }));
      await tenant.deletePrefix('x/');
      assert.equal(await tenant.stat('x/blob'), undefined);
      assert.equal(
        await newStore(s3Config(s3))
          .stat('x/outside')
          .then((i) => i?.size),
        7,
      );
    } finally {
      raw.destroy();
    }
    assert.throws(() => new S3BlobStore(s3Config(s3), { keyPrefix: 'no-slash' }), /invalid blob prefix/);
    assert.throws(() => new S3BlobStore(s3Config(s3), { keyPrefix: '../' }), /invalid blob key/);
  });

  // A fake endpoint whose GET bodies never end on their own (or that never answers): a request
  // closes only when the client aborts it, so a read that drains or parks its body would fail here.
  test(
    'destroying a read aborts its HTTP request, before or after the answer began',
    TEST_DEADLINE,
    async () => {
      const arrived = new EventEmitter();
      const closed = new EventEmitter();
      const server = createHttpServer((req, res) => {
        const path = new URL(req.url ?? '/', 'http://localhost').pathname;
        res.once('close', () => closed.emit(path));
        arrived.emit(path);
        if (path.includes('/silent/')) return;
        res.writeHead(200, {
          'content-length': String(1024 * MiB),
          'content-type': 'audio/mpeg',
          etag: '"endless"',
          'last-modified': new Date().toUTCString(),
        });
        res.write(pattern(0, 64 * 1024));
      });
      server.listen(0, '127.0.0.1');
      try {
        await once(server, 'listening');
        const { port } = server.address() as { port: number };
        const store = newStore({ ...s3Config(s3), endpoint: `http://127.0.0.1:${port}` });
        const deadline = { signal: AbortSignal.timeout(60_000) };

        const streaming = store.read('endless/blob');
        const streamingClosed = once(closed, `/${s3.bucket}/endless/blob`, deadline);
        const [first] = (await once(streaming, 'data', deadline)) as [Buffer];
        assert.deepEqual(first, pattern(0, first.length));
        streaming.destroy();
        await streamingClosed;

        const silent = store.read('silent/blob');
        const silentArrived = once(arrived, `/${s3.bucket}/silent/blob`, deadline);
        const silentClosed = once(closed, `/${s3.bucket}/silent/blob`, deadline);
        silent.resume();
        await silentArrived;
        silent.destroy();
        await silentClosed;
      } finally {
        server.closeAllConnections();
        server.close();
      }
    },
  );

  test('checkAccess passes for the bucket', TEST_DEADLINE, async () => {
    await newStore(s3Config(s3)).checkAccess();
  });

  test('checkAccess names bucket and endpoint when the bucket is missing', TEST_DEADLINE, async () => {
    const missing = `${s3.bucket}-missing`;
    await assert.rejects(newStore(s3Config(s3, missing)).checkAccess(), (err: Error) => {
      assert.match(err.message, new RegExp(`"${missing}"`));
      assert.ok(err.message.includes(s3.endpoint), err.message);
      assert.match(err.message, /does not exist/);
      return true;
    });
  });

  test('checkAccess names bucket and endpoint when nothing listens', TEST_DEADLINE, async () => {
    const server = createServer();
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const { port } = server.address() as { port: number };
    server.close();
    await once(server, 'close');
    const endpoint = `http://127.0.0.1:${port}`;
    await assert.rejects(newStore({ ...s3Config(s3), endpoint }).checkAccess(), (err: Error) => {
      assert.match(err.message, new RegExp(`"${s3.bucket}" at ${endpoint} is not usable: unreachable`));
      return true;
    });
  });

  test(
    'checkAccess gives up on an endpoint that never answers when its signal fires',
    TEST_DEADLINE,
    async () => {
      const abort = new AbortController();
      const sockets: Socket[] = [];
      const server = createServer((socket) => {
        sockets.push(socket);
        abort.abort(); // the request reached the endpoint, which stays silent
      });
      server.listen(0, '127.0.0.1');
      try {
        await once(server, 'listening');
        const { port } = server.address() as { port: number };
        const endpoint = `http://127.0.0.1:${port}`;
        await assert.rejects(
          newStore({ ...s3Config(s3), endpoint }).checkAccess(abort.signal),
          (err: Error) => {
            assert.match(
              err.message,
              new RegExp(`at ${endpoint} is not usable: unreachable \\(no answer in time\\)`),
            );
            return true;
          },
        );
      } finally {
        for (const socket of sockets) socket.destroy();
        server.close();
      }
    },
  );
});
