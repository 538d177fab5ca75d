// Operator CLI against a real data dir: the keys it prints authenticate against the service.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { bearer, startTestApp } from './helpers/test-app.js';

const run = promisify(execFile);

describe('operator CLI', () => {
  let dataDir: string;
  const cli = async (...args: string[]) => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', ...args], {
      env: { ...process.env, DATA_DIR: dataDir, LOG_LEVEL: 'silent' },
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
