// The operator CLI names what it works on and never creates a data folder on its own: a DATA_DIR
// that does not exist is refused (a mistyped path, or the default ./data beside a server on another
// folder), and `voicegen init` creates one when that is what the operator wants.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { runCli } from './helpers/cli.js';

describe('CLI data folder', () => {
  const parent = mkdtempSync(join(tmpdir(), 'voicegen-cli-dir-'));
  const dataDir = join(parent, 'not-yet');
  after(() => rmSync(parent, { recursive: true, force: true }));

  it('refuses a DATA_DIR that does not exist, creates it with init, then uses it', async () => {
    const refused = await runCli({ DATA_DIR: dataDir }, ['accounts', 'create', 'alice']);
    assert.equal(refused.code, 2, refused.stderr);
    assert.match(refused.stderr, new RegExp(`DATA_DIR ${dataDir} does not exist`));
    assert.match(refused.stderr, /voicegen init/);
    assert.equal(refused.stdout, '');
    assert.equal(existsSync(dataDir), false, 'nothing created');

    const init = await runCli({ DATA_DIR: dataDir }, ['init']);
    assert.equal(init.code, 0, init.stderr);
    assert.match(init.stderr, new RegExp(`^voicegen: using the embedded database in ${dataDir} `, 'm'));
    assert.match(init.stdout, new RegExp(`^ready: ${dataDir} \\(0 account\\(s\\)\\)$`, 'm'));
    assert.equal(existsSync(join(dataDir, 'db', 'PG_VERSION')), true);

    const created = await runCli({ DATA_DIR: dataDir }, ['accounts', 'create', 'alice']);
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /^account alice created/);
    assert.match(created.stderr, /^voicegen: using the embedded database in /m);
  });
});
