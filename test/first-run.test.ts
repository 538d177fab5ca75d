// A first start on a fresh DATA_DIR creates the first account and prints, once,
// its key and a console URL that signs in with it; restarts and BOOTSTRAP_API_KEY print nothing.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startServerProcess, type ServerProcess } from './helpers/server-process.js';

const dirs: string[] = [];
after(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

async function freshDataDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'voicegen-first-run-'));
  dirs.push(dir);
  return dir;
}

const KEY = /sk-[a-z0-9]{32}/g;

/** Waits until the banner's console URL is on stdout (it follows /healthz by a moment), at most 30 s. */
async function banner(server: ServerProcess): Promise<string> {
  const deadline = Date.now() + 30_000;
  while (!/#key=sk-/.test(server.stdout()) && Date.now() < deadline) await sleep(50);
  return server.stdout();
}

/** Stdout once the server said it is ready (after the banner, if any). */
async function settled(server: ServerProcess): Promise<string> {
  await sleep(1000);
  return server.stdout();
}

async function accountInfo(url: string, key: string): Promise<Response> {
  return fetch(`${url}/api/account/info`, { headers: { authorization: `Bearer ${key}` } });
}

describe('first run', () => {
  test('prints a working key and a console URL once; a restart prints no key', async () => {
    const dataDir = await freshDataDir();
    const first = await startServerProcess(dataDir);
    try {
      const out = await banner(first);
      const keys = [...out.matchAll(KEY)].map((m) => m[0]);
      assert.equal(new Set(keys).size, 1, `one key printed: ${out}`);
      const key = keys[0] ?? '';
      assert.ok(out.includes(`${first.url}/#key=${key}`), `the console URL signs in with the key: ${out}`);
      const info = await accountInfo(first.url, key);
      assert.equal(info.status, 200);
      assert.match(JSON.stringify(await info.json()), /"default"/);
      assert.equal((await accountInfo(first.url, 'sk-00000000000000000000000000000000')).status, 401);
    } finally {
      assert.equal(await first.stop(), 0);
    }
    const second = await startServerProcess(dataDir);
    try {
      assert.doesNotMatch(await settled(second), KEY, 'a restart never prints or creates a key');
    } finally {
      await second.stop();
    }
  });

  test('BOOTSTRAP_API_KEY or FIRST_RUN_ACCOUNT=false: no generated key', async () => {
    const bootstrapKey = 'sk-' + 'b'.repeat(32);
    const withKey = await startServerProcess(await freshDataDir(), { BOOTSTRAP_API_KEY: bootstrapKey });
    try {
      assert.doesNotMatch(await settled(withKey), KEY);
      assert.equal((await accountInfo(withKey.url, bootstrapKey)).status, 200);
    } finally {
      await withKey.stop();
    }
    const optedOut = await startServerProcess(await freshDataDir(), { FIRST_RUN_ACCOUNT: 'false' });
    try {
      assert.doesNotMatch(await settled(optedOut), KEY);
    } finally {
      await optedOut.stop();
    }
  });
});
