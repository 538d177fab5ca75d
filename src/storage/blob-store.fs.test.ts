// FsBlobStore beyond the shared contract: the temporary files of writes a killed process never
// finished are removed at start (issue 11, finding 16), and nothing else is.
import assert from 'node:assert/strict';
import { access, mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
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
