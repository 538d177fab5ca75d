import assert from 'node:assert/strict';
import { chmod, lstat, mkdir, mkdtemp, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { TIGHTENED_MARKER, tightenDataDir } from './owner-only.js';

const mode = async (path: string) => (await stat(path)).mode & 0o7777;

describe('tightenDataDir', () => {
  let root: string;
  let dataDir: string;
  let outside: string;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'voicegen-owner-only-'));
    dataDir = join(root, 'data');
    outside = join(root, 'outside');
    await mkdir(join(dataDir, 'blobs', 'tasks', 't1'), { recursive: true });
    await mkdir(join(dataDir, 'db', 'base'), { recursive: true });
    await mkdir(join(dataDir, 'not-ours'), { recursive: true });
    await mkdir(outside, { recursive: true });
    await writeFile(join(dataDir, 'blobs', 'tasks', 't1', '0.mp3'), 'x');
    await writeFile(join(dataDir, 'db', 'base', '1'), 'x');
    await writeFile(join(dataDir, 'db', 'run.sh'), 'x');
    await writeFile(join(dataDir, 'server.json'), '{}');
    await writeFile(join(dataDir, 'not-ours', 'file'), 'x');
    await writeFile(join(dataDir, 'notes.txt'), 'x');
    await writeFile(join(outside, 'target'), 'x');
    await symlink(join(outside, 'target'), join(dataDir, 'blobs', 'link'));
    for (const dir of [
      dataDir,
      join(dataDir, 'blobs'),
      join(dataDir, 'blobs', 'tasks'),
      join(dataDir, 'db'),
    ]) {
      await chmod(dir, 0o755);
    }
    await chmod(join(dataDir, 'blobs', 'tasks', 't1'), 0o775);
    await chmod(join(dataDir, 'db', 'base'), 0o755);
    for (const file of [
      join(dataDir, 'blobs', 'tasks', 't1', '0.mp3'),
      join(dataDir, 'db', 'base', '1'),
      join(dataDir, 'server.json'),
      join(dataDir, 'not-ours', 'file'),
      join(dataDir, 'notes.txt'),
      join(outside, 'target'),
    ]) {
      await chmod(file, 0o644);
    }
    await chmod(join(dataDir, 'db', 'run.sh'), 0o755);
  });
  after(async () => rm(root, { recursive: true, force: true }));

  it('removes group and other bits from DATA_DIR and its own entries, recursively, once', async () => {
    const first = await tightenDataDir(dataDir);
    assert.equal(first.failed, 0);
    assert.equal(await mode(dataDir), 0o700);
    assert.equal(await mode(join(dataDir, 'blobs', 'tasks', 't1')), 0o700);
    assert.equal(await mode(join(dataDir, 'blobs', 'tasks', 't1', '0.mp3')), 0o600);
    assert.equal(await mode(join(dataDir, 'db', 'base', '1')), 0o600);
    assert.equal(await mode(join(dataDir, 'server.json')), 0o600);
    // Owner bits are kept: an executable stays one.
    assert.equal(await mode(join(dataDir, 'db', 'run.sh')), 0o700);
    // Entries that are not the service's, and what a link points to, are left alone.
    assert.equal(await mode(join(dataDir, 'not-ours')), 0o755);
    assert.equal(await mode(join(dataDir, 'not-ours', 'file')), 0o644);
    assert.equal(await mode(join(dataDir, 'notes.txt')), 0o644);
    assert.equal(await mode(join(outside, 'target')), 0o644);
    assert.ok((await lstat(join(dataDir, 'blobs', 'link'))).isSymbolicLink());
    assert.equal(await mode(join(dataDir, TIGHTENED_MARKER)), 0o600);

    // With the marker, a start looks at the top level only.
    await chmod(join(dataDir, 'blobs', 'tasks', 't1', '0.mp3'), 0o644);
    await chmod(join(dataDir, 'blobs'), 0o755);
    const second = await tightenDataDir(dataDir);
    assert.ok(second.examined < first.examined, `${second.examined} < ${first.examined}`);
    assert.equal(await mode(join(dataDir, 'blobs')), 0o700);
    assert.equal(await mode(join(dataDir, 'blobs', 'tasks', 't1', '0.mp3')), 0o644);
  });

  it('a missing DATA_DIR is nothing to do', async () => {
    assert.deepEqual(await tightenDataDir(join(root, 'missing')), { examined: 0, changed: 0, failed: 0 });
  });
});
