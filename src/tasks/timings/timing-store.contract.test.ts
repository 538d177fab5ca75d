/**
 * TimingStore on the embedded database and on the PostgreSQL test server: sentences are written
 * under the task's lease token only, replaced when a piece is generated again, read in order.
 */
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { freshPostgresDatabase } from '../../../test/helpers/servers.js';
import { openDatabase, type DatabaseHandle } from '../../storage/database.js';
import { LeaseLostError } from '../queue/task-queue.js';
import type { SentenceTiming } from './timing-collector.js';
import { MAX_TIMED_SENTENCES_PER_PIECE, TimingStore } from './timing-store.js';

async function insertTask(handle: DatabaseHandle, id: string, token: string): Promise<void> {
  await handle.db
    .insertInto('accounts')
    .values({ id: 'acct', name: 'timings', created_at: new Date() })
    .onConflict((oc) => oc.doNothing())
    .execute();
  const now = new Date();
  await handle.db
    .insertInto('tasks')
    .values({
      id,
      account_id: 'acct',
      status: 'processing',
      type: 'contents',
      auth_token: '0'.repeat(32),
      request: '{}',
      characters: 5,
      error: null,
      attempts: 1,
      lease_token: token,
      worker_url: null,
      audio_key: null,
      duration_seconds: null,
      created_at: now,
      updated_at: now,
      generated_at: null,
    })
    .execute();
}

function sentence(seq: number, start: number): SentenceTiming {
  return {
    seq,
    start,
    end: start + 1000,
    textStart: seq * 10,
    textEnd: seq * 10 + 9,
    words: [{ start, end: start + 400, textStart: seq * 10, textEnd: seq * 10 + 4 }],
  };
}

const databases = [
  {
    name: 'embedded (PGlite)',
    open: async () => {
      const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-timings-'));
      const handle = await openDatabase({ dataDir });
      return { handle, drop: () => rm(dataDir, { recursive: true, force: true }) };
    },
  },
  {
    name: 'PostgreSQL',
    open: async () => {
      const server = await freshPostgresDatabase();
      const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-timings-'));
      const handle = await openDatabase({ dataDir, databaseUrl: server.url });
      return {
        handle,
        drop: async () => {
          await rm(dataDir, { recursive: true, force: true });
          await server.drop();
        },
      };
    },
  },
];

for (const database of databases) {
  void describe(`TimingStore: ${database.name}`, () => {
    let opened: Awaited<ReturnType<(typeof databases)[number]['open']>>;
    let store: TimingStore;
    before(async () => {
      opened = await database.open();
      store = new TimingStore(opened.handle.db);
    });
    after(async () => {
      await opened.handle.close();
      await opened.drop();
    });

    void test('appends under the lease token and reads by content, then order', async () => {
      await insertTask(opened.handle, 'task-1', 'token-1');
      await store.append('task-1', 1, [sentence(0, 0)], 'token-1');
      await store.append('task-1', 0, [sentence(0, 100), sentence(1, 2000)], 'token-1');
      const all = await store.list('task-1');
      assert.deepEqual(
        all.map((s) => [s.contentIdx, s.seq, s.start]),
        [
          [0, 0, 100],
          [0, 1, 2000],
          [1, 0, 0],
        ],
      );
      assert.deepEqual(all[0]?.words, [{ start: 100, end: 500, textStart: 0, textEnd: 4 }]);
      assert.deepEqual(
        (await store.list('task-1', 1)).map((s) => s.contentIdx),
        [1],
      );
    });

    void test('refuses a writer whose lease is gone, and clears only under the token', async () => {
      await insertTask(opened.handle, 'task-2', 'token-2');
      await store.append('task-2', 0, [sentence(0, 0)], 'token-2');
      await assert.rejects(store.append('task-2', 0, [sentence(1, 5000)], 'stale'), LeaseLostError);
      await store.clearPiece('task-2', 0, 'stale');
      assert.equal((await store.list('task-2')).length, 1);
      await store.clearPiece('task-2', 0, 'token-2');
      assert.equal((await store.list('task-2')).length, 0);
    });

    void test('replaces a sentence written again and keeps at most the bound per piece', async () => {
      await insertTask(opened.handle, 'task-3', 'token-3');
      await store.append('task-3', 0, [sentence(0, 0)], 'token-3');
      await store.append('task-3', 0, [sentence(0, 300)], 'token-3');
      await store.append('task-3', 0, [sentence(MAX_TIMED_SENTENCES_PER_PIECE, 900)], 'token-3');
      assert.deepEqual(
        (await store.list('task-3')).map((s) => s.start),
        [300],
      );
    });

    void test('goes with its task', async () => {
      await insertTask(opened.handle, 'task-4', 'token-4');
      await store.append('task-4', 0, [sentence(0, 0)], 'token-4');
      await opened.handle.db.deleteFrom('tasks').where('id', '=', 'task-4').execute();
      assert.deepEqual(await store.list('task-4'), []);
    });
  });
}
