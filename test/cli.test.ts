// Operator CLI against a real data dir: the keys it prints authenticate against the service.
import assert from 'node:assert/strict';
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import pg from 'pg';
import { readServerFile, serverFilePath, writeServerFile } from '../src/http/server-file.js';
import { bearer, startTestApp } from './helpers/test-app.js';
import { freePort } from './helpers/free-port.js';
import { freshPostgresDatabase } from './helpers/servers.js';
import { isolatedCliEnv } from './helpers/cli.js';

const run = promisify(execFile);

describe('operator CLI', () => {
  let dataDir: string;
  const cli = async (...args: string[]) => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
      env: isolatedCliEnv({ DATA_DIR: dataDir }),
      timeout: 120_000,
    });
    return stdout.trim();
  };

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'voicegen-cli-'));
  });
  after(async () => rm(dataDir, { recursive: true, force: true }));

  it('creates accounts and keys, imports voices, revokes keys', async () => {
    assert.match(await cli('accounts', 'create', 'alice'), /account alice created/);
    const key = await cli('keys', 'create', 'alice');
    assert.match(key, /^sk-[a-z0-9]{32}$/);
    const imported = JSON.parse(
      await cli('voices', 'import', 'alice', '--name', 'legacy', '--version', 'v1.0', '--lora'),
    ) as {
      id: string;
      version: string;
      metadata: { withLora: boolean };
    };
    assert.equal(imported.version, 'v1.0');
    assert.equal(imported.metadata.withLora, true);
    const keys = await cli('keys', 'list', 'alice');
    assert.match(keys, /\tsk-[a-z0-9]{4}…\t.*\tactive$/m);
    assert.ok(!keys.includes(key), 'listing never shows the whole key');
    const keyId = keys.split('\t')[0] ?? '';

    // The service started on the same data dir accepts the key and sees the imported voice.
    const t = await startTestApp({ dataDir });
    try {
      const info = await t.app.http.inject({ method: 'GET', url: '/api/account/info', headers: bearer(key) });
      assert.equal(info.json<{ data: { name: string } }>().data.name, 'alice');
      const migrate = await t.app.http.inject({
        method: 'POST',
        url: `/api/voice/${imported.id}/migrateV3`,
        headers: bearer(key),
      });
      assert.equal(migrate.json<{ code: string }>().code, 'VOICE_MIGRATE_NOT_ALLOWED');
    } finally {
      await t.close();
    }

    assert.match(await cli('keys', 'revoke', keyId), /revoked/);
    const t2 = await startTestApp({ dataDir });
    try {
      const res = await t2.app.http.inject({ method: 'GET', url: '/api/account/info', headers: bearer(key) });
      assert.equal(res.statusCode, 401);
    } finally {
      await t2.close();
    }
  });

  it('rejects a bad version with a clear message and a non-zero exit', async () => {
    await assert.rejects(
      cli('voices', 'import', 'alice', '--name', 'x', '--version', 'v9'),
      (err: { stderr: string }) => {
        assert.match(err.stderr, /expected one of v1.0, v2.0, v3.0, v4.0/);
        return true;
      },
    );
  });
});

interface RunningServer {
  child: ChildProcess;
  url: string;
  stderr: () => string;
}

