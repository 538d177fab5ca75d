// FsBlobStore beyond the shared contract: the temporary files of writes a killed process never
// finished are removed at start, and nothing else is; the open-file cache.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { readdirSync, readlinkSync } from 'node:fs';
import { access, mkdir, mkdtemp, readdir, realpath, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { after, describe, it } from 'node:test';
import { setImmediate } from 'node:timers/promises';
import { loadConfig } from '../config/config.js';
import { openAdapters } from '../adapters.js';
import { FsBlobStore } from './blob-store.fs.js';

const dirs: string[] = [];
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'blob-store-fs-'));
  dirs.push(dir);
  return dir;
}

const exists = (path: string) =>
  access(path).then(
    () => true,
    () => false,
  );

describe('FsBlobStore partial writes', () => {
  it('removes .tmp- files left anywhere under the root, keeps every blob', async () => {
    const root = await tempDir();
    const store = new FsBlobStore(root);
    await store.put('tasks/a/audio.mp3', new Uint8Array([1, 2, 3]), 'audio/mpeg');
    await store.put('voices/v/lora.bin', new Uint8Array([4]), 'application/octet-stream');
    await writeFile(join(root, 'tasks', 'a', '.tmp-1234'), 'half a file');
    await mkdir(join(root, 'tasks', 'b', 'contents'), { recursive: true });
    await writeFile(join(root, 'tasks', 'b', 'contents', '.tmp-5678'), 'another half');

    assert.equal(await store.sweepPartialWrites(), 2);
    const left = (await readdir(root, { recursive: true })).filter((n) => n.includes('.tmp-'));
    assert.deepEqual(left, []);
    assert.equal((await store.stat('tasks/a/audio.mp3'))?.size, 3);
    assert.equal((await store.stat('voices/v/lora.bin'))?.size, 1);
    assert.equal(await new FsBlobStore(join(root, 'absent')).sweepPartialWrites(), 0);
    await store.close();
  });

  it('a write whose body fails leaves no file behind, however early it fails', async () => {
    const root = await tempDir();
    const store = new FsBlobStore(root);
    await store.put('voices/v/lora-old.bin', new Uint8Array([1]), 'application/octet-stream');
    // Failing at once races the write stream's opening of its temporary file; later, mid-body.
    const failing = (afterChunks: number) =>
      Readable.from(
        (async function* () {
          for (let i = 0; i < afterChunks; i++) yield Buffer.alloc(64, i);
          throw new Error('the client went away');
        })(),
      );
    for (let round = 0; round < 40; round++) {
      await assert.rejects(
        store.put(`voices/v/lora-${round}.bin`, failing(round % 3), 'application/octet-stream'),
        /the client went away/,
      );
      assert.deepEqual(await readdir(join(root, 'voices', 'v')), ['lora-old.bin'], `round ${round}`);
    }
  });

  it('an embedded start sweeps them (after kill -9 mid-write)', async () => {
    const dataDir = await tempDir();
    const orphan = join(dataDir, 'blobs', 'tasks', 'x', '.tmp-orphan');
    await mkdir(join(dataDir, 'blobs', 'tasks', 'x'), { recursive: true });
    await writeFile(orphan, 'left by a killed process');
    const adapters = await openAdapters(loadConfig({ DATA_DIR: dataDir }), {
      onBackgroundError: () => undefined,
    });
    try {
      assert.equal(await exists(orphan), false);
    } finally {
      await adapters.close();
    }
  });
});

/** Descriptors this process holds on `path` (/proc/self/fd). */
function descriptorsOn(path: string): number {
  let n = 0;
  for (const fd of readdirSync('/proc/self/fd')) {
    try {
      if (readlinkSync(`/proc/self/fd/${fd}`).startsWith(path)) n++;
    } catch {
      // the descriptor used to list the directory is gone already
    }
  }
  return n;
}

async function readAll(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stream) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks);
}

describe('FsBlobStore open-file cache', () => {
  it('reuses one descriptor per blob across reads, bounded, and closes them all on close', async () => {
    const root = await realpath(await tempDir());
    const store = new FsBlobStore(root, { maxOpenFiles: 3 });
    for (const name of ['a', 'b', 'c', 'd', 'e']) {
      await store.put(`t/${name}.mp3`, new Uint8Array(200_000).fill(name.charCodeAt(0)), 'audio/mpeg');
    }
    for (let i = 0; i < 20; i++) {
      const bytes = await readAll(store.read('t/a.mp3', { start: i * 1000, end: i * 1000 + 65_535 }));
      assert.equal(bytes.length, 65_536);
      assert.equal((await store.stat('t/a.mp3'))?.size, 200_000);
    }
    assert.equal(descriptorsOn(join(root, 't/a.mp3')), 1, 'one descriptor for 20 reads and stats');
    for (const name of ['b', 'c', 'd', 'e']) await readAll(store.read(`t/${name}.mp3`));
    await setImmediate();
    assert.equal(await store.openFileCount(), 3, 'at most maxOpenFiles kept');
    assert.ok(descriptorsOn(root) <= 3, `${descriptorsOn(root)} descriptors under the root`);
    await store.close();
    assert.equal(descriptorsOn(root), 0, 'none after close');
  });

  it('never serves a replaced or deleted blob from the cache', async () => {
    const root = await tempDir();
    const store = new FsBlobStore(root);
    await store.put('t/x/audio.mp3', new Uint8Array([1, 1, 1]), 'audio/mpeg');
    const first = await store.stat('t/x/audio.mp3');
    assert.deepEqual([...(await readAll(store.read('t/x/audio.mp3')))], [1, 1, 1]);
    await store.put('t/x/audio.mp3', new Uint8Array([2, 2]), 'audio/mpeg');
    const second = await store.stat('t/x/audio.mp3');
    assert.equal(second?.size, 2);
    assert.notEqual(second?.etag, first?.etag);
    assert.deepEqual([...(await readAll(store.read('t/x/audio.mp3')))], [2, 2]);
    await store.delete('t/x/audio.mp3');
    assert.equal(await store.stat('t/x/audio.mp3'), undefined);
    await store.put('t/y/audio.mp3', new Uint8Array([3]), 'audio/mpeg');
    assert.equal((await store.stat('t/y/audio.mp3'))?.size, 1);
    await store.deletePrefix('t/y/');
    assert.equal(await store.stat('t/y/audio.mp3'), undefined);
    await assert.rejects(readAll(store.read('t/y/audio.mp3')), { code: 'ENOENT' });
    await store.close();
  });

  it('a reader holding a blob while it is deleted reads it to the end', async () => {
    const root = await tempDir();
    const store = new FsBlobStore(root);
    const size = 1_000_000;
    await store.put('t/z/audio.mp3', new Uint8Array(size).fill(7), 'audio/mpeg');
    const reader = store.read('t/z/audio.mp3');
    const [first] = (await once(reader, 'data')) as [Buffer];
    reader.pause();
    await store.delete('t/z/audio.mp3');
    const rest = await readAll(reader);
    assert.equal(first.length + rest.length, size);
    await store.close();
  });
});
