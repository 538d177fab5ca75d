import { afterEach, beforeEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readlinkSync } from 'node:fs';
import { mkdtemp, realpath, rm } from 'node:fs/promises';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import fc from 'fast-check';
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises';
import v8 from 'node:v8';
import vm from 'node:vm';
import {
  DEFAULT_TAIL_BYTES,
  FsSessionCache,
  READ_CHUNK_SIZE,
  type FsSessionCacheOptions,
} from './session-cache.fs.js';
import { MemoryTail } from './memory-tail.js';
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

/**
 * Memory after a full GC. V8 frees the backing stores of dead ArrayBuffers (the tail slabs that
 * dropped off) in a sweep after the GC, so a second GC after a turn of the event loop is needed
 * before `arrayBuffers` stops counting buffers that are already garbage.
 */
async function settledMemory(gc: () => void): Promise<NodeJS.MemoryUsage> {
  gc();
  await nextTurn();
  gc();
  return process.memoryUsage();
}

let dir: string;
let caches: FsSessionCache[];
function newCache(name = 'session.mp3', options: FsSessionCacheOptions = {}): FsSessionCache {
  const cache = new FsSessionCache({ dir, name }, options);
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

  void test('abort destroys the reader and closes its file descriptor (file-only cache)', async () => {
    const cache = newCache('session.mp3', { tailBytes: 0 });
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

    const before = await settledMemory(gc);
    for (let i = 1; i < 50; i++) await cache.append(pattern(i * MiB, MiB, chunk));
    const after = await settledMemory(gc);
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

/** Aperiodic deterministic content (a hash of the offset), so a view of the wrong slab cannot match by chance. */
function mixed(offset: number, length: number): Buffer {
  const buf = Buffer.allocUnsafe(length);
  for (let i = 0; i < length; i++) {
    const o = offset + i;
    buf[i] = Math.imul(o ^ (o >>> 13), 0x5bd1e995) >>> 24;
  }
  return buf;
}

/** Open descriptors of this process (Linux /proc). */
function openFds(): number {
  return readdirSync('/proc/self/fd').length;
}

/** Waits (bounded: 5 s) for a condition that an asynchronous close or read makes true. */
async function eventually(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5000;
  while (!condition()) {
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(5);
  }
}

interface ReadOutcome {
  bytes: Buffer;
  error: Error | null;
}

/**
 * Reads a stream to its end or error in flowing mode (an async iterator would drop buffered bytes
 * on error), optionally pausing for some event-loop turns after each chunk (a slow consumer).
 */
function readAll(stream: Readable, turnsPerChunk = 0): Promise<ReadOutcome> {
  const chunks: Buffer[] = [];
  return new Promise((resolve) => {
    stream.on('data', (chunk: Buffer) => {
      chunks.push(Buffer.from(chunk)); // a copy: views of the tail are shared
      if (turnsPerChunk === 0) return;
      stream.pause();
      void (async () => {
        for (let i = 0; i < turnsPerChunk; i++) await nextTurn();
        stream.resume();
      })();
    });
    stream.once('end', () => resolve({ bytes: Buffer.concat(chunks), error: null }));
    stream.once('error', (error) => resolve({ bytes: Buffer.concat(chunks), error }));
  });
}

void describe('FsSessionCache in-memory tail', () => {
  void test('the tail keeps the newest bytes within its budget, whatever the chunk sizes', () => {
    const tail = new MemoryTail(1000); // slabs of 250 bytes, at most 4
    assert.equal(tail.slabSize, 250);
    tail.append(mixed(0, 100));
    assert.equal(tail.start, 0);
    assert.deepEqual(tail.view(10, Infinity), mixed(10, 90));
    assert.deepEqual(tail.view(10, 50), mixed(10, 40));
    assert.equal(tail.view(100, Infinity), null); // not appended yet
    tail.append(mixed(100, 1000)); // 1100 bytes: slabs 1..4 stay, slab 0 dropped
    assert.equal(tail.start, 250);
    assert.equal(tail.end, 1100);
    assert.equal(tail.view(249, Infinity), null);
    assert.deepEqual(tail.view(260, Infinity), mixed(260, 240)); // to the end of its slab
    assert.ok(tail.heldBytes <= 1000);
    tail.append(mixed(1100, 10_000)); // larger than the budget: only its last slabs are copied
    assert.equal(tail.end, 11_100);
    assert.equal(tail.start, 10_250);
    assert.deepEqual(tail.view(11_000, Infinity), mixed(11_000, 100));
    assert.ok(tail.heldBytes <= 1000);
    tail.clear();
    assert.equal(tail.start, 11_100);
    assert.equal(tail.heldBytes, 0);
    tail.append(mixed(11_100, 30)); // mid-slab after a clear
    assert.equal(tail.start, 11_100);
    assert.deepEqual(tail.view(11_100, Infinity), mixed(11_100, 30));

    const none = new MemoryTail(0);
    none.append(mixed(0, 100));
    assert.equal(none.start, 100);
    assert.equal(none.view(0, Infinity), null);
    assert.throws(() => new MemoryTail(-1), RangeError);
  });

  void test(
    'byte-exact reads at random offsets inside and outside the tail while random chunks are appended',
    { timeout: 120_000 },
    async () => {
      let run = 0;
      const readerPlan = fc.record({
        joinAfter: fc.nat({ max: 30 }),
        /** Start relative to `produced` when the reader joins: negative = already written (tail or file). */
        fromProduced: fc.integer({ min: -12_000, max: 3000 }),
        length: fc.option(fc.nat({ max: 9000 }), { nil: null }),
        turnsPerChunk: fc.constantFrom(0, 0, 1, 4),
      });
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 1, max: 5000 }),
          fc.array(fc.nat({ max: 7000 }), { minLength: 1, maxLength: 30 }),
          fc.array(readerPlan, { maxLength: 10 }),
          fc.constantFrom('finish', 'fail', 'destroy'),
          async (tailBytes, chunkSizes, plans, ending) => {
            const cache = newCache(`run-${String(run++)}.bin`, { tailBytes });
            const readers: {
              start: number;
              end: number | null;
              slow: boolean;
              outcome: Promise<ReadOutcome>;
            }[] = [];
            const join = (index: number): void => {
              for (const plan of plans) {
                if (Math.min(plan.joinAfter, chunkSizes.length - 1) !== index) continue;
                const start = Math.max(0, cache.produced + plan.fromProduced);
                const end = plan.length === null ? null : start + plan.length;
                const stream = cache.createReadStream(start, end);
                const slow = plan.turnsPerChunk > 0;
                readers.push({ start, end, slow, outcome: readAll(stream, plan.turnsPerChunk) });
              }
            };
            let produced = 0;
            for (const [index, size] of chunkSizes.entries()) {
              join(index);
              await cache.append(mixed(produced, size));
              produced += size;
              assert.ok(cache.tailHeldBytes <= tailBytes);
            }
            switch (ending) {
              case 'finish':
                await cache.finish();
                break;
              case 'fail':
                cache.fail(new Error('producer failed'));
                break;
              case 'destroy':
                await cache.destroy();
                break;
            }
            for (const { start, end, slow, outcome } of readers) {
              const { bytes, error } = await outcome;
              const stop = Math.min(end ?? Infinity, produced);
              const expected = mixed(start, Math.max(0, stop - start));
              const label = `reader ${String(start)}-${String(end)} of ${String(produced)}, ${ending}`;
              const complete = end !== null && end <= produced;
              if (ending === 'finish' || (ending === 'fail' && complete)) {
                assert.equal(error, null, label);
                assert.ok(bytes.equals(expected), label);
              } else if (ending === 'fail') {
                // Truncated: the bytes, then the error (a paused consumer loses what it had not taken).
                assert.equal(error?.message, 'producer failed', label);
                if (slow) assert.ok(bytes.equals(expected.subarray(0, bytes.length)), label);
                else assert.ok(bytes.equals(expected), label);
              } else {
                // destroy cuts readers wherever they are: what they got is a prefix, then the error.
                assert.ok(bytes.equals(expected.subarray(0, bytes.length)), label);
                if (error === null) assert.ok(complete && bytes.length === expected.length, label);
                else assert.match(error.message, /destroyed/, label);
              }
            }
            await cache.destroy();
          },
        ),
        { numRuns: 200 },
      );
    },
  );

  void test('a reader that falls behind the tail continues from the file, then drops its descriptor at the live edge', async () => {
    const cache = newCache('behind.bin', { tailBytes: 64 * 1024 });
    await cache.append(mixed(0, 10_000));
    const reader = cache.createReadStream(0, null);
    const iterator = reader[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
    const received: Buffer[] = [];
    const take = async (): Promise<boolean> => {
      const next = await iterator.next();
      if (next.done === true) return false;
      received.push(Buffer.from(next.value));
      return true;
    };
    assert.ok(await take());
    assert.equal(fdsOn(cache.path), 1); // the writer's only: the first bytes came from memory

    let produced = 10_000;
    while (produced < MiB) {
      await cache.append(mixed(produced, 4096));
      produced += 4096;
    }
    const position = received.reduce((n, b) => n + b.length, 0);
    assert.ok(cache.tailStart > position + READ_CHUNK_SIZE, 'the reader is behind the tail');
    assert.ok(cache.tailHeldBytes <= 64 * 1024);
    // The stream buffered up to one chunk from memory before it paused; then it reads the file.
    while (fdsOn(cache.path) === 1 && received.length < 10) assert.ok(await take());
    assert.equal(fdsOn(cache.path), 2);
    while (received.reduce((n, b) => n + b.length, 0) < produced) assert.ok(await take());
    // Caught up: asking for more waits at the live edge, where the reader closes its descriptor.
    const more = take();
    await eventually(() => fdsOn(cache.path) === 1, 'the reader to close its descriptor');
    await cache.append(mixed(produced, 100));
    produced += 100;
    assert.ok(await more);
    assert.equal(fdsOn(cache.path), 1);
    await cache.finish();
    while (await take());
    assert.ok(Buffer.concat(received).equals(mixed(0, produced)));
  });

  void test(
    '1,000 concurrent readers of one growing cache get identical bytes and hold no descriptors',
    { timeout: 120_000 },
    async () => {
      const readerCount = 1000;
      const fdsBefore = openFds();
      let maxFds = fdsBefore;
      // Every chunk fits the tail's guaranteed history (budget minus one slab), so a reader that has
      // all bytes before an append finds the new ones in memory.
      const cache = newCache('many.bin', { tailBytes: 256 * 1024 });
      const sizes = [1, 4096, 417, 65_536, 30_000, 12_345, 3, 150_000, 1044, 20_000];
      const rounds = 10;
      const total = rounds * sizes.reduce((a, b) => a + b, 0);
      const content = mixed(0, total);
      interface Follower {
        start: number;
        received: number;
        /** Chunks that differed from the content at their offset. */
        mismatches: number;
        ended: Promise<void>;
      }
      const followers: Follower[] = [];
      // Barrier: every follower has received everything up to `target`.
      let target = 0;
      let behind = 0;
      let allCaughtUp: () => void = () => undefined;
      let events = 0;
      const follow = (start: number): void => {
        const stream = cache.createReadStream(start, null);
        const follower: Follower = {
          start,
          received: start,
          mismatches: 0,
          ended: once(stream, 'end').then(() => undefined),
        };
        stream.on('data', (chunk: Buffer) => {
          const before = follower.received;
          if (!chunk.equals(content.subarray(before, before + chunk.length))) follower.mismatches++;
          follower.received += chunk.length;
          if (before < target && follower.received >= target && --behind === 0) allCaughtUp();
          if (++events % 500 === 0) maxFds = Math.max(maxFds, openFds());
        });
        followers.push(follower);
      };
      /** Waits (bounded) until every follower has all produced bytes, so none falls behind the tail. */
      const catchUp = async (): Promise<void> => {
        target = cache.produced;
        behind = followers.filter((f) => f.received < target).length;
        if (behind === 0) return;
        const done = new Promise<void>((resolve) => (allCaughtUp = resolve));
        const deadline = sleep(30_000, undefined, { ref: false }).then(() => 'late' as const);
        assert.notEqual(await Promise.race([done, deadline]), 'late', 'readers did not catch up');
      };

      for (let i = 0; i < readerCount / 2; i++) follow(0);
      let produced = 0;
      for (let round = 0; round < rounds; round++) {
        if (round === rounds / 2) {
          // Late joiners start inside the tail, well after its front dropped off.
          assert.ok(cache.tailStart > 0);
          for (let i = 0; i < readerCount / 2; i++) follow(cache.tailStart + i);
        }
        for (const size of sizes) {
          await cache.append(mixed(produced, size));
          produced += size;
          maxFds = Math.max(maxFds, openFds());
          await catchUp();
        }
      }
      await cache.finish();
      await Promise.all(followers.map((f) => f.ended));
      assert.equal(produced, total);
      assert.ok(produced > 8 * 256 * 1024, 'the tail dropped most of the session');
      for (const f of followers) {
        assert.equal(f.received, produced);
        assert.equal(f.mismatches, 0);
      }
      // The writer's descriptor and a few of the runtime's own; never one per reader.
      assert.ok(maxFds - fdsBefore <= 4, `open descriptors grew by ${String(maxFds - fdsBefore)}`);
    },
  );

  void test('a failing or destroyed cache truncates readers served from the tail', async () => {
    const failing = newCache('failing.bin');
    await failing.append(mixed(0, 5000));
    const live = readAll(failing.createReadStream(1000, null));
    const bounded = readAll(failing.createReadStream(4000, 6000));
    await nextTurn();
    await failing.append(mixed(5000, 500));
    failing.fail(new Error('engine crashed'));
    for (const [outcome, start] of [
      [await live, 1000],
      [await bounded, 4000],
    ] as const) {
      assert.equal(outcome.error?.message, 'engine crashed');
      assert.ok(outcome.bytes.equals(mixed(start, 5500 - start)));
    }
    assert.equal(fdsOn(failing.path), 0); // the tail served them; the writer is closed
    // A reader created after the failure still gets the written bytes from memory, then the error.
    const late = await readAll(failing.createReadStream(5400, null));
    assert.ok(late.bytes.equals(mixed(5400, 100)));
    assert.equal(late.error?.message, 'engine crashed');

    const destroyed = newCache('destroyed.bin');
    await destroyed.append(mixed(0, 5000));
    const reader = destroyed.createReadStream(0, null);
    const outcome = readAll(reader);
    await nextTurn();
    await destroyed.destroy();
    const { bytes, error } = await outcome;
    assert.match(error?.message ?? '', /destroyed/);
    assert.ok(bytes.equals(mixed(0, bytes.length)));
    assert.equal(destroyed.tailHeldBytes, 0);
    assert.match((await readAll(destroyed.createReadStream(0, null))).error?.message ?? '', /destroyed/);
  });

  void test('readers at the live edge hold no descriptor; abort and destroy still end them', async () => {
    const cache = newCache();
    await cache.append(mixed(0, 10));
    const ac = new AbortController();
    const reader = cache.createReadStream(0, null, ac.signal);
    reader.resume();
    await once(reader, 'data');
    assert.equal(fdsOn(cache.path), 1); // the writer's only
    const errored = once(reader, 'error');
    ac.abort();
    const [err] = (await errored) as [Error];
    assert.equal(err.name, 'AbortError');
    if (!reader.closed) await once(reader, 'close');
    await cache.finish();
    assert.equal(fdsOn(cache.path), 0);
  });

  void test('the tail is a copy: a producer may reuse its buffer once append resolved', async () => {
    const cache = newCache();
    const buffer = Buffer.from(mixed(0, 1000));
    await cache.append(buffer);
    buffer.fill(0);
    await cache.finish();
    assert.ok((await collect(cache.createReadStream(0, null))).equals(mixed(0, 1000)));
  });

  void test('a settled cache frees its tail when its last reader leaves; later readers use the file', async () => {
    const cache = newCache();
    await cache.append(mixed(0, 300_000));
    assert.ok(cache.tailHeldBytes > 0 && cache.tailHeldBytes <= DEFAULT_TAIL_BYTES);
    const reader = cache.createReadStream(0, null);
    const outcome = readAll(reader, 1);
    await cache.finish();
    assert.ok(cache.tailHeldBytes > 0, 'kept while a reader remains');
    assert.ok((await outcome).bytes.equals(mixed(0, 300_000)));
    if (!reader.closed) await once(reader, 'close');
    assert.equal(cache.tailHeldBytes, 0);
    assert.ok((await collect(cache.createReadStream(123, null))).equals(mixed(123, 300_000 - 123)));
  });
});