/** Starts the real service (`src/main.ts`) as a child process and waits until its server file and /healthz say it is up. */
async function startServer(dataDir: string, env: Record<string, string> = {}): Promise<RunningServer> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
    env: isolatedCliEnv({
      DATA_DIR: dataDir,
      HOST: '127.0.0.1',
      PORT: String(port),
      LOG_LEVEL: 'warn',
      ...env,
    }),
    stdio: ['ignore', 'ignore', 'pipe'],
  });
  let stderr = '';
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = once(child, 'exit');
  const deadline = AbortSignal.timeout(120_000);
  for (;;) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}: ${stderr}`);
    if (deadline.aborted) {
      child.kill('SIGKILL');
      await exited;
      throw new Error(`server did not come up within 120 s: ${stderr}`);
    }
    const info = await readServerFile(dataDir);
    if (info !== undefined && info.pid === child.pid) {
      const healthy = await fetch(`${info.url}/healthz`, { signal: AbortSignal.timeout(5000) }).then(
        (res) => res.ok,
        () => false,
      );
      if (healthy) return { child, url: info.url, stderr: () => stderr };
    }
    await sleep(100, undefined, { signal: deadline }).catch(() => undefined);
  }
}

/** SIGTERM and wait for a clean exit (with a deadline). */
async function stopServer(server: RunningServer): Promise<void> {
  const exited = once(server.child, 'exit', { signal: AbortSignal.timeout(60_000) });
  server.child.kill('SIGTERM');
  const [code] = (await exited) as [number | null];
  assert.equal(code, 0, `clean shutdown (stderr: ${server.stderr()})`);
}

describe('operator CLI on a PostgreSQL server (scale-out)', () => {
  it('talks to PostgreSQL directly, safe beside running nodes', async () => {
    const database = await freshPostgresDatabase();
    const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-cli-pg-'));
    try {
      const cli = async (...args: string[]) =>
        (
          await run(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
            env: isolatedCliEnv({ DATA_DIR: dataDir, DATABASE_URL: database.url }),
            timeout: 120_000,
          })
        ).stdout.trim();
      assert.match(await cli('accounts', 'create', 'bob'), /^account bob created \(id .+\)$/);
      assert.match(await cli('keys', 'create', 'bob'), /^sk-[a-z0-9]{32}$/);
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      try {
        const rows = await client.query<{ name: string; keys: string }>(
          'select a.name, count(k.id) as keys from accounts a join api_keys k on k.account_id = a.id group by a.name',
        );
        assert.deepEqual(rows.rows, [{ name: 'bob', keys: '1' }]);
      } finally {
        await client.end();
      }
    } finally {
      await rm(dataDir, { recursive: true, force: true });
      await database.drop();
    }
  });
});

describe('operator CLI beside a running embedded server', () => {
  let dataDir: string;
  let server: RunningServer | undefined;
  const cliRun = (env: Record<string, string>, ...args: string[]) =>
    run(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
      env: isolatedCliEnv({ DATA_DIR: dataDir, ...env }),
      timeout: 120_000,
    });
  const cli = async (...args: string[]) => (await cliRun({}, ...args)).stdout.trim();
  const accountName = async (url: string, key: string) => {
    const res = await fetch(`${url}/api/account/info`, {
      headers: bearer(key),
      signal: AbortSignal.timeout(10_000),
    });
    return res.ok ? ((await res.json()) as { data: { name: string } }).data.name : res.status;
  };

  before(async () => {
    dataDir = await mkdtemp(join(tmpdir(), 'voicegen-cli-server-'));
  });
  after(async () => {
    if (server?.child.exitCode === null) {
      const exited = once(server.child, 'exit');
      server.child.kill('SIGKILL');
      await exited;
    }
    await rm(dataDir, { recursive: true, force: true });
  });

  it('goes through the admin API while the server runs; nothing is lost across a restart', async () => {
    server = await startServer(dataDir);
    const info = await readServerFile(dataDir);
    assert.equal(info?.pid, server.child.pid);
    assert.equal(typeof info?.adminToken, 'string', 'an embedded server writes its generated token');
    assert.equal((await stat(serverFilePath(dataDir))).mode & 0o777, 0o600);

    // A second server on the same DATA_DIR refuses to start, naming the holder; the first keeps running.
    const secondServer = await run(process.execPath, ['--import', 'tsx', 'src/main.ts'], {
      env: isolatedCliEnv({
        DATA_DIR: dataDir,
        HOST: '127.0.0.1',
        PORT: String(await freePort()),
        LOG_LEVEL: 'warn',
      }),
      timeout: 120_000,
    }).then(
      () => undefined,
      (err: { code?: number; stderr?: string }) => err,
    );
    assert.equal(secondServer?.code, 1, 'the second server exits with an error');
    assert.match(
      String(secondServer?.stderr),
      new RegExp(`is in use by another voicegen process \\(pid ${String(server.child.pid)},`),
    );
    assert.equal(server.child.exitCode, null);
    assert.equal((await fetch(`${server.url}/healthz`)).status, 200);

    assert.match(await cli('accounts', 'create', 'alice'), /^account alice created \(id .+\)$/);
    const key = await cli('keys', 'create', 'alice');
    assert.match(key, /^sk-[a-z0-9]{32}$/);
    assert.match(await cli('keys', 'list', 'alice'), /\tsk-[a-z0-9]{4}…\t.*\tactive$/m);
    const imported = JSON.parse(
      await cli('voices', 'import', 'alice', '--name', 'legacy', '--version', 'v2.0', '--lora'),
    ) as { version: string; metadata: { withLora: boolean } };
    assert.deepEqual([imported.version, imported.metadata.withLora], ['v2.0', true]);
    assert.equal(await accountName(server.url, key), 'alice', 'the running server knows the key at once');
    await assert.rejects(cli('accounts', 'create', 'alice'), (err: { code: number; stderr: string }) => {
      assert.equal(err.code, 1);
      assert.match(err.stderr, /^error: account "alice" already exists/m);
      return true;
    });

    await stopServer(server);
    assert.equal(await readServerFile(dataDir), undefined, 'server.json is removed on clean shutdown');

    // Restart with a configured ADMIN_TOKEN: server.json names the server but not the token.
    const adminToken = 'operator-token-for-the-cli-test-0123';
    server = await startServer(dataDir, { ADMIN_TOKEN: adminToken });
    const second = await readServerFile(dataDir);
    assert.equal(second?.pid, server.child.pid);
    assert.equal(second?.adminToken, undefined);
    await assert.rejects(cli('accounts', 'list'), (err: { code: number; stderr: string }) => {
      assert.equal(err.code, 2);
      assert.match(err.stderr, /--admin-token TOKEN or set ADMIN_TOKEN/);
      return true;
    });
    assert.match((await cliRun({ ADMIN_TOKEN: adminToken }, 'accounts', 'list')).stdout, /\talice\t/);
    const keys = await cli('--url', server.url, '--admin-token', adminToken, 'keys', 'list', 'alice');
    assert.match(keys, /\tactive$/m);
    assert.equal(await accountName(server.url, key), 'alice', 'the key survived the restart');
    await assert.rejects(
      cli('--url', server.url, '--admin-token', 'not-the-operator-token-000000', 'accounts', 'list'),
      (err: { code: number; stderr: string }) => {
        assert.equal(err.code, 2);
        assert.match(err.stderr, /wrong admin token/);
        return true;
      },
    );

    const keyId = keys.split('\t')[0] ?? '';
    assert.match((await cliRun({ ADMIN_TOKEN: adminToken }, 'keys', 'revoke', keyId)).stdout, /revoked/);
    assert.equal(await accountName(server.url, key), 401, 'a revoked key stops at once');
    await stopServer(server);
    server = undefined;
  });

  it('opens the database itself when server.json is stale, and refuses when its server does not answer', async () => {
    // A process that has exited: its pid names no server.
    const gone = spawn(process.execPath, ['-e', '']);
    await once(gone, 'exit');
    const stale = { url: 'http://127.0.0.1:9', startedAt: new Date().toISOString() };
    await writeServerFile(dataDir, { pid: gone.pid ?? 0, ...stale });
    assert.match(await cli('accounts', 'create', 'bob'), /^account bob created/);

    // A live process (this test runner) that answers no /healthz: the data dir may be in use.
    await writeServerFile(dataDir, { pid: process.pid, ...stale });
    await assert.rejects(cli('accounts', 'list'), (err: { code: number; stderr: string }) => {
      assert.equal(err.code, 2);
      assert.match(err.stderr, /does not answer/);
      return true;
    });
    await rm(serverFilePath(dataDir));
  });
});
