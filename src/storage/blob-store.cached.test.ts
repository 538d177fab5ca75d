import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import type { BlobStore } from './blob-store.js';
import { CachedBlobStore } from './blob-store.cached.js';
import { FsBlobStore } from './blob-store.fs.js';

async function bytesOf(stream: Readable): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const chunk of stream) parts.push(chunk as Buffer);
  return Buffer.concat(parts);
}

function content(length: number, seed: number): Buffer {
  return Buffer.from(Array.from({ length }, (_, i) => (i * 7 + seed) % 256));
}

/** The inner store, counting the calls that would be bucket round trips. */
function counting(inner: BlobStore): BlobStore & { stats: number; reads: number } {
  const counted = {
    stats: 0,
    reads: 0,
    put: inner.put.bind(inner),
    delete: inner.delete.bind(inner),
    deletePrefix: inner.deletePrefix.bind(inner),
    stat: (key: string) => {
      counted.stats++;
      return inner.stat(key);
    },
    read: (key: string, range?: { start: number; end: number }) => {
      counted.reads++;
      return inner.read(key, range);
    },
  };
  return counted;
}

/** Waits until the background load of a blob has settled (its bytes are held). */
async function loaded(store: CachedBlobStore, bytes: number): Promise<void> {
  for (let i = 0; i < 200 && store.cachedBytes < bytes; i++) await new Promise((r) => setTimeout(r, 5));
}

describe('CachedBlobStore', () => {
  let root: string;
  let fs: FsBlobStore;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'voicegen-cached-blobs-'));
    fs = new FsBlobStore(root);
  });
  after(async () => {
    await fs.close();
    await rm(root, { recursive: true, force: true });
  });

  it('holds a blob read twice: then metadata and bytes come from memory; every range matches the store', async () => {
    const inner = counting(fs);
    const store = new CachedBlobStore(inner, { budgetBytes: 1024 * 1024 });
    const data = content(10_000, 1);
    await store.put('tasks/a/audio.mp3', data, 'audio/mpeg');
    assert.equal((await store.stat('tasks/a/audio.mp3'))?.size, 10_000);
    assert.deepEqual(await bytesOf(store.read('tasks/a/audio.mp3')), data);
    assert.equal((await store.stat('tasks/a/audio.mp3'))?.size, 10_000);
    assert.equal(inner.stats, 2, 'a cold blob: its metadata comes from the store');
    assert.deepEqual(
      await bytesOf(store.read('tasks/a/audio.mp3', { start: 10, end: 19 })),
      data.subarray(10, 20),
    );
    await loaded(store, 10_000);
    assert.equal(store.cachedBytes, 10_000);
    assert.equal((await store.stat('tasks/a/audio.mp3'))?.size, 10_000);
    assert.equal(inner.stats, 2, 'a blob held in memory: metadata without a round trip');
    const readsBefore = inner.reads;
    for (const range of [
      { start: 0, end: 0 },
      { start: 9_990, end: 20_000 },
      { start: 5_000, end: 4_999 },
      { start: 20_000, end: 30_000 },
      { start: 123, end: 4_567 },
    ]) {
      assert.deepEqual(
        await bytesOf(store.read('tasks/a/audio.mp3', range)),
        await bytesOf(fs.read('tasks/a/audio.mp3', range)),
        `range ${range.start}-${range.end}`,
      );
    }
    assert.deepEqual(await bytesOf(store.read('tasks/a/audio.mp3')), data);
    assert.equal(inner.reads, readsBefore, 'served from memory');
    // The same blob held, without a stream (finished audio answered from memory).
    const held = store.held('tasks/a/audio.mp3');
    assert.deepEqual(held?.bytes, data);
    assert.deepEqual(held?.info, await store.stat('tasks/a/audio.mp3'));
    await store.close();
  });

  it('holds no blob it has not loaded, nor one whose metadata is due for a check', async () => {
    let now = 0;
    const store = new CachedBlobStore(fs, { budgetBytes: 1024 * 1024, revalidateMs: 1000, now: () => now });
    await store.put('tasks/h/audio.mp3', content(3000, 5), 'audio/mpeg');
    assert.equal(store.held('tasks/h/audio.mp3'), undefined, 'cold');
    // As finished audio is served: metadata, then the bytes; the second read loads them.
    for (let i = 0; i < 2; i++) {
      await store.stat('tasks/h/audio.mp3');
      assert.equal(store.held('tasks/h/audio.mp3'), undefined, 'not held yet');
      await bytesOf(store.read('tasks/h/audio.mp3'));
    }
    await loaded(store, 3000);
    assert.deepEqual(store.held('tasks/h/audio.mp3')?.bytes, content(3000, 5));
    now += 1000;
    assert.equal(store.held('tasks/h/audio.mp3'), undefined, 'stale: read through');
    await store.close();
  });

  it('notices a blob written again elsewhere once its metadata is revalidated, and never serves older bytes after', async () => {
    let now = 0;
    const store = new CachedBlobStore(fs, { budgetBytes: 1024 * 1024, revalidateMs: 1000, now: () => now });
    await store.put('voices/v/lora.bin', content(4000, 1), 'application/octet-stream');
    await store.stat('voices/v/lora.bin');
    await bytesOf(store.read('voices/v/lora.bin'));
    await bytesOf(store.read('voices/v/lora.bin'));
    await loaded(store, 4000);
    // Another node writes the key again (straight to the shared store).
    const newer = content(5000, 2);
    await fs.put('voices/v/lora.bin', newer, 'application/octet-stream');
    now += 1000;
    assert.equal((await store.stat('voices/v/lora.bin'))?.size, 5000);
    assert.deepEqual(await bytesOf(store.read('voices/v/lora.bin')), newer);
    // Without a stat either: stale bytes are not served once the metadata is too old.
    await bytesOf(store.read('voices/v/lora.bin'));
    await loaded(store, 5000);
    await fs.put('voices/v/lora.bin', content(3000, 3), 'application/octet-stream');
    now += 1000;
    assert.deepEqual(await bytesOf(store.read('voices/v/lora.bin')), content(3000, 3));
    await store.close();
  });

  it('drops what it deletes, keeps held bytes within the budget and never holds a blob over the limit', async () => {
    const store = new CachedBlobStore(fs, { budgetBytes: 25_000, maxBlobBytes: 20_000 });
    for (const [key, size] of [
      ['tasks/b/1.mp3', 12_000],
      ['tasks/b/2.mp3', 12_000],
      ['tasks/b/3.mp3', 12_000],
      ['tasks/b/big.mp3', 21_000],
    ] as const) {
      await store.put(key, content(size, size), 'audio/mpeg');
      await store.stat(key);
      await bytesOf(store.read(key));
      await bytesOf(store.read(key));
      await new Promise((r) => setTimeout(r, 50));
      assert.ok(store.cachedBytes <= 25_000, `${store.cachedBytes} bytes held`);
    }
    assert.equal(store.cachedBytes, 24_000, 'the two most recent small blobs');
    await store.deletePrefix('tasks/b/');
    assert.equal(store.cachedBytes, 0);
    assert.equal(await store.stat('tasks/b/3.mp3'), undefined);
    await store.close();
  });
});
