import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { freshPostgresDatabase } from '../test/helpers/servers.js';
import { bearer, startTestApp } from '../test/helpers/test-app.js';
import { SqlAccountStore } from './accounts/account-store.sql.js';
import { warmUpDatabase } from './database-warm-up.js';
import { openDatabase, type DatabaseHandle } from './storage/database.js';
import { createPgliteTemplate } from './storage/database.pglite.js';
import { TaskStore } from './tasks/task-store.js';

const TABLES = [
  'accounts',
  'api_keys',
  'voices',
  'tasks',
  'task_contents',
  'task_timings',
  'account_daily_usage',
] as const;

/** Rows of every table the warm-up writes to. */
async function rowCounts(handle: DatabaseHandle): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const table of TABLES) {
    const result = await sql<{ n: string }>`select count(*) as n from ${sql.table(table)}`.execute(handle.db);
    counts.set(table, Number(result.rows[0]?.n));
  }
  return counts;
}

const adapters: {
  kind: string;
  open: () => Promise<{ handle: DatabaseHandle; dispose: () => Promise<void> }>;
}[] = [
  {
    kind: 'pglite',
    open: async () => {
      const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-warm-up-'));
      const handle = await openDatabase({ dataDir, pgliteTemplate: await createPgliteTemplate() });
      return {
        handle,
        dispose: async () => {
          await handle.close();
          await rm(dataDir, { recursive: true, force: true });
        },
      };
    },
  },
  {
    kind: 'postgres',
    open: async () => {
      const database = await freshPostgresDatabase();
      const handle = await openDatabase({
        dataDir: join(tmpdir(), `voicegen-unused-${randomUUID()}`),
        databaseUrl: database.url,
      });
      return {
        handle,
        dispose: async () => {
          await handle.close();
          await database.drop();
        },
      };
    },
  },
];

for (const adapter of adapters) {
  describe(`database warm-up: ${adapter.kind}`, () => {
    let handle: DatabaseHandle;
    let dispose: () => Promise<void>;
    before(async () => {
      ({ handle, dispose } = await adapter.open());
    });
    after(() => dispose());

    test('runs the service statements and leaves nothing behind, while other statements are answered', async () => {
      const accounts = new SqlAccountStore(handle.db);
      const tasks = new TaskStore(handle.db);
      const existing = { id: randomUUID(), name: `before-${randomUUID()}`, createdAt: new Date() };
      await accounts.insertAccount(existing);
      const before = await rowCounts(handle);
      const warming = warmUpDatabase(handle, new AbortController().signal, 3);
      // Statements of the service meanwhile: answered, and what they write stays.
      const added = { id: randomUUID(), name: `during-${randomUUID()}`, createdAt: new Date() };
      const [, page] = await Promise.all([
        accounts.insertAccount(added),
        tasks.list(existing.id, 10, 0, undefined, { count: 2, textChars: 10 }),
      ]);
      assert.deepEqual(page, { rows: [], total: 0 });
      await warming;
      assert.deepEqual(
        await rowCounts(handle),
        new Map([...before, ['accounts', (before.get('accounts') ?? 0) + 1]]),
      );
      assert.equal((await accounts.accountById(added.id))?.name, added.name);
    });

    test('stops at the round it is in when aborted', async () => {
      const stop = new AbortController();
      const before = await rowCounts(handle);
      const warming = warmUpDatabase(handle, stop.signal, Number.MAX_SAFE_INTEGER);
      setTimeout(() => stop.abort(), 50);
      await warming;
      assert.deepEqual(await rowCounts(handle), before);
    });
  });
}

describe('database warm-up in the service', () => {
  test('requests are answered while it runs, and closing the service stops it', async () => {
    const app = await startTestApp({ warmUpDatabase: true });
    try {
      const response = await app.app.http.inject({
        method: 'GET',
        url: '/api/tts/generate?limit=5',
        headers: bearer(app.key),
      });
      assert.equal(response.statusCode, 200);
    } finally {
      // Right after start the warm-up is still running: closing must end it, not wait it out.
      await app.close();
    }
  });
});
