/**
 * Unpacking an embedded-database archive: a real dump of a migrated database (gzipped as the build
 * writes it, and as plain tar) and hand-made archives for what a damaged or foreign one holds.
 */
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { lstat, mkdtemp, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { gunzipSync, gzipSync } from 'node:zlib';
import { createPgliteTemplate } from './database.pglite.js';
import { archive, entry } from '../../test/helpers/tar.js';
import { PgliteArchiveError, unpackPgliteArchive } from './pglite-archive.js';

/** `bytes` as a stream of chunks of `size` bytes (headers and data then straddle chunks). */
async function* chunks(bytes: Uint8Array, size = bytes.length): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

const dirs: string[] = [];
async function emptyDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'voicegen-archive-'));
  dirs.push(dir);
  return dir;
}

/** Every path under `dir` (folders end in '/'), sorted. */
async function tree(dir: string, under = ''): Promise<string[]> {
  const out: string[] = [];
  for (const item of await readdir(join(dir, under), { withFileTypes: true })) {
    const path = under === '' ? item.name : `${under}/${item.name}`;
    if (item.isDirectory()) out.push(`${path}/`, ...(await tree(dir, path)));
    else out.push(path);
  }
  return out.sort();
}

after(() => Promise.all(dirs.map((dir) => rm(dir, { recursive: true, force: true }))));

