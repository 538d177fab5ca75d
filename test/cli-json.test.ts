// The CLI's `--json` output for scripts, `voices export` → `voices import --from`
// (a round trip between accounts), and `tasks list` / `tasks watch` against a running server.
import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { runCli, type CliResult } from './helpers/cli.js';
import { createTask, createVoice, startTestApp, type TestApp } from './helpers/test-app.js';

function cliIn(dataDir: string, ...args: string[]): Promise<CliResult> {
  return runCli({ DATA_DIR: dataDir }, args);
}

describe('CLI for scripts: --json, voices export/import', () => {
  let dataDir: string;
  const cli = (...args: string[]) => cliIn(dataDir, ...args);
  const json = async <T>(...args: string[]): Promise<T> => {
    const result = await cli(...args);
    assert.equal(result.code, 0, result.stderr);
    return JSON.parse(result.stdout) as T;
  };

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'voicegen-cli-json-'));
  });
  after(async () => rm(dataDir, { recursive: true, force: true }));

  it('prints accounts and keys as JSON', async () => {
    const alice = await json<{ id: string; name: string; createdAt: string }>(
      'accounts',
      'create',
      'alice',
      '--json',
    );
    assert.equal(alice.name, 'alice');
    assert.ok(!Number.isNaN(Date.parse(alice.createdAt)));
    const list = await json<Array<{ id: string; name: string }>>('accounts', 'list', '--json');
    assert.deepEqual(
      list.map((a) => a.name),
      ['alice'],
    );
    const issued = await json<{ id: string; key: string; accountId: string; revokedAt: null }>(
      'keys',
      'create',
      'alice',
      '--json',
    );
    assert.match(issued.key, /^sk-[a-z0-9]{32}$/);
    assert.equal(issued.accountId, alice.id);
    const keys = await json<Array<{ id: string; prefix: string; revokedAt: string | null }>>(
      'keys',
      'list',
      'alice',
      '--json',
    );
    assert.equal(keys.length, 1);
    assert.equal(keys[0]?.id, issued.id);
    assert.ok(!JSON.stringify(keys).includes(issued.key), 'a listing never holds the whole key');
    assert.deepEqual(await json('keys', 'revoke', issued.id, '--json'), { id: issued.id, revoked: true });
    const revoked = await json<Array<{ revokedAt: string | null }>>('keys', 'list', 'alice', '--json');
    assert.notEqual(revoked[0]?.revokedAt, null);
  });

  it("exports an account's voices and imports them into another account", async () => {
    await json('accounts', 'create', 'source', '--json');
    await json('accounts', 'create', 'target', '--json');
    const file = join(dataDir, 'voices-in.json');
    await writeFile(
      file,
      JSON.stringify([
        {
          name: 'Narrator',
          version: 'v3.0',
          language: 'en',
          engine: { engine: 'espeak', voice: 'en-us', variant: 'f3' },
        },
        { name: 'Old one', version: 'v1.0', language: 'de', description: 'from 2024', lora: true },
      ]),
    );
    const imported = await json<Array<{ name: string; version: string }>>(
      'voices',
      'import',
      'source',
      '--from',
      file,
      '--json',
    );
    assert.deepEqual(
      imported.map((v) => [v.name, v.version]),
      [
        ['Narrator', 'v3.0'],
        ['Old one', 'v1.0'],
      ],
    );

    const exportFile = join(dataDir, 'voices-out.json');
    const written = await cli('voices', 'export', 'source', '-o', exportFile);
    assert.equal(written.code, 0, written.stderr);
    assert.match(written.stderr, /2 voice\(s\) written/);
    const exported = await json<Array<Record<string, unknown>>>('voices', 'export', 'source');
    const byName = (list: Array<Record<string, unknown>>) =>
      [...list].sort((a, b) => String(a.name).localeCompare(String(b.name)));
    const narrator = byName(exported)[0];
    assert.deepEqual(narrator?.engine, { engine: 'espeak', voice: 'en-us', variant: 'f3' });
    const old = byName(exported)[1];
    assert.deepEqual(
      [old?.version, old?.language, old?.description, old?.lora],
      ['v1.0', 'de', 'from 2024', true],
    );

    const again = await cli('voices', 'import', 'target', '--from', exportFile);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /2 voice\(s\) imported/);
    assert.deepEqual(byName(await json('voices', 'export', 'target')), byName(exported));
  });

  it('refuses an unreadable export file and an import without a voice, with exit 1', async () => {
    const missing = await cli('voices', 'import', 'source', '--from', join(dataDir, 'nope.json'));
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /cannot read/);
    const bare = await cli('voices', 'import', 'source');
    assert.equal(bare.code, 1);
    assert.match(bare.stderr, /--name and --version, or --from/);
  });
});

