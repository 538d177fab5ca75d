// A start that fails hands back nothing, so whatever the entry point already started must be closed
// by buildApp itself: the database main.ts opens before it loads the app included.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { openDatabaseFor } from '../src/adapters.js';
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/config/config.js';
import type { DatabaseHandle } from '../src/storage/database.js';

describe('a start that fails', () => {
  it('closes the database the entry point passed in, before anything else was opened', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-start-failure-'));
    try {
      const config = loadConfig({ DATA_DIR: dataDir, PORT: '0', LOG_LEVEL: 'silent' });
      const handle = await openDatabaseFor(config, { inMemory: true });
      let closed = 0;
      const database: Promise<DatabaseHandle> = Promise.resolve({
        ...handle,
        close: async () => {
          closed++;
          await handle.close();
        },
      });
      // A logger pino refuses: the HTTP server, the first thing built, cannot be made.
      await assert.rejects(buildApp(config, { database, logger: { level: 'no-such-level' } }), /level/);
      assert.equal(closed, 1);
    } finally {
      await rm(dataDir, { recursive: true, force: true });
    }
  });
});
