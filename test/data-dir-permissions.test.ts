// The data directory holds task tokens (in the database's WAL), texts and audio: under the usual
// umask 022 everything the service writes there must still be its owner's only (folders 0700,
// files 0600), and an install whose files were made readable to others is tightened at start.
// The real service runs as a child process that inherits this test's umask.
import assert from 'node:assert/strict';
import { chmod, lstat, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { startServerProcess } from './helpers/server-process.js';

const KEY = `sk-${'p'.repeat(32)}`;
const OWNER_ONLY = { dir: 0o700, file: 0o600 };

/** Every folder and file under `root` (root included) with its permission bits; symlinks are not followed. */
async function modes(root: string): Promise<Array<{ path: string; kind: 'dir' | 'file'; mode: number }>> {
  const out: Array<{ path: string; kind: 'dir' | 'file'; mode: number }> = [];
  const pending = [root];
  while (pending.length > 0) {
    const path = pending.pop() as string;
    const s = await lstat(path).catch(() => undefined); // removed meanwhile (a stream cache file)
    if (s === undefined || s.isSymbolicLink()) continue;
    out.push({ path, kind: s.isDirectory() ? 'dir' : 'file', mode: s.mode & 0o7777 });
    if (s.isDirectory()) {
      for (const name of await readdir(path).catch(() => [])) pending.push(join(path, name));
    }
  }
  return out;
}

/** The entries under `root` readable, writable or searchable by anyone but the owner (or not exactly owner-only). */
async function notOwnerOnly(root: string): Promise<string[]> {
  return (await modes(root))
    .filter((e) => e.mode !== OWNER_ONLY[e.kind])
    .map((e) => `${e.mode.toString(8)} ${e.kind} ${e.path.slice(root.length)}`);
}

/**
 * Makes everything under `root` group/other-readable, as an install made before this guarantee:
 * without the marker of a completed tightening either.
 */
async function loosen(root: string): Promise<void> {
  await rm(join(root, '.owner-only'));
  for (const e of await modes(root)) await chmod(e.path, e.kind === 'dir' ? 0o755 : 0o644);
}

async function json(res: Response): Promise<{ data: Record<string, unknown> }> {
  assert.ok(res.ok, `${res.status} ${await res.clone().text()}`);
  return (await res.json()) as { data: Record<string, unknown> };
}

/** A voice, a generated task streamed live, its stored audio and a one-shot synthesis: every folder the service writes. */
async function workload(url: string): Promise<void> {
  const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' };
  const voice = await json(
    await fetch(`${url}/api/voice`, { method: 'POST', headers, body: JSON.stringify({ name: 'Private' }) }),
  );
  const voiceId = String(voice.data.id);
  const task = await json(
    await fetch(`${url}/api/tts/generate`, {
      method: 'POST',
      headers,
      body: JSON.stringify({
        contents: [
          { text: 'My secret PIN is 4242.', voiceId },
          { text: 'Nobody else may read this.', voiceId },
        ],
      }),
    }),
  );
  const taskId = String(task.data.id);
  let detail = await json(await fetch(`${url}/api/tts/generate/${taskId}?stream=true`, { headers }));
  // Read the live stream (session cache files under stream-cache/ and work/) until it ends.
  const deadline = Date.now() + 60_000;
  while (detail.data.status === 'pending' && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 50));
    detail = await json(await fetch(`${url}/api/tts/generate/${taskId}?stream=true`, { headers }));
  }
  const live = await fetch(String(detail.data.streamUrl));
  assert.equal(live.status, 200);
  assert.ok((await live.arrayBuffer()).byteLength > 0);
  while (detail.data.status !== 'generated' && Date.now() < deadline) {
    await new Promise((resolve) => setTimeout(resolve, 100));
    detail = await json(await fetch(`${url}/api/tts/generate/${taskId}?stream=true`, { headers }));
  }
  assert.equal(detail.data.status, 'generated');
  const oneShot = await fetch(
    `${url}/api/tts/simple-generate.mp3?voiceId=${voiceId}&text=${encodeURIComponent('Hello again.')}`,
    { headers: { authorization: `Bearer ${KEY}` } },
  );
  assert.equal(oneShot.status, 200);
  assert.ok((await oneShot.arrayBuffer()).byteLength > 0);
}

describe('the data directory is its owner’s only, whatever the umask', () => {
  let root: string;
  let previousUmask: number;
  before(async () => {
    previousUmask = process.umask(0o022);
    root = await mkdtemp(join(tmpdir(), 'voicegen-modes-'));
  });
  after(async () => {
    process.umask(previousUmask);
    await rm(root, { recursive: true, force: true });
  });

  test('a new install under umask 022: DATA_DIR, database, blobs, work and stream cache are 0700/0600', async () => {
    // Created by the service itself (not by mkdtemp, which makes 0700 folders anyway).
    const dataDir = join(root, 'fresh', 'data');
    const server = await startServerProcess(dataDir, { BOOTSTRAP_API_KEY: KEY, FIRST_RUN_ACCOUNT: 'false' });
    try {
      await workload(server.url);
      const names = await readdir(dataDir);
      for (const name of ['db', 'blobs', 'work', 'stream-cache', 'server.json', 'voicegen.lock']) {
        assert.ok(
          names.includes(name),
          `${name} exists (else the check proves nothing): ${names.join(', ')}`,
        );
      }
      assert.ok(
        (await modes(join(dataDir, 'stream-cache'))).some((e) => e.kind === 'file'),
        'a stream cache file exists while the service runs',
      );
      // While it runs (stream-cache run folders, open WAL segments) …
      assert.deepEqual(await notOwnerOnly(dataDir), []);
    } finally {
      assert.equal(await server.stop(), 0);
    }
    // … and what it leaves behind.
    assert.deepEqual(await notOwnerOnly(dataDir), []);
  });

  test('an existing install readable by others is tightened at start', async () => {
    const dataDir = join(root, 'existing');
    const first = await startServerProcess(dataDir, { BOOTSTRAP_API_KEY: KEY, FIRST_RUN_ACCOUNT: 'false' });
    try {
      await workload(first.url);
    } finally {
      assert.equal(await first.stop(), 0);
    }
    await loosen(dataDir);
    const loose = await notOwnerOnly(dataDir);
    assert.ok(loose.length > 100, `the install was loosened: ${loose.length} entries`);
    const second = await startServerProcess(dataDir, { BOOTSTRAP_API_KEY: KEY, FIRST_RUN_ACCOUNT: 'false' });
    try {
      assert.deepEqual(await notOwnerOnly(dataDir), []);
    } finally {
      assert.equal(await second.stop(), 0);
    }
  });
});
