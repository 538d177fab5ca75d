import { afterEach, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readlinkSync } from 'node:fs';
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import { FsSessionCache, READ_CHUNK_SIZE } from './session-cache.fs.js';
import { resolveRangePlan } from './range-plan.js';

const MiB = 1024 * 1024;

/** Deterministic content: byte at offset o is o % 251, so any slice can be checked in place. */
function pattern(offset: number, length: number, into?: Buffer): Buffer {
  const buf = into ?? Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) buf[i] = (offset + i) % 251;
  return buf;
}

async function collect(stream: Readable): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
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

/** Whether a promise has settled, observed after letting pending I/O callbacks run. */
async function isSettled(p: Promise<unknown>): Promise<boolean> {
  let settled = false;
  p.then(
    () => (settled = true),
    () => (settled = true),
  );
  await nextTurn();
  await nextTurn();
  return settled;
}

let dir: string;
let caches: FsSessionCache[];
function newCache(name = 'session.mp3'): FsSessionCache {
  const cache = new FsSessionCache({ dir, name });
  caches.push(cache);
  return cache;
}

void beforeEach(async () => {
  dir = await realpath(await mkdtemp(join(tmpdir(), 'session-cache-')));
  caches = [];
});
void afterEach(async () => {
  for (const cache of caches) await cache.destroy();
  await rm(dir, { recursive: true, force: true });
});

