// SIGHUP reads MODELS_DIR again in the running service process: a model folder unpacked by other
// means while it runs is listed without a restart, and the process keeps serving.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { startServerProcess } from './helpers/server-process.js';
import { makeTinyVits } from './helpers/tiny-vits.js';

const KEY = 'sk-' + 'h'.repeat(32);
const root = mkdtempSync(join(tmpdir(), 'voicegen-sighup-'));
after(() => rmSync(root, { recursive: true, force: true }));

interface Engine {
  id: string;
  available: boolean;
}

describe('SIGHUP', () => {
  it('lists a model folder added while the service runs', async () => {
    const dataDir = join(root, 'data');
    const modelsDir = join(root, 'models');
    mkdirSync(dataDir);
    mkdirSync(modelsDir);
    const server = await startServerProcess(dataDir, {
      BOOTSTRAP_API_KEY: KEY,
      FIRST_RUN_ACCOUNT: 'false',
      MODELS_DIR: modelsDir,
    });
    try {
      const engines = async (): Promise<Engine[]> => {
        const res = await fetch(`${server.url}/api/engines`, { headers: { authorization: `Bearer ${KEY}` } });
        assert.equal(res.status, 200);
        return ((await res.json()) as { data: Engine[] }).data;
      };
      assert.equal(
        (await engines()).some((e) => e.id === 'hup'),
        false,
        'not listed before',
      );
      makeTinyVits(modelsDir, 'hup', 1);
      await sleep(500);
      assert.equal(
        (await engines()).some((e) => e.id === 'hup'),
        false,
        'no rescan without the signal',
      );

      server.child.kill('SIGHUP');
      const deadline = Date.now() + 30_000;
      let listed: Engine | undefined;
      while (listed === undefined && Date.now() < deadline) {
        listed = (await engines()).find((e) => e.id === 'hup');
        if (listed === undefined) await sleep(200);
      }
      assert.equal(listed?.available, true, `listed and available after SIGHUP: ${server.stderr()}`);
      assert.equal(server.child.exitCode, null, 'the process keeps running');
    } finally {
      assert.equal(await server.stop(), 0);
    }
  });
});