describe('CLI tasks list / watch', () => {
  let t: TestApp;
  let dataDir: string;
  const cli = (...args: string[]) => cliIn(dataDir, '--url', t.baseUrl, ...args);

  before(async () => {
    t = await startTestApp({ listen: true });
    dataDir = await mkdtemp(join(tmpdir(), 'voicegen-cli-tasks-'));
  });
  after(async () => {
    await t.close();
    await rm(dataDir, { recursive: true, force: true });
  });

  it('watches a task to the end and lists it', async () => {
    const voiceId = await createVoice(t.app, t.key);
    const id = await createTask(t.app, t.key, [
      { type: 'text', text: 'The first sentence of the watched task.', voiceId },
      { type: 'text', text: 'And a second one, a little later.', voiceId },
    ]);
    const watched = await cli('tasks', 'watch', id, '--key', t.key, '--json');
    assert.equal(watched.code, 0, watched.stderr);
    const lines = watched.stdout
      .trim()
      .split('\n')
      .map(
        (line) => JSON.parse(line) as { status: string; piecesDone: number; pieces: number; audio?: string },
      );
    const last = lines.at(-1);
    assert.equal(last?.status, 'generated');
    assert.deepEqual([last?.piecesDone, last?.pieces], [2, 2]);
    assert.match(String(last?.audio), new RegExp(`/api/tts/generate/${id}/audio\\.mp3\\?auth=`));
    for (let n = 1; n < lines.length; n++) {
      assert.ok((lines[n]?.piecesDone ?? 0) >= (lines[n - 1]?.piecesDone ?? 0), 'progress never goes back');
    }

    const listed = await cli('tasks', 'list', '--key', t.key, '--json');
    assert.equal(listed.code, 0, listed.stderr);
    const page = JSON.parse(listed.stdout) as { items: Array<{ id: string; status: string }>; total: number };
    assert.equal(page.total, 1);
    assert.deepEqual(
      page.items.map((task) => [task.id, task.status]),
      [[id, 'generated']],
    );
    const table = await cli('tasks', 'list', '--key', t.key, '--status', 'generated');
    assert.match(table.stdout, new RegExp(`^${id}  generated`, 'm'));
    assert.match(table.stdout, /1 of 1 task\(s\)/);
  });

  it('fails clearly: unknown task (1), no key or no server (2)', async () => {
    const unknown = await cli('tasks', 'watch', 'no-such-task', '--key', t.key);
    assert.equal(unknown.code, 1);
    assert.match(unknown.stderr, /GENERATE_NOT_FOUND/);
    const noKey = await cli('tasks', 'list');
    assert.equal(noKey.code, 2);
    assert.match(noKey.stderr, /--key or VOICEGEN_KEY/);
    const noServer = await cliIn(dataDir, 'tasks', 'list', '--key', t.key);
    assert.equal(noServer.code, 2);
    assert.match(noServer.stderr, /no server is running on DATA_DIR/);
    const badKey = await cli('tasks', 'list', '--key', 'sk-00000000000000000000000000000000');
    assert.equal(badKey.code, 1);
    assert.match(badKey.stderr, /AUTH_UNAUTHORIZED/);
  });
});