describe('unpacking an embedded-database archive', () => {
  test('a dump of a migrated database unpacks whole, gzipped or not, owner-only', async () => {
    const gzipped = new Uint8Array(await (await createPgliteTemplate()).arrayBuffer());
    const plain = gunzipSync(gzipped);
    const fromGzip = await emptyDir();
    await unpackPgliteArchive(chunks(gzipped, 64 * 1024), fromGzip);
    const fromTar = await emptyDir();
    await unpackPgliteArchive(chunks(plain, 777), fromTar);

    const paths = await tree(fromGzip);
    assert.deepEqual(await tree(fromTar), paths);
    for (const path of ['PG_VERSION', 'global/pg_control', 'base/', 'pg_wal/'])
      assert.ok(paths.includes(path), `${path} in ${paths.length} entries`);
    assert.equal((await readFile(join(fromGzip, 'PG_VERSION'), 'utf8')).trim(), '17');
    // The write-ahead log segment keeps its full size (PostgreSQL refuses a short one).
    const wal = paths.find((path) => /^pg_wal\/[0-9A-F]{24}$/.test(path));
    assert.ok(wal !== undefined);
    assert.equal((await lstat(join(fromGzip, wal))).size, 16 * 1024 * 1024);
    for (const path of paths) {
      const mode = (await lstat(join(fromGzip, path))).mode & 0o777;
      assert.equal(mode, path.endsWith('/') ? 0o700 : 0o600, path);
    }
  });

  test('zero pages become holes: the same bytes, fewer written', async () => {
    // Pages of 8 KiB: data, two of zeros, data cut short, then zeros to the end (as a log segment).
    const page = (fill: number) => new Uint8Array(8192).fill(fill);
    const content = Buffer.concat([
      page(1),
      page(0),
      page(0),
      page(2).subarray(0, 5000),
      new Uint8Array(3192 + 8 * 8192),
    ]);
    for (const chunkSize of [content.length + 4096, 777, 8192]) {
      const dir = await emptyDir();
      await unpackPgliteArchive(chunks(archive(entry('pg_wal/segment', '0', content)), chunkSize), dir);
      const path = join(dir, 'pg_wal/segment');
      assert.ok((await readFile(path)).equals(content), `same bytes (chunks of ${chunkSize})`);
      const { size, blocks } = await lstat(path);
      assert.equal(size, content.length);
      assert.ok(
        blocks * 512 <= 3 * 8192,
        `${blocks * 512} bytes allocated for 2 pages of data (chunks of ${chunkSize})`,
      );
    }
  });

  test('names with a prefix field, folders listed after their files, and empty files', async () => {
    const dir = await emptyDir();
    await unpackPgliteArchive(
      chunks(
        gzipSync(
          archive(
            entry('/base/1/112', '0', Buffer.from('page')),
            entry('/base/', '5'),
            entry('1213', '0', new Uint8Array(), 'global'),
            entry('./pg_wal/archive_status', '5'),
            entry('big', '\0', new Uint8Array(1300).fill(7)),
          ),
        ),
        100,
      ),
      dir,
    );
    assert.deepEqual(await tree(dir), [
      'base/',
      'base/1/',
      'base/1/112',
      'big',
      'global/',
      'global/1213',
      'pg_wal/',
      'pg_wal/archive_status/',
    ]);
    assert.equal(await readFile(join(dir, 'base/1/112'), 'utf8'), 'page');
    assert.equal((await readFile(join(dir, 'global/1213'))).length, 0);
    assert.deepEqual(await readFile(join(dir, 'big')), Buffer.alloc(1300, 7));
  });

  const refusals: [string, () => Uint8Array, RegExp][] = [
    [
      'a name leaving the folder',
      () => archive(entry('../outside', '0', Buffer.from('x'))),
      /leaves the database folder/,
    ],
    ['a symbolic link', () => archive(entry('link', '2')), /unsupported entry type '2'/],
    [
      'a damaged header',
      () => {
        const bytes = archive(entry('PG_VERSION', '0', Buffer.from('17\n')));
        bytes[0] = 'Q'.charCodeAt(0);
        return bytes;
      },
      /checksum mismatch at byte 0/,
    ],
    [
      'a file cut short',
      () => archive(entry('PG_VERSION', '0', Buffer.from('17\n'))).subarray(0, 512 + 100),
      /ends before its end marker|cut short/,
    ],
    ['no end marker', () => entry('PG_VERSION', '0', Buffer.from('17\n')), /ends before its end marker/],
    ['not an archive at all', () => Buffer.from('{"not": "a tar archive"}'.padEnd(2048, ' ')), /checksum/],
  ];
  for (const [what, make, message] of refusals) {
    test(`refuses ${what} with an archive error`, async () => {
      const dir = await emptyDir();
      await assert.rejects(unpackPgliteArchive(chunks(make()), dir), (err: unknown) => {
        assert.ok(err instanceof PgliteArchiveError, String(err));
        assert.match(err.message, message);
        return true;
      });
      // Nothing lands beside the folder.
      await assert.rejects(lstat(join(dir, '..', 'outside')), { code: 'ENOENT' });
    });
  }

  test('stops at the end marker and closes the file it reads', async () => {
    const folder = await emptyDir();
    // A megabyte after the end marker, never read: the reading stops early.
    const tar = Buffer.concat([archive(entry('PG_VERSION', '0', Buffer.from('17\n'))), randomBytes(1 << 20)]);
    await writeFile(join(folder, 'template.tar'), tar);
    await writeFile(join(folder, 'template.tar.gz'), gzipSync(tar));
    const openFiles = async () => (await readdir('/proc/self/fd')).length;
    const before = await openFiles();
    for (let i = 0; i < 10; i++) {
      for (const name of ['template.tar', 'template.tar.gz']) {
        const dir = await emptyDir();
        await unpackPgliteArchive(createReadStream(join(folder, name), { highWaterMark: 4096 }), dir);
        assert.deepEqual(await readdir(dir), ['PG_VERSION']);
      }
    }
    // A destroyed stream closes its file in the next turns of the event loop.
    for (let wait = 0; wait < 50 && (await openFiles()) > before; wait++)
      await new Promise((resolve) => setTimeout(resolve, 20));
    assert.ok((await openFiles()) <= before, `no file left open (${await openFiles()} > ${before})`);
  });

  test('a damaged gzip stream is refused', async () => {
    const gzipped = gzipSync(archive(entry('PG_VERSION', '0', Buffer.from('17\n'))));
    const cut = gzipped.subarray(0, Math.floor(gzipped.length / 2));
    await assert.rejects(unpackPgliteArchive(chunks(cut), await emptyDir()), (err: unknown) => {
      assert.ok(err instanceof PgliteArchiveError, String(err));
      assert.match(err.message, /not a readable gzip stream/);
      return true;
    });
  });
});