void describe('FsSessionCache', () => {
  void test('a reader started before any append follows the appends to the end', async () => {
    const cache = newCache();
    const reader = cache.createReadStream(0, null);
    const result = collect(reader);
    const sizes = [1, 0, 100, 3 * READ_CHUNK_SIZE + 7, 4096, 1, 200_000];
    let offset = 0;
    for (const size of sizes) {
      await cache.append(pattern(offset, size));
      offset += size;
    }
    assert.equal(cache.produced, offset);
    assert.equal(cache.finished, false);
    await cache.finish();
    assert.equal(cache.size, offset);
    assert.deepEqual(await result, pattern(0, offset));
  });

  void test('many concurrent readers at different offsets, started at different times', async () => {
    const cache = newCache();
    const total = 500_000;
    const windows: [number, number | null][] = [
      [0, null],
      [5, null],
      [70_000, null],
      [1000, 2000],
      [0, 1],
      [123_456, 400_001],
      [total - 1, null],
      [total, null],
      [total + 10, null],
      [total - 5, total + 100],
      [64 * 1024, 128 * 1024],
    ];
    const early = windows.map(([s, e]) => collect(cache.createReadStream(s, e)));
    let offset = 0;
    const late: Promise<Buffer>[] = [];
    while (offset < total) {
      const size = Math.min(total - offset, 33_333);
      await cache.append(pattern(offset, size));
      offset += size;
      if (late.length < windows.length && offset > total / 2) {
        late.push(...windows.map(([s, e]) => collect(cache.createReadStream(s, e))));
      }
    }
    await cache.finish();
    const after = windows.map(([s, e]) => collect(cache.createReadStream(s, e)));
    for (const group of [early, late, after]) {
      const results = await Promise.all(group);
      windows.forEach(([s, e], i) => {
        const start = Math.min(s, total);
        const end = Math.min(e ?? total, total);
        assert.deepEqual(
          results[i],
          pattern(start, Math.max(0, end - start)),
          `window ${String(s)}-${String(e)}`,
        );
      });
    }
  });

  void test('a reader waiting in the middle errors when the writer fails, after the bytes it had', async () => {
    const cache = newCache();
    await cache.append(pattern(0, 1000));
    const reader = cache.createReadStream(0, null);
    let received = 0;
    const gotAll = new Promise<void>((resolve) =>
      reader.on('data', (chunk: Buffer) => {
        received += chunk.length;
        if (received >= 1000) resolve();
      }),
    );
    const errored = once(reader, 'error');
    await gotAll;
    cache.fail(new Error('engine crashed'));
    const [err] = (await errored) as [Error];
    assert.equal(err.message, 'engine crashed');
    assert.equal(received, 1000);
    assert.equal(cache.failed, true);
    assert.equal(cache.error?.message, 'engine crashed');
    await assert.rejects(cache.append(pattern(0, 1)), /engine crashed/);
    await assert.rejects(cache.finish(), /engine crashed/);
    // A reader created after the failure gets the stored bytes, then the error.
    const late = cache.createReadStream(500, null);
    let lateBytes = 0;
    late.on('data', (chunk: Buffer) => (lateBytes += chunk.length));
    const [lateErr] = (await once(late, 'error')) as [Error];
    assert.equal(lateErr.message, 'engine crashed');
    assert.equal(lateBytes, 500);
    // A bounded read inside the stored bytes still completes.
    assert.deepEqual(await collect(cache.createReadStream(10, 20)), pattern(10, 10));
  });

  void test('a bounded range read ends at its bound before the session finishes', async () => {
    const cache = newCache();
    await cache.append(pattern(0, 5000));
    assert.deepEqual(await collect(cache.createReadStream(100, 4100)), pattern(100, 4000));
    // A bound beyond what exists waits for it, then ends without the session finishing.
    const pending = collect(cache.createReadStream(4000, 6000));
    assert.equal(await isSettled(pending), false);
    await cache.append(pattern(5000, 2500));
    assert.deepEqual(await pending, pattern(4000, 2000));
    assert.equal(cache.finished, false);
    // An empty window ends at once.
    assert.deepEqual(await collect(cache.createReadStream(7000, 7000)), Buffer.alloc(0));
  });

  void test('a bound beyond the final size ends at the final size', async () => {
    const cache = newCache();
    const pending = collect(cache.createReadStream(10, 1_000_000));
    await cache.append(pattern(0, 300));
    await cache.finish();
    assert.deepEqual(await pending, pattern(10, 290));
  });

  void test('waitFor resolves on append and on finish, not before', async () => {
    const cache = newCache();
    const w = cache.waitFor(100);
    assert.equal(await isSettled(w), false);
    await cache.append(pattern(0, 50));
    assert.equal(await isSettled(w), false);
    await cache.append(pattern(50, 60));
    await w;
    await cache.waitFor(110); // already satisfied
    const far = cache.waitFor(10_000);
    assert.equal(await isSettled(far), false);
    await cache.finish();
    await far;
    assert.equal(cache.finished, true);
    assert.equal(cache.size, 110);
  });

  void test('waitFor resolves on failure and rejects on abort', async () => {
    const cache = newCache();
    const onFail = cache.waitFor(1);
    cache.fail(new Error('boom'));
    await onFail;

    const other = newCache('other.mp3');
    const ac = new AbortController();
    const aborted = other.waitFor(1, ac.signal);
    ac.abort();
    await assert.rejects(aborted, { name: 'AbortError' });
    await assert.rejects(other.waitFor(1, ac.signal), { name: 'AbortError' });
  });

  void test('abort destroys the reader and closes its file descriptor', async () => {
    const cache = newCache();
    await cache.append(pattern(0, 10));
    const writerFds = fdsOn(cache.path);
    assert.equal(writerFds, 1);
    const ac = new AbortController();
    const reader = cache.createReadStream(0, null, ac.signal);
    reader.resume();
    await once(reader, 'data'); // open, then waiting for more bytes
    assert.equal(fdsOn(cache.path), writerFds + 1);
    const errored = once(reader, 'error');
    ac.abort();
    const [err] = (await errored) as [Error];
    assert.equal(err.name, 'AbortError');
    if (!reader.closed) await once(reader, 'close');
    assert.equal(fdsOn(cache.path), writerFds);

    // A consumer destroying the stream closes the descriptor too; so does a natural end.
    const r2 = cache.createReadStream(0, null);
    r2.resume();
    await once(r2, 'data');
    r2.destroy();
    await once(r2, 'close');
    assert.equal(fdsOn(cache.path), writerFds);
    await cache.finish();
    await collect(cache.createReadStream(0, null));
    assert.equal(fdsOn(cache.path), 0);
  });

  void test('an already aborted signal gives a stream that errors without reading', async () => {
    const cache = newCache();
    await cache.append(pattern(0, 10));
    const reader = cache.createReadStream(0, null, AbortSignal.abort());
    const [err] = (await once(reader, 'error')) as [Error];
    assert.equal(err.name, 'AbortError');
  });

  void test('destroy deletes the file, errors open readers and refuses appends', async () => {
    const cache = newCache();
    await cache.append(pattern(0, 100));
    const reader = cache.createReadStream(0, null);
    reader.resume();
    const errored = once(reader, 'error');
    await cache.destroy();
    const [err] = (await errored) as [Error];
    assert.match(err.message, /destroyed/);
    assert.equal(existsSync(cache.path), false);
    await assert.rejects(cache.append(pattern(0, 1)), /destroyed/);
    const late = cache.createReadStream(0, null);
    await assert.rejects(collect(late), /destroyed/);
    await cache.destroy(); // idempotent
  });

  void test('finish is idempotent and refuses later appends', async () => {
    const cache = newCache();
    await cache.append(pattern(0, 10));
    await Promise.all([cache.finish(), cache.finish()]);
    await cache.finish();
    await assert.rejects(cache.append(pattern(0, 1)), /finished/);
    cache.fail(new Error('too late')); // ignored once finished
    assert.equal(cache.failed, false);
    assert.deepEqual(await collect(cache.createReadStream(0, null)), pattern(0, 10));
  });

  void test('appends issued without awaiting are written in order', async () => {
    const cache = newCache();
    const writes: Promise<void>[] = [];
    for (let i = 0; i < 20; i++) writes.push(cache.append(pattern(i * 1000, 1000)));
    await Promise.all(writes);
    await cache.finish();
    assert.deepEqual(await collect(cache.createReadStream(0, null)), pattern(0, 20_000));
  });

  void test('rejects bad names, an existing file and bad windows', async () => {
    assert.throws(() => new FsSessionCache({ dir, name: '../x' }), TypeError);
    assert.throws(() => new FsSessionCache({ dir, name: '' }), TypeError);
    const cache = newCache('dup.mp3');
    await cache.append(pattern(0, 1));
    const dup = newCache('dup.mp3'); // opened with wx: never clobbers another build's file
    await assert.rejects(dup.append(pattern(0, 1)), { code: 'EEXIST' });
    assert.equal(dup.failed, true);
    assert.throws(() => cache.createReadStream(-1, null), RangeError);
    assert.throws(() => cache.createReadStream(10, 5), RangeError);
    assert.throws(() => cache.createReadStream(0.5, null), RangeError);
  });

  void test('resolveRangePlan waits on the cache for a closed range', async () => {
    const cache = newCache();
    const req = { method: 'GET' as const, etag: '"e"', rangeHeader: 'bytes=100-199' };
    const planned = resolveRangePlan(req, cache);
    await cache.append(pattern(0, 150));
    assert.equal(await isSettled(planned), false);
    await cache.append(pattern(150, 100));
    assert.deepEqual(await planned, {
      kind: 'partial',
      status: 206,
      etag: '"e"',
      start: 100,
      end: 199,
      total: '*',
    });
    assert.deepEqual(await collect(cache.createReadStream(100, 200)), pattern(100, 100));
  });

  void test('a paused consumer does not grow memory while 50 MiB are appended', async () => {
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const cache = newCache();
    const chunk = Buffer.allocUnsafe(MiB);
    await cache.append(pattern(0, MiB, chunk));
    const reader = cache.createReadStream(0, null);
    const iterator = reader[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    const first = await iterator.next();
    assert.equal(first.done, false);
    let received = first.value.length;

    gc();
    const before = process.memoryUsage();
    for (let i = 1; i < 50; i++) await cache.append(pattern(i * MiB, MiB, chunk));
    gc();
    const after = process.memoryUsage();
    const growth = after.heapUsed + after.arrayBuffers - (before.heapUsed + before.arrayBuffers);
    assert.ok(growth < 16 * MiB, `memory grew by ${(growth / MiB).toFixed(1)} MiB`);
    assert.ok(
      reader.readableLength <= 2 * READ_CHUNK_SIZE,
      `reader buffered ${String(reader.readableLength)} bytes`,
    );
    assert.equal(cache.produced, 50 * MiB);

    await cache.finish();
    for (;;) {
      const next = await iterator.next();
      if (next.done === true) break;
      const buf = next.value;
      for (let i = 0; i < buf.length; i += 4099) assert.equal(buf[i], (received + i) % 251);
      received += buf.length;
    }
    assert.equal(received, 50 * MiB);
  });
});
