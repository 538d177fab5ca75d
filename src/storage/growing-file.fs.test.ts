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
  DEFAULT_SHARED_BLOCK_BYTES,
  DEFAULT_TAIL_BYTES,
  FsGrowingFile,
  READ_CHUNK_SIZE,
  type FsGrowingFileOptions,
} from './growing-file.fs.js';
import { MemoryTail } from './memory-tail.js';
import { resolveRangePlan } from '../stream/range-plan.js';
import { isSettled } from '../../test/helpers/settled.js';

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

/** Number of this process's descriptors open on `path`, deleted or not (Linux /proc). */
function fdsOn(path: string): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`);
      if (target === path || target === `${path} (deleted)`) n++;
    } catch {
      // the descriptor used to list the directory is gone already
    }
  }
  return n;
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
let caches: FsGrowingFile[];
function newCache(name = 'session.mp3', options: FsGrowingFileOptions = {}): FsGrowingFile {
  const cache = new FsGrowingFile({ dir, name }, options);
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

void describe('FsGrowingFile', () => {
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
    assert.throws(() => new FsGrowingFile({ dir, name: '../x' }), TypeError);
    assert.throws(() => new FsGrowingFile({ dir, name: '' }), TypeError);
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

void describe('FsGrowingFile in-memory tail', () => {
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
    assert.ok(tail.heldBytes <= 1000, 'tail.heldBytes <= 1000');
    tail.append(mixed(1100, 10_000)); // larger than the budget: only its last slabs are copied
    assert.equal(tail.end, 11_100);
    assert.equal(tail.start, 10_250);
    assert.deepEqual(tail.view(11_000, Infinity), mixed(11_000, 100));
    assert.ok(tail.heldBytes <= 1000, 'tail.heldBytes <= 1000');
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
        /** Further readers of the same window joining with it: they share file blocks. */
        twins: fc.constantFrom(0, 0, 1, 3),
      });
      /** How readers behind the tail read: shared blocks of various budgets (0 = none kept), or per reader. */
      const fileReading = fc.constantFrom<FsGrowingFileOptions>(
        { fileReads: 'shared' },
        { fileReads: 'shared', sharedBlockBytes: 0 },
        { fileReads: 'shared', sharedBlockBytes: 1000 },
        { fileReads: 'shared', sharedBlockBytes: READ_CHUNK_SIZE },
        { fileReads: 'shared', sharedBlockBytes: 2 * READ_CHUNK_SIZE + 5000 },
        { fileReads: 'per-reader' },
      );
      await fc.assert(
        fc.asyncProperty(
          fc.integer({ min: 0, max: 5000 }),
          fileReading,
          // Up to 30 chunks of up to 20,000 bytes: several 64 KiB file blocks, the last one growing.
          fc.array(fc.nat({ max: 20_000 }), { minLength: 1, maxLength: 30 }),
          fc.array(readerPlan, { maxLength: 10 }),
          fc.constantFrom('finish', 'fail', 'destroy'),
          async (tailBytes, reading, chunkSizes, plans, ending) => {
            const cache = newCache(`run-${String(run++)}.bin`, { tailBytes, ...reading });
            const blockBudget = reading.sharedBlockBytes ?? DEFAULT_SHARED_BLOCK_BYTES;
            const readers: {
              start: number;
              end: number | null;
              slow: boolean;
              stream: Readable;
              outcome: Promise<ReadOutcome>;
            }[] = [];
            const join = (index: number): void => {
              for (const plan of plans) {
                if (Math.min(plan.joinAfter, chunkSizes.length - 1) !== index) continue;
                const start = Math.max(0, cache.produced + plan.fromProduced);
                const end = plan.length === null ? null : start + plan.length;
                for (let twin = 0; twin <= plan.twins; twin++) {
                  const stream = cache.createReadStream(start, end);
                  const slow = plan.turnsPerChunk > 0;
                  readers.push({ start, end, slow, stream, outcome: readAll(stream, plan.turnsPerChunk) });
                }
              }
            };
            let produced = 0;
            for (const [index, size] of chunkSizes.entries()) {
              join(index);
              await cache.append(mixed(produced, size));
              produced += size;
              assert.ok(cache.tailHeldBytes <= tailBytes, 'cache.tailHeldBytes <= tailBytes');
              assert.ok(
                cache.sharedBlockHeldBytes <= blockBudget,
                'cache.sharedBlockHeldBytes <= blockBudget',
              );
              await nextTurn(); // let readers take some file blocks between appends
              assert.ok(
                cache.sharedBlockHeldBytes <= blockBudget,
                'cache.sharedBlockHeldBytes <= blockBudget',
              );
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
              // An empty window (end <= start) has nothing to wait for: it ends at once, wherever it starts.
              const complete = end !== null && (end <= produced || end <= start);
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
            // No descriptor outlives its readers and the cache, in any mode.
            for (const { stream } of readers) if (!stream.closed) await once(stream, 'close');
            await cache.destroy();
            assert.equal(fdsOn(cache.path), 0);
            assert.equal(cache.sharedBlockHeldBytes, 0);
          },
        ),
        // A failure stops shrinking after the time limit, so it reports within the test timeout.
        { numRuns: 250, interruptAfterTimeLimit: 90_000, markInterruptAsFailure: true },
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
    assert.ok(await take(), 'await take()');
    assert.equal(fdsOn(cache.path), 1); // the writer's only: the first bytes came from memory

    let produced = 10_000;
    while (produced < MiB) {
      await cache.append(mixed(produced, 4096));
      produced += 4096;
    }
    const position = received.reduce((n, b) => n + b.length, 0);
    assert.ok(cache.tailStart > position + READ_CHUNK_SIZE, 'the reader is behind the tail');
    assert.ok(cache.tailHeldBytes <= 64 * 1024, 'cache.tailHeldBytes <= 64 * 1024');
    // The stream buffered up to one chunk from memory before it paused; then it reads the file.
    while (fdsOn(cache.path) === 1 && received.length < 10) assert.ok(await take(), 'await take()');
    assert.equal(fdsOn(cache.path), 2);
    while (received.reduce((n, b) => n + b.length, 0) < produced) assert.ok(await take(), 'await take()');
    // Caught up: asking for more waits at the live edge, where the reader closes its descriptor.
    const more = take();
    await eventually(() => fdsOn(cache.path) === 1, 'the reader to close its descriptor');
    await cache.append(mixed(produced, 100));
    produced += 100;
    assert.ok(await more, 'await more');
    assert.equal(fdsOn(cache.path), 1);
    await cache.finish();
    while (await take());
    assert.ok(
      Buffer.concat(received).equals(mixed(0, produced)),
      'Buffer.concat(received).equals(mixed(0, produced))',
    );
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
          assert.ok(cache.tailStart > 0, 'cache.tailStart > 0');
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
      assert.ok(
        outcome.bytes.equals(mixed(start, 5500 - start)),
        'outcome.bytes.equals(mixed(start, 5500 - start))',
      );
    }
    // The tail served them (no read descriptor); fail() closes the writer without waiting for it.
    await eventually(() => fdsOn(failing.path) === 0, 'the writer to close');
    // A reader created after the failure still gets the written bytes from memory, then the error.
    const late = await readAll(failing.createReadStream(5400, null));
    assert.ok(late.bytes.equals(mixed(5400, 100)), 'late.bytes.equals(mixed(5400, 100))');
    assert.equal(late.error?.message, 'engine crashed');

    const destroyed = newCache('destroyed.bin');
    await destroyed.append(mixed(0, 5000));
    const reader = destroyed.createReadStream(0, null);
    const outcome = readAll(reader);
    await nextTurn();
    await destroyed.destroy();
    const { bytes, error } = await outcome;
    assert.match(error?.message ?? '', /destroyed/);
    assert.ok(bytes.equals(mixed(0, bytes.length)), 'bytes.equals(mixed(0, bytes.length))');
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
    assert.ok(
      (await collect(cache.createReadStream(0, null))).equals(mixed(0, 1000)),
      '(await collect(cache.createReadStream(0, null))).equals(mixed(0, 1000))',
    );
  });

  void test('a settled cache frees its tail when its last reader leaves; later readers use the file', async () => {
    const cache = newCache();
    await cache.append(mixed(0, 300_000));
    assert.ok(
      cache.tailHeldBytes > 0 && cache.tailHeldBytes <= DEFAULT_TAIL_BYTES,
      'cache.tailHeldBytes > 0 && cache.tailHeldBytes <= DEFAULT_TAIL_BYTES',
    );
    const reader = cache.createReadStream(0, null);
    const outcome = readAll(reader, 1);
    await cache.finish();
    assert.ok(cache.tailHeldBytes > 0, 'kept while a reader remains');
    assert.ok(
      (await outcome).bytes.equals(mixed(0, 300_000)),
      '(await outcome).bytes.equals(mixed(0, 300_000))',
    );
    if (!reader.closed) await once(reader, 'close');
    assert.equal(cache.tailHeldBytes, 0);
    assert.ok(
      (await collect(cache.createReadStream(123, null))).equals(mixed(123, 300_000 - 123)),
      '(await collect(cache.createReadStream(123, null))).equals(mixed(123, 300_000 - 123))',
    );
  });
});

void describe('FsGrowingFile shared file reads', () => {
  void test('readers at the same block share one read and get views of the same buffer', async () => {
    const blocks = 10;
    const size = blocks * READ_CHUNK_SIZE - 1000; // the last block is partial
    const cache = newCache('same-block.bin', { tailBytes: 0 });
    await cache.append(mixed(0, size));
    await cache.finish();
    const readers = Array.from({ length: 100 }, (_, i) => cache.createReadStream(i % 7, null));
    const firstChunks = readers.map(async (stream) => (await once(stream, 'data'))[0] as Buffer);
    const outcomes = readers.map((stream) => readAll(stream));
    const first = await Promise.all(firstChunks);
    // Zero-copy: every first chunk is a view of one buffer, read once for all of them.
    for (const chunk of first) assert.equal(chunk.buffer, first[0]?.buffer);
    for (const [i, { bytes, error }] of (await Promise.all(outcomes)).entries()) {
      assert.equal(error, null);
      assert.ok(bytes.equals(mixed(i % 7, size - (i % 7))), `reader ${String(i)}`);
    }
    // Every block read once: the map (1 MiB) holds the whole file, so even stragglers share.
    assert.equal(cache.fileReadCount, blocks);
    for (const stream of readers) if (!stream.closed) await once(stream, 'close');
    assert.equal(cache.sharedBlockHeldBytes, 0, 'no reader reads the file: the blocks are freed');
    assert.equal(fdsOn(cache.path), 0, 'and the shared descriptor is closed');

    // A later reader reads again, through a new descriptor; a tiny budget keeps nothing for it.
    const lru = newCache('lru.bin', { tailBytes: 0, sharedBlockBytes: 2 * READ_CHUNK_SIZE });
    await lru.append(mixed(0, size));
    await lru.finish();
    const slow = lru.createReadStream(0, null);
    const slowOutcome = readAll(slow, 2);
    const fast = await readAll(lru.createReadStream(0, null));
    assert.ok(fast.bytes.equals(mixed(0, size)), 'fast.bytes.equals(mixed(0, size))');
    assert.ok(
      lru.sharedBlockHeldBytes <= 2 * READ_CHUNK_SIZE,
      'lru.sharedBlockHeldBytes <= 2 * READ_CHUNK_SIZE',
    );
    assert.ok(
      (await slowOutcome).bytes.equals(mixed(0, size)),
      '(await slowOutcome).bytes.equals(mixed(0, size))',
    );
    // Two readers, ten blocks: at most one read per block per reader, whatever was evicted.
    assert.ok(
      lru.fileReadCount >= blocks && lru.fileReadCount <= 2 * blocks,
      'lru.fileReadCount >= blocks && lru.fileReadCount <= 2 * blocks',
    );
  });

  void test('readers behind the tail share one descriptor, closed when the last one reaches the live edge', async () => {
    const cache = newCache('one-fd.bin', { tailBytes: 64 * 1024 });
    await cache.append(mixed(0, 20 * READ_CHUNK_SIZE));
    assert.equal(fdsOn(cache.path), 1); // the writer's
    const iterators = [0, 5 * READ_CHUNK_SIZE + 3, 9 * READ_CHUNK_SIZE].map(
      (start) => cache.createReadStream(start, null)[Symbol.asyncIterator]() as AsyncIterator<Buffer>,
    );
    const received = iterators.map(() => [] as Buffer[]);
    const take = async (i: number): Promise<boolean> => {
      const next = await (iterators[i] as AsyncIterator<Buffer>).next();
      if (next.done === true) return false;
      received[i]?.push(Buffer.from(next.value));
      return true;
    };
    for (let i = 0; i < iterators.length; i++) assert.ok(await take(i), 'await take(i)');
    assert.equal(fdsOn(cache.path), 2, 'three readers behind the tail, one read descriptor');
    // The third reader catches up and waits at the live edge; the others still need the file.
    const ahead = cache.produced - 9 * READ_CHUNK_SIZE;
    while ((received[2] ?? []).reduce((n, b) => n + b.length, 0) < ahead)
      assert.ok(await take(2), 'await take(2)');
    const waiting = take(2);
    assert.equal(await isSettled(waiting), false);
    assert.equal(fdsOn(cache.path), 2);
    // The other two catch up too: nobody needs the file any more, the descriptor closes.
    const produced = cache.produced;
    const behind = [0, 5 * READ_CHUNK_SIZE + 3];
    const pending: Promise<boolean>[] = [];
    for (const i of [0, 1]) {
      while ((received[i] ?? []).reduce((n, b) => n + b.length, 0) < produced - (behind[i] ?? 0))
        assert.ok(await take(i), 'await take(i)');
      pending.push(take(i));
    }
    await eventually(() => fdsOn(cache.path) === 1, 'the shared descriptor to close');
    assert.equal(cache.sharedBlockHeldBytes, 0);
    await cache.append(mixed(produced, 100));
    assert.ok(await waiting, 'await waiting');
    for (const more of pending) assert.ok(await more, 'await more');
    assert.equal(fdsOn(cache.path), 1, 'the new bytes came from the tail');
    await cache.finish();
    for (let i = 0; i < iterators.length; i++) while (await take(i));
    for (const [i, start] of [0, 5 * READ_CHUNK_SIZE + 3, 9 * READ_CHUNK_SIZE].entries())
      assert.ok(
        Buffer.concat(received[i] ?? []).equals(mixed(start, produced + 100 - start)),
        'Buffer.concat(received[i] ?? []).equals(mixed(start, produced + 100 - start))',
      );
  });

  void test('destroy closes the shared descriptor under readers behind the tail; fail truncates them', async () => {
    const destroyed = newCache('destroy-shared.bin', { tailBytes: 64 * 1024 });
    await destroyed.append(mixed(0, 40 * READ_CHUNK_SIZE));
    const streams = Array.from({ length: 20 }, () => destroyed.createReadStream(0, null));
    const outcomes = streams.map((stream) => readAll(stream, 1));
    await once(streams[0] as Readable, 'data');
    assert.equal(fdsOn(destroyed.path), 2);
    await destroyed.destroy();
    for (const { bytes, error } of await Promise.all(outcomes)) {
      assert.match(error?.message ?? '', /destroyed/);
      assert.ok(bytes.equals(mixed(0, bytes.length)), 'bytes.equals(mixed(0, bytes.length))');
    }
    for (const stream of streams) if (!stream.closed) await once(stream, 'close');
    assert.equal(fdsOn(destroyed.path), 0);
    assert.equal(destroyed.sharedBlockHeldBytes, 0);

    const failing = newCache('fail-shared.bin', { tailBytes: 64 * 1024 });
    await failing.append(mixed(0, 10 * READ_CHUNK_SIZE));
    failing.fail(new Error('engine crashed'));
    const ac = new AbortController();
    const aborted = failing.createReadStream(0, null, ac.signal);
    const abortedError = once(aborted, 'error');
    aborted.once('data', () => ac.abort());
    const late = await Promise.all(
      Array.from({ length: 10 }, () => readAll(failing.createReadStream(0, null))),
    );
    for (const { bytes, error } of late) {
      assert.equal(error?.message, 'engine crashed');
      assert.ok(bytes.equals(mixed(0, 10 * READ_CHUNK_SIZE)), 'every written byte, then the error');
    }
    const [abortError] = (await abortedError) as [Error];
    assert.equal(abortError.name, 'AbortError');
    if (!aborted.closed) await once(aborted, 'close');
    await eventually(() => fdsOn(failing.path) === 0, 'the descriptors to close');
  });

  void test(
    '1,000 readers joining an old session at byte 0 share one descriptor and read each block about once',
    { timeout: 120_000 },
    async () => {
      const readerCount = 1000;
      const tailBytes = 256 * 1024;
      const history = 6 * MiB; // all but the newest 256 KiB is behind the tail when they join
      const live = 40 * 4096; // appended while they read
      const total = history + live;
      const content = mixed(0, total);
      const fdsBefore = openFds();
      const cache = newCache('old-session.bin', { tailBytes });
      for (let produced = 0; produced < history; produced += 100_000)
        await cache.append(content.subarray(produced, Math.min(history, produced + 100_000)));
      assert.ok(cache.tailStart > history - tailBytes - READ_CHUNK_SIZE, 'most of it left the tail');
      assert.equal(cache.fileReadCount, 0);

      let maxFds = openFds();
      let maxBlockBytes = 0;
      let events = 0;
      const sample = (): void => {
        maxFds = Math.max(maxFds, openFds());
        maxBlockBytes = Math.max(maxBlockBytes, cache.sharedBlockHeldBytes);
      };
      const followers = Array.from({ length: readerCount }, () => {
        const stream = cache.createReadStream(0, null);
        const follower = { stream, received: 0, mismatches: 0, ended: once(stream, 'end') };
        stream.on('data', (chunk: Buffer) => {
          const at = follower.received;
          if (!chunk.equals(content.subarray(at, at + chunk.length))) follower.mismatches++;
          follower.received += chunk.length;
          if (++events % 1000 === 0) sample();
        });
        return follower;
      });
      for (let produced = history; produced < total; produced += 4096) {
        await cache.append(content.subarray(produced, produced + 4096));
        sample();
        await nextTurn();
      }
      await cache.finish();
      await Promise.all(followers.map((f) => f.ended));
      for (const { stream } of followers) if (!stream.closed) await once(stream, 'close');
      for (const [i, f] of followers.entries()) {
        assert.equal(f.received, total, `reader ${String(i)}`);
        assert.equal(f.mismatches, 0, `reader ${String(i)}`);
      }
      // One shared read descriptor (plus the writer's and a few of the runtime's), never one per reader.
      assert.ok(maxFds - fdsBefore <= 4, `open descriptors grew by ${String(maxFds - fdsBefore)}`);
      assert.ok(maxBlockBytes <= DEFAULT_SHARED_BLOCK_BYTES, 'maxBlockBytes <= DEFAULT_SHARED_BLOCK_BYTES');
      // The file part is ~94 blocks; per-reader reads would be ~94,000. Shared: about one per block.
      const fileBlocks = Math.ceil(history / READ_CHUNK_SIZE);
      assert.ok(
        cache.fileReadCount <= 2 * fileBlocks,
        `${String(cache.fileReadCount)} file reads for ${String(fileBlocks)} blocks and ${String(readerCount)} readers`,
      );
      assert.equal(cache.sharedBlockHeldBytes, 0);
      assert.equal(fdsOn(cache.path), 0);
    },
  );

  void test('per-reader mode: each reader reads every block itself through its own descriptor', async () => {
    const blocks = 8;
    const cache = newCache('per-reader.bin', { tailBytes: 0, fileReads: 'per-reader' });
    await cache.append(mixed(0, blocks * READ_CHUNK_SIZE));
    const streams = Array.from({ length: 20 }, () => cache.createReadStream(0, null));
    const firstChunks = streams.map(async (stream) => (await once(stream, 'data'))[0] as Buffer);
    const outcomes = streams.map((stream) => readAll(stream));
    const first = await Promise.all(firstChunks);
    // Each holds its descriptor until it ends (no tail: the next bytes come from the file too).
    assert.equal(fdsOn(cache.path), 1 + streams.length);
    assert.notEqual(first[0]?.buffer, first[1]?.buffer);
    await cache.finish();
    for (const { bytes, error } of await Promise.all(outcomes)) {
      assert.equal(error, null);
      assert.ok(
        bytes.equals(mixed(0, blocks * READ_CHUNK_SIZE)),
        'bytes.equals(mixed(0, blocks * READ_CHUNK_SIZE))',
      );
    }
    assert.ok(
      cache.fileReadCount >= streams.length * blocks,
      'cache.fileReadCount >= streams.length * blocks',
    );
    for (const stream of streams) if (!stream.closed) await once(stream, 'close');
    assert.equal(fdsOn(cache.path), 0);
  });
});
