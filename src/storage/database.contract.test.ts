/**
 * The metadata-store contract, one suite run against both adapters: embedded PGlite in a temporary
 * DATA_DIR (seeded from a migrated template instead of initdb) and a fresh database on the real
 * PostgreSQL test server. Followed by what only one adapter has: concurrent starts of several nodes
 * on PostgreSQL, and the DATA_DIR lock of the embedded database (in this process, in child processes,
 * stale locks left by killed processes).
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { mkdir, mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { hostname, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { sql } from 'kysely';
import { freshPostgresDatabase } from '../../test/helpers/servers.js';
import { archive as tarArchive, entry as tarEntry } from '../../test/helpers/tar.js';
import { AccountService } from '../accounts/account-service.js';
import { SqlAccountStore } from '../accounts/account-store.sql.js';
import { isAppError } from '../errors/app-error.js';
import { SplitterStore } from '../splitter/splitter-store.js';
import { TaskStore } from '../tasks/task-store.js';
import { VoiceStore } from '../voices/voice-store.js';
import {
  DATA_DIR_LOCK_FILE,
  DataDirLockedError,
  acquireDataDirLock,
  readDataDirLock,
  staleLockClaimPath,
} from './data-dir-lock.js';
import { openDatabase, type DatabaseHandle } from './database.js';
import { createPgliteTemplate } from './database.pglite.js';
import { MIGRATION_ADVISORY_LOCK_KEY } from './database.postgres.js';
import { migrations } from './migrations/index.js';
import type { TaskRow, VoiceRow } from './schema.js';

/** Generous upper bound for one test on a busy machine; a hang fails instead of blocking the run. */
const TEST_DEADLINE = { timeout: 120_000 };
const HERE = fileURLToPath(new URL('.', import.meta.url));
const REPO = resolve(HERE, '../..');
/** What the task list asks of its rows' pieces in these tests: the first two, texts cut to three characters. */
const LIST_CONTENTS = { count: 2, textChars: 3 };

let template: Promise<Blob> | undefined;
/** One migrated PGlite dump per test run: each embedded database here starts from it (≈0.5 s, no initdb). */
function pgliteTemplate(): Promise<Blob> {
  template ??= createPgliteTemplate();
  return template;
}

/** A new, empty database of one adapter; `open` may be called again after closing (a restart). */
interface FreshDatabase {
  open(options?: { migrationLockTimeoutMs?: number }): Promise<DatabaseHandle>;
  dispose(): Promise<void>;
}

interface AdapterUnderTest {
  kind: DatabaseHandle['kind'];
  fresh(): Promise<FreshDatabase>;
}

const pgliteAdapter: AdapterUnderTest = {
  kind: 'pglite',
  fresh: async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-db-contract-'));
    const seed = await pgliteTemplate();
    return {
      open: () => openDatabase({ dataDir, pgliteTemplate: seed }),
      dispose: () => rm(dataDir, { recursive: true, force: true }),
    };
  },
};

const postgresAdapter: AdapterUnderTest = {
  kind: 'postgres',
  fresh: async () => {
    const database = await freshPostgresDatabase();
    // DATA_DIR is not used with a database URL: a path that does not exist proves it.
    const dataDir = join(tmpdir(), `voicegen-unused-${randomUUID()}`);
    return {
      open: (options) => openDatabase({ dataDir, databaseUrl: database.url, ...options }),
      dispose: database.drop,
    };
  },
};

async function appliedMigrations(handle: DatabaseHandle): Promise<{ name: string; timestamp: string }[]> {
  const result = await sql<{
    name: string;
    timestamp: string;
  }>`select name, timestamp from kysely_migration order by name`.execute(handle.db);
  return result.rows;
}

function voiceRow(accountId: string, createdAt: Date, values: Partial<VoiceRow> = {}): VoiceRow {
  return {
    id: randomUUID(),
    account_id: accountId,
    name: 'voice',
    status: 'ready',
    version: 'v2.0',
    language: 'en',
    description: '',
    engine: JSON.stringify({ engine: 'espeak', voice: 'en-us' }),
    with_lora: false,
    lora_bytes: '0',
    reference_bytes: '0',
    lora_key: null,
    created_at: createdAt,
    updated_at: createdAt,
    ...values,
  };
}

function taskRow(accountId: string, createdAt: Date, values: Partial<TaskRow> = {}): TaskRow {
  return {
    id: randomUUID(),
    account_id: accountId,
    status: 'pending',
    type: 'contents',
    auth_token: randomUUID().replaceAll('-', ''),
    request: JSON.stringify({ contents: [{ text: 'hello' }] }),
    characters: 5,
    error: null,
    attempts: 0,
    lease_token: null,
    worker_url: null,
    audio_key: null,
    duration_seconds: null,
    created_at: createdAt,
    updated_at: createdAt,
    generated_at: null,
    cancel_reason: null,
    audio_bytes: '0',
    ...values,
  };
}

/** Distinct, increasing creation times (a shared clock would give equal ones). */
function timeline(count: number): Date[] {
  const start = Date.UTC(2025, 0, 1);
  return Array.from({ length: count }, (_, i) => new Date(start + i * 1000));
}

for (const adapter of [pgliteAdapter, postgresAdapter]) {
  describe(`metadata store contract: ${adapter.kind}`, () => {
    let database: FreshDatabase;
    let handle: DatabaseHandle;
    let accounts: AccountService;
    let counter = 0;
    const newAccountId = async () => (await accounts.createAccount(`acct-${++counter}`)).id;

    before(async () => {
      database = await adapter.fresh();
      handle = await database.open();
      accounts = new AccountService(new SqlAccountStore(handle.db));
    }, TEST_DEADLINE);

    after(async () => {
      await handle.close();
      await database.dispose();
    }, TEST_DEADLINE);

    test('opens the selected adapter with every migration applied once', async () => {
      assert.equal(handle.kind, adapter.kind);
      const applied = await appliedMigrations(handle);
      assert.deepEqual(
        applied.map((m) => m.name),
        Object.keys(migrations).sort(),
      );
    });

    test('reopening applies nothing again and keeps the data', TEST_DEADLINE, async () => {
      const applied = await appliedMigrations(handle);
      const account = await accounts.createAccount('survives-restart');
      await handle.close();
      await handle.close(); // closing twice is harmless
      handle = await database.open();
      accounts = new AccountService(new SqlAccountStore(handle.db));
      assert.deepEqual(await appliedMigrations(handle), applied);
      assert.deepEqual(await accounts.getAccount(account.id), account);
    });

    test('bigint columns and counts come back as text on both adapters', async () => {
      const result = await sql<{
        big: unknown;
        n: unknown;
      }>`select 9007199254740993::bigint as big, count(*) as n
        from accounts`.execute(handle.db);
      const row = result.rows[0];
      assert.equal(row?.big, '9007199254740993');
      assert.equal(typeof row?.n, 'string');
    });

    test('parameters of every type the stores pass, and changed-row counts, answer the same on both adapters', async () => {
      const at = new Date('2026-01-02T03:04:05.678Z');
      const result = await sql<Record<string, unknown>>`select
          ${"text, with 'quotes' and ünïcode"}::text as text,
          ${42}::int as int, ${0.25}::float8 as float, ${true}::boolean as yes, ${false}::boolean as no,
          ${at}::timestamptz as at, ${null}::text as nothing, ${'{"a":1}'}::jsonb as json,
          ${7} + 1 as inferred`.execute(handle.db);
      assert.deepEqual(result.rows, [
        {
          text: "text, with 'quotes' and ünïcode",
          int: 42,
          float: 0.25,
          yes: true,
          no: false,
          at,
          nothing: null,
          json: { a: 1 },
          inferred: 8,
        },
      ]);
      const name = `counted-${randomUUID()}`;
      const ids = [randomUUID(), randomUUID(), randomUUID()];
      const inserted = await handle.db
        .insertInto('accounts')
        .values(ids.map((id, i) => ({ id, name: `${name}-${i}`, created_at: at })))
        .executeTakeFirst();
      assert.equal(inserted.numInsertedOrUpdatedRows, 3n);
      const updated = await handle.db
        .updateTable('accounts')
        .set({ created_at: new Date() })
        .where('id', 'in', ids.slice(0, 2))
        .executeTakeFirst();
      assert.equal(updated.numUpdatedRows, 2n);
      const deleted = await handle.db.deleteFrom('accounts').where('id', 'in', ids).executeTakeFirst();
      assert.equal(deleted.numDeletedRows, 3n);
      const none = await handle.db.deleteFrom('accounts').where('id', 'in', ids).executeTakeFirst();
      assert.equal(none.numDeletedRows, 0n);
    });

    test('statements sent again and again answer as the first time: hundreds of distinct ones, failures between them', async () => {
      // The embedded adapter keeps the statements it has seen prepared (a few hundred at most):
      // every answer must be what a statement parsed afresh would give.
      for (let round = 0; round < 2; round++) {
        for (let n = 0; n < 250; n++) {
          const result = await sql<{
            n: number;
            twice: number;
          }>`select ${sql.lit(n)}::int as n, ${n}::int * 2 as twice`.execute(handle.db);
          assert.deepEqual(result.rows, [{ n, twice: 2 * n }]);
        }
      }
      const divide = (by: number) => sql<{ q: number }>`select 12 / ${by}::int as q`.execute(handle.db);
      assert.deepEqual((await divide(4)).rows, [{ q: 3 }]);
      await assert.rejects(divide(0), (err: unknown) => (err as { code?: unknown }).code === '22012');
      assert.deepEqual((await divide(3)).rows, [{ q: 4 }]);
      const broken = () => sql`select from where ${1}`.execute(handle.db);
      for (let i = 0; i < 2; i++)
        await assert.rejects(broken(), (err: unknown) => (err as { code?: unknown }).code === '42601');
      // A transaction aborted by a failed statement: its statements are refused until the rollback,
      // and afterwards the same statements run again.
      await assert.rejects(
        handle.db.transaction().execute(async (trx) => {
          assert.deepEqual((await sql<{ q: number }>`select 12 / ${6}::int as q`.execute(trx)).rows, [
            { q: 2 },
          ]);
          await sql`select 12 / ${0}::int as q`.execute(trx).catch(() => undefined);
          await sql`select 12 / ${6}::int as q`.execute(trx);
        }),
        (err: unknown) => (err as { code?: unknown }).code === '25P02', // in_failed_sql_transaction
      );
      assert.deepEqual((await divide(6)).rows, [{ q: 2 }]);
    });

    test('a chain of transactions, each begun when the one before commits, lets the event loop turn', async () => {
      // A burst of task creations or claims is such a chain; waited for on the spot in one turn of
      // the loop, 50 of them held it for up to a second.
      const TRANSACTIONS = 200;
      let done = 0;
      let doneWhenTurned: number | undefined;
      setImmediate(() => (doneWhenTurned = done));
      for (let i = 0; i < TRANSACTIONS; i++) {
        await handle.db.transaction().execute(async (trx) => {
          for (let s = 0; s < 4; s++) await sql`select count(*) from accounts`.execute(trx);
        });
        done++;
      }
      assert.ok(
        doneWhenTurned !== undefined && doneWhenTurned < TRANSACTIONS,
        `turned after ${String(doneWhenTurned)}`,
      );
    });

    test('a transaction run as background work lets the event loop turn between its statements', async () => {
      // The embedded warm-up's transactions: waited for on the spot, each held the loop for tens
      // of milliseconds right after start. Other transactions' statements still are, and the
      // embedded one's too once another statement waits for the session.
      const STATEMENTS = 20;
      const turnsDuring = async (background: boolean, contended = false): Promise<number> => {
        let waiting: Promise<unknown> | undefined;
        let turns = 0;
        let counting = true;
        const count = () => {
          turns++;
          if (counting) setImmediate(count);
        };
        setImmediate(count);
        await handle.db.transaction().execute(async (trx) => {
          const statements = async () => {
            for (let s = 0; s < STATEMENTS; s++) await sql`select count(*) from accounts`.execute(trx);
          };
          if (contended) {
            waiting = sql`select 1`.execute(handle.db);
            // At the session's gate (a turn later), waiting for this transaction to end.
            await new Promise((resolve) => setImmediate(resolve));
          }
          turns = 0;
          await (background ? handle.inBackground(statements) : statements());
          counting = false;
        });
        await waiting;
        return turns;
      };
      const turns = await turnsDuring(true);
      assert.ok(turns >= STATEMENTS, `${String(turns)} turns during ${String(STATEMENTS)} statements`);
      if (adapter.kind === 'pglite') {
        const inForeground = await turnsDuring(false);
        assert.ok(inForeground < STATEMENTS, `${String(inForeground)} turns in the foreground`);
        const waitedFor = await turnsDuring(true, true);
        assert.ok(waitedFor < STATEMENTS, `${String(waitedFor)} turns with a statement waiting`);
      }
    });

    test("a failed statement carries PostgreSQL's error fields; the database keeps working", async () => {
      await assert.rejects(sql`select 1 / 0 as never`.execute(handle.db), (err: unknown) => {
        assert.ok(err instanceof Error);
        assert.equal((err as { code?: unknown }).code, '22012'); // division_by_zero
        assert.match(err.message, /division by zero/);
        return true;
      });
      // A transaction that fails is rolled back whole; the next statements run as usual.
      const name = `rolled-back-${randomUUID()}`;
      await assert.rejects(
        handle.db.transaction().execute(async (trx) => {
          await trx
            .insertInto('accounts')
            .values({ id: randomUUID(), name, created_at: new Date() })
            .execute();
          await sql`select 1 / 0 as never`.execute(trx);
        }),
        (err: unknown) => (err as { code?: unknown }).code === '22012',
      );
      const left = await handle.db.selectFrom('accounts').select('id').where('name', '=', name).execute();
      assert.deepEqual(left, []);
    });

    test('a long statement does not hold the event loop of the caller', TEST_DEADLINE, async () => {
      // The embedded database runs in a worker thread: HTTP requests are answered meanwhile.
      let timerFired = false;
      const timer = setTimeout(() => (timerFired = true), 20);
      try {
        await sql`select pg_sleep(1)`.execute(handle.db);
        assert.ok(timerFired, 'a 20 ms timer waited for a 1 s statement');
      } finally {
        clearTimeout(timer);
      }
    });

    test('statements of concurrent callers are each answered with their own rows', async () => {
      const answers = await Promise.all(
        Array.from({ length: 200 }, (_, n) =>
          sql<{ n: number }>`select ${n}::int as n, pg_sleep(${n % 20 === 0 ? 0.01 : 0})`.execute(handle.db),
        ),
      );
      assert.deepEqual(
        answers.map((a) => a.rows[0]?.n),
        Array.from({ length: 200 }, (_, n) => n),
      );
    });

    test("a statement sent while another caller's transaction is open is not part of it", async () => {
      const inside = `inside-${randomUUID()}`;
      const outside = `outside-${randomUUID()}`;
      let outsideWrite: Promise<unknown> | undefined;
      await assert.rejects(
        handle.db.transaction().execute(async (trx) => {
          await trx
            .insertInto('accounts')
            .values({ id: randomUUID(), name: inside, created_at: new Date() })
            .execute();
          outsideWrite = handle.db
            .insertInto('accounts')
            .values({ id: randomUUID(), name: outside, created_at: new Date() })
            .execute();
          await sql`select pg_sleep(0.05)`.execute(trx);
          throw new Error('roll back');
        }),
        /roll back/,
      );
      await outsideWrite;
      const names = await handle.db
        .selectFrom('accounts')
        .select('name')
        .where('name', 'in', [inside, outside])
        .execute();
      assert.deepEqual(
        names.map((r) => r.name),
        [outside],
      );
    });

    test('a transaction whose COMMIT fails leaves the next transaction alone', async () => {
      // A deferred unique constraint fails at COMMIT; Kysely then rolls back, which must not reach
      // the transaction that was waiting for the session and began meanwhile.
      const table = `deferred_${randomUUID().replaceAll('-', '')}`;
      await sql`create table ${sql.table(table)} (v int, unique (v) deferrable initially deferred)`.execute(
        handle.db,
      );
      const failing = handle.db.transaction().execute(async (trx) => {
        await sql`insert into ${sql.table(table)} values (1), (1)`.execute(trx);
      });
      const next = handle.db.transaction().execute(async (trx) => {
        await sql`insert into ${sql.table(table)} values (2)`.execute(trx);
        await sql`select pg_sleep(0.05)`.execute(trx);
      });
      const [failed, committed] = await Promise.allSettled([failing, next]);
      assert.equal(failed.status, 'rejected');
      assert.equal(failed.status === 'rejected' && (failed.reason as { code?: unknown }).code, '23505'); // unique_violation
      assert.equal(committed.status, 'fulfilled');
      const rows = await sql<{ v: number }>`select v from ${sql.table(table)}`.execute(handle.db);
      assert.deepEqual(
        rows.rows.map((r) => r.v),
        [2],
      );
      await sql`drop table ${sql.table(table)}`.execute(handle.db);
    });

    test('accounts: create, look up, names are unique', async () => {
      const created = await accounts.createAccount('  alice  ');
      assert.equal(created.name, 'alice');
      assert.deepEqual(await accounts.getAccount(created.id), created);
      assert.deepEqual(await accounts.findAccountByName('alice'), created);
      assert.deepEqual(await accounts.resolveAccount('alice'), created);
      await assert.rejects(accounts.createAccount('alice'), (err: unknown) => {
        assert.ok(isAppError(err));
        assert.equal(err.code, 'VALIDATION_CONFLICT');
        return true;
      });
      // Racing creations of one name: the unique constraint lets exactly one through.
      const raced = await Promise.allSettled(
        Array.from({ length: 5 }, () => accounts.createAccount('raced-name')),
      );
      assert.equal(raced.filter((r) => r.status === 'fulfilled').length, 1);
      const named = (await accounts.listAccounts()).filter((a) => a.name === 'raced-name');
      assert.equal(named.length, 1);
    });

    test('API keys: create, list, authenticate, revoke', async () => {
      const accountId = await newAccountId();
      const first = await accounts.createKey(accountId);
      const second = await accounts.createKey(accountId);
      assert.equal((await accounts.authenticate(first.key)).id, accountId);
      const listed = await accounts.listKeys(accountId);
      assert.deepEqual(listed.map((k) => k.id).sort(), [first.info.id, second.info.id].sort());
      assert.deepEqual(listed.map((k) => k.prefix).sort(), [first.info.prefix, second.info.prefix].sort());
      assert.ok(listed.every((k) => k.revokedAt === null));

      await accounts.revokeKey(first.info.id);
      await assert.rejects(accounts.authenticate(first.key), (err: unknown) => {
        assert.ok(isAppError(err));
        assert.equal(err.code, 'AUTH_UNAUTHORIZED');
        return true;
      });
      assert.equal((await accounts.authenticate(second.key)).id, accountId);
      await assert.rejects(accounts.revokeKey(first.info.id), (err: unknown) => {
        assert.ok(isAppError(err));
        assert.equal(err.code, 'RESOURCE_NOT_FOUND');
        return true;
      });
      const revoked = (await accounts.listKeys(accountId)).find((k) => k.id === first.info.id);
      assert.ok(revoked?.revokedAt instanceof Date);
    });

    test('authenticated keys are remembered for authCacheMs; a revocation through the service forgets them at once', async () => {
      const cached = new AccountService(new SqlAccountStore(handle.db), { authCacheMs: 60_000 });
      const accountId = await newAccountId();
      const issued = await cached.createKey(accountId);
      assert.equal((await cached.authenticate(issued.key)).id, accountId);
      // Revoked behind the service's back (another node, the database directly): still remembered.
      await handle.db
        .updateTable('api_keys')
        .set({ revoked_at: new Date() })
        .where('id', '=', issued.info.id)
        .execute();
      assert.equal((await cached.authenticate(issued.key)).id, accountId);
      assert.equal(
        await accounts.authenticate(issued.key).catch(() => 'refused'),
        'refused',
        'no cache: refused',
      );
      // Revoked through the service: forgotten at once.
      const other = await cached.createKey(accountId);
      assert.equal((await cached.authenticate(other.key)).id, accountId);
      await cached.revokeKey(other.info.id);
      await assert.rejects(
        cached.authenticate(other.key),
        (err: unknown) => isAppError(err) && err.code === 'AUTH_UNAUTHORIZED',
      );
      await assert.rejects(
        cached.authenticate(issued.key),
        (err: unknown) => isAppError(err) && err.code === 'AUTH_UNAUTHORIZED',
      );
    });

    test('voices: insert, get, pages newest first with the total, per account', async () => {
      const voices = new VoiceStore(handle.db);
      const accountId = await newAccountId();
      const otherAccountId = await newAccountId();
      const rows = timeline(5).map((at, i) => voiceRow(accountId, at, { name: `v${i}` }));
      for (const row of rows) await voices.insert(row);
      await voices.insert(voiceRow(otherAccountId, new Date()));

      const stored = await voices.get(accountId, rows[0]?.id ?? '');
      assert.deepEqual(stored, rows[0]);
      assert.equal(await voices.get(otherAccountId, rows[0]?.id ?? ''), undefined);

      const newestFirst = [...rows].reverse().map((r) => r.name);
      const page1 = await voices.list(accountId, 2, 0);
      const page3 = await voices.list(accountId, 2, 4);
      assert.equal(page1.total, 5);
      assert.deepEqual(
        page1.rows.map((r) => r.name),
        newestFirst.slice(0, 2),
      );
      assert.deepEqual(
        page3.rows.map((r) => r.name),
        newestFirst.slice(4),
      );
      assert.deepEqual(await voices.list(accountId, 2, 10), { rows: [], total: 5 });

      assert.equal(await voices.delete(accountId, rows[4]?.id ?? ''), true);
      assert.equal(await voices.delete(accountId, rows[4]?.id ?? ''), false);
      assert.equal((await voices.list(accountId, 10, 0)).total, 4);
    });

    test('voices: of 20 concurrent version migrations exactly one wins', async () => {
      const voices = new VoiceStore(handle.db);
      const accountId = await newAccountId();
      const row = voiceRow(accountId, new Date(), { version: 'v1.0' });
      await voices.insert(row);
      const results = await Promise.all(
        Array.from({ length: 20 }, () => voices.migrateVersion(accountId, row.id, ['v1.0', 'v2.0'], 'v3.0')),
      );
      assert.equal(results.filter(Boolean).length, 1);
      assert.equal((await voices.get(accountId, row.id))?.version, 'v3.0');
      // A LoRA voice is never migrated.
      const lora = voiceRow(accountId, new Date(), { with_lora: true });
      await voices.insert(lora);
      assert.equal(await voices.migrateVersion(accountId, lora.id, ['v2.0'], 'v3.0'), false);
    });

    test('splitters: insert, get, update only over the whole expected record, delete', async () => {
      const splitters = new SplitterStore(handle.db);
      const accountId = await newAccountId();
      const [createdAt, changedAt] = timeline(2) as [Date, Date];
      // Key order is data: the config text must come back byte for byte.
      const config = '{"<B>":{"voiceId":"b"},"<A>":{"voiceId":"a"}}';
      const row = {
        id: randomUUID(),
        account_id: accountId,
        name: 'dialogue',
        config,
        created_at: createdAt,
        updated_at: createdAt,
      };
      assert.equal(await splitters.insert(row), undefined);
      assert.deepEqual(await splitters.get(accountId, row.id), row);

      const expected = { name: row.name, config, updated_at: createdAt };
      const next = { name: 'renamed', config: '{"<A>":{"voiceId":"c"}}', updated_at: changedAt };
      assert.equal(
        await splitters.update(accountId, row.id, { ...expected, config: 'not-the-config' }, next),
        'conflict',
      );
      // A rename alone changes the record: an update that read the old name must not apply.
      assert.equal(
        await splitters.update(accountId, row.id, { ...expected, name: 'not-the-name' }, next),
        'conflict',
      );
      // Concurrent writers that all read the same record: exactly one applies its change.
      const raced = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          splitters.update(accountId, row.id, expected, { ...next, name: `writer-${i}` }),
        ),
      );
      assert.equal(raced.filter((r) => r === 'changed').length, 1);
      const updated = await splitters.get(accountId, row.id);
      assert.equal(updated?.config, next.config);
      assert.match(updated?.name ?? '', /^writer-\d$/);

      const page = await splitters.listSummaries(accountId, 10, 0);
      assert.equal(page.total, 1);
      assert.equal(page.rows[0]?.bytes, Buffer.byteLength(next.config));
      assert.deepEqual(await splitters.usage(accountId), {
        splitters: 1,
        splitterBytes: Buffer.byteLength(next.config),
      });
      assert.equal(await splitters.delete(accountId, row.id), true);
      assert.equal(await splitters.get(accountId, row.id), undefined);
      assert.equal(await splitters.delete(accountId, row.id), false);
    });

    test('splitters: concurrent saves never pass the account limits together', async () => {
      const splitters = new SplitterStore(handle.db);
      const accountId = await newAccountId();
      const limits = { splitters: 5, splitterBytes: 1000, voices: 0, uploadBytes: 0, taskBytes: 0 };
      const row = (config: string) => ({
        id: randomUUID(),
        account_id: accountId,
        name: 'n',
        config,
        created_at: new Date(),
        updated_at: new Date(),
      });
      const results = await Promise.all(
        Array.from({ length: 12 }, () => splitters.insert(row('{"a":{}}'), limits)),
      );
      assert.equal(results.filter((r) => r === undefined).length, 5);
      assert.deepEqual(
        results.find((r) => r !== undefined),
        { limit: 'splitters', max: 5, used: 5, adding: 1 },
      );
      const big = row(`{"a":{"x":"${'y'.repeat(1000)}"}}`);
      await splitters.delete(accountId, (await splitters.listSummaries(accountId, 1, 0)).rows[0]?.id ?? '');
      const refused = await splitters.insert(big, limits);
      assert.equal(refused?.limit, 'splitterBytes');
      assert.equal(await splitters.get(accountId, big.id), undefined);
      // Growing a saved config is checked against the bytes limit; shrinking never is.
      const [kept] = (await splitters.listSummaries(accountId, 1, 0)).rows;
      const current = await splitters.get(accountId, kept?.id ?? '');
      assert.ok(current);
      const fields = { name: current.name, config: current.config, updated_at: current.updated_at };
      const grown = { ...fields, config: big.config, updated_at: new Date() };
      const outcome = await splitters.update(accountId, current.id, fields, grown, limits);
      assert.equal(typeof outcome === 'object' && outcome.limit, 'splitterBytes');
      assert.equal((await splitters.get(accountId, current.id))?.config, current.config);
    });

    test('tasks: insert with pieces, get, list newest first filtered by status', async () => {
      const tasks = new TaskStore(handle.db);
      const accountId = await newAccountId();
      const times = timeline(3);
      const generatedAt = new Date('2026-11-30T01:02:03.456Z');
      const rows = times.map((at, i) =>
        taskRow(accountId, at, { status: i === 1 ? 'generated' : 'pending', characters: i + 1 }),
      );
      // The oldest task speaks voices b, a, b; the next two speak one voice each.
      const voicesOf = [
        ['b', 'a', 'b'],
        ['voice', 'voice'],
        ['voice', 'voice'],
      ];
      for (const [i, task] of rows.entries()) {
        await tasks.insert({
          task,
          pieces: (voicesOf[i] ?? []).map((voice, idx) => ({
            task_id: task.id,
            idx,
            text: idx === 0 ? `ünïcode piece ${idx}` : `piece ${idx}`,
            voice_id: voice,
            binding: '{}',
            params: '{}',
            // The oldest task's first piece is generated.
            ...(i === 0 && idx === 0
              ? { status: 'generated' as const, samples: 22_050, audio_key: 'k0', generated_at: generatedAt }
              : { status: 'pending' as const }),
          })),
        });
      }
      assert.deepEqual(await tasks.get(rows[0]?.id ?? ''), rows[0]);
      assert.equal(await tasks.get(randomUUID()), undefined);
      const all = await tasks.list(accountId, 10, 0, undefined, LIST_CONTENTS);
      assert.equal(all.total, 3);
      assert.deepEqual(
        all.rows.map((r) => r.id),
        [...rows].reverse().map((r) => r.id),
      );
      // Pieces counted per task, voices in order of first use; nothing but the summary's fields.
      assert.deepEqual(
        all.rows.map((r) => [r.contentsCount, r.voiceIds]),
        [
          [2, ['voice']],
          [2, ['voice']],
          [3, ['b', 'a']],
        ],
      );
      const oldest = all.rows[2];
      assert.ok(oldest);
      // Its first two pieces, texts cut to three characters plus one (in characters, not bytes).
      assert.deepEqual(oldest.firstPieces, [
        {
          task_id: oldest.id,
          idx: 0,
          text: 'ünïc',
          voice_id: 'b',
          status: 'generated',
          samples: '22050',
          audio_key: 'k0',
          generated_at: generatedAt,
        },
        {
          task_id: oldest.id,
          idx: 1,
          text: 'piec',
          voice_id: 'a',
          status: 'pending',
          samples: null,
          audio_key: null,
          generated_at: null,
        },
      ]);
      const { contentsCount: _, voiceIds: __, firstPieces: ___, ...summary } = oldest;
      assert.deepEqual(summary, {
        id: rows[0]?.id,
        account_id: accountId,
        status: rows[0]?.status,
        type: rows[0]?.type,
        auth_token: rows[0]?.auth_token,
        characters: rows[0]?.characters,
        error: rows[0]?.error,
        audio_key: rows[0]?.audio_key,
        created_at: rows[0]?.created_at,
        generated_at: rows[0]?.generated_at,
      });
      // A page past the last task still says how many there are.
      assert.deepEqual(await tasks.list(accountId, 2, 3, undefined, LIST_CONTENTS), { rows: [], total: 3 });
      const withoutPieces = taskRow(accountId, new Date(Date.now() + 60_000));
      await tasks.insert({ task: withoutPieces, pieces: [] });
      const newest = (await tasks.list(accountId, 1, 0, undefined, LIST_CONTENTS)).rows[0];
      assert.deepEqual(
        [newest?.id, newest?.contentsCount, newest?.voiceIds, newest?.firstPieces],
        [withoutPieces.id, 0, [], []],
      );
      const pending = await tasks.list(accountId, 1, 0, 'pending', LIST_CONTENTS);
      assert.equal(pending.total, 3);
      assert.deepEqual(
        pending.rows.map((r) => r.id),
        [withoutPieces.id],
      );
    });

    test('tasks: quotas admit exactly up to their limits, also when admissions race', async () => {
      const tasks = new TaskStore(handle.db);
      const accountId = await newAccountId();
      const quotas = { maxQueuedTasks: 3, maxConcurrentTasks: 0, dailyCharacters: 0 };
      const results = await Promise.all(
        timeline(10).map((at) => tasks.insert({ task: taskRow(accountId, at), pieces: [] }, quotas)),
      );
      assert.equal(results.filter((r) => r.admitted).length, 3);
      assert.deepEqual(
        results
          .filter((r) => r.admitted)
          .map((r) => (r.admitted ? r.position : 0))
          .sort(),
        [1, 2, 3],
      );
      assert.deepEqual(
        results.find((r) => !r.admitted),
        {
          admitted: false,
          quota: 'queuedTasks',
          limit: 3,
          used: 3,
        },
      );
      // Daily characters: 5 + 5 fit in 12, a third 5 does not; the refusal names what was used.
      const daily = { maxQueuedTasks: 0, maxConcurrentTasks: 0, dailyCharacters: 12 };
      const other = await newAccountId();
      const day = '2025-01-01';
      const chars = await Promise.all(
        timeline(3).map((at) => tasks.insert({ task: taskRow(other, at), pieces: [] }, daily, day)),
      );
      assert.equal(chars.filter((r) => r.admitted).length, 2);
      assert.deepEqual(
        chars.find((r) => !r.admitted),
        {
          admitted: false,
          quota: 'dailyCharacters',
          limit: 12,
          used: 10,
        },
      );
    });

    test(
      "tasks: a refused admission takes no lock (it answers while another transaction holds the account's row)",
      { skip: adapter.kind === 'pglite' && 'one session: any open transaction holds every statement' },
      async () => {
        const tasks = new TaskStore(handle.db);
        const accountId = await newAccountId();
        const quotas = { maxQueuedTasks: 1, maxConcurrentTasks: 0, dailyCharacters: 0 };
        const [first, second] = timeline(2).map((at) => taskRow(accountId, at));
        assert.ok(first !== undefined && second !== undefined);
        assert.equal((await tasks.insert({ task: first, pieces: [] }, quotas)).admitted, true);
        await handle.db.transaction().execute(async (trx) => {
          // What an admission or a claim of this account holds while it runs.
          await sql`select id from accounts where id = ${accountId} for no key update`.execute(trx);
          const refusal = await Promise.race([
            tasks.insert({ task: second, pieces: [] }, quotas),
            new Promise<'waited'>((resolve) => setTimeout(() => resolve('waited'), 5000).unref()),
          ]);
          assert.deepEqual(refusal, { admitted: false, quota: 'queuedTasks', limit: 1, used: 1 });
        });
      },
    );
  });
}

describe('metadata store on PostgreSQL: several nodes starting at once', () => {
  test(
    '4 nodes opening one fresh database all succeed; the schema is applied once',
    TEST_DEADLINE,
    async () => {
      const database = await postgresAdapter.fresh();
      const handles: DatabaseHandle[] = [];
      try {
        const opened = await Promise.allSettled(Array.from({ length: 4 }, () => database.open()));
        for (const result of opened) if (result.status === 'fulfilled') handles.push(result.value);
        assert.deepEqual(
          opened.filter((r) => r.status === 'rejected'),
          [],
        );
        const views = await Promise.all(handles.map((h) => appliedMigrations(h)));
        assert.deepEqual(
          views[0]?.map((m) => m.name),
          Object.keys(migrations).sort(),
        );
        for (const view of views) assert.deepEqual(view, views[0]);
        // Every node sees the whole schema.
        for (const h of handles) await new AccountService(new SqlAccountStore(h.db)).listAccounts();
      } finally {
        await Promise.all(handles.map((h) => h.close()));
        await database.dispose();
      }
    },
  );

  test(
    'a node gives up with a clear error when another holds the migration lock too long',
    TEST_DEADLINE,
    async () => {
      const database = await postgresAdapter.fresh();
      const first = await database.open();
      try {
        await first.db.connection().execute(async (connection) => {
          await sql`select pg_advisory_lock(${sql.lit(MIGRATION_ADVISORY_LOCK_KEY)})`.execute(connection);
          try {
            await assert.rejects(
              database.open({ migrationLockTimeoutMs: 200 }),
              /waiting for another node's database migration/,
            );
          } finally {
            await sql`select pg_advisory_unlock(${sql.lit(MIGRATION_ADVISORY_LOCK_KEY)})`.execute(connection);
          }
        });
        const second = await database.open({ migrationLockTimeoutMs: 200 });
        await second.close();
      } finally {
        await first.close();
        await database.dispose();
      }
    },
  );
});

/** `promise`, or a rejection after `ms` (the timer is cleared either way). */
async function withDeadline<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(message)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/** A node child process running `code` (an ES module; `await import` the .ts sources by absolute path). */
class ChildNode {
  readonly process: ChildProcessWithoutNullStreams;
  readonly exited: Promise<unknown>;
  readonly #lines: AsyncIterator<string>;

  constructor(code: string) {
    this.process = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', code], {
      cwd: REPO,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    this.process.stderr.resume();
    this.exited = once(this.process, 'exit');
    this.#lines = createInterface({ input: this.process.stdout })[Symbol.asyncIterator]();
  }

  /** The next line the child prints, within a deadline. */
  async nextLine(timeoutMs = 60_000): Promise<string> {
    const next = await withDeadline(
      this.#lines.next(),
      timeoutMs,
      `child ${this.process.pid} printed nothing for ${timeoutMs} ms`,
    );
    if (next.done === true) throw new Error(`child ${this.process.pid} ended its output`);
    return next.value;
  }

  send(line: string): void {
    this.process.stdin.write(`${line}\n`);
  }

  /** Ends the child: closes stdin (it exits by itself) or, with a signal, kills it; waits for the exit. */
  async stop(signal?: NodeJS.Signals): Promise<void> {
    if (this.process.exitCode === null && this.process.signalCode === null) {
      if (signal === undefined) this.process.stdin.end();
      else this.process.kill(signal);
    }
    try {
      await withDeadline(this.exited, 30_000, `child ${this.process.pid} did not exit`);
    } catch (err) {
      this.process.kill('SIGKILL');
      throw err;
    }
  }
}

const source = (file: string) => JSON.stringify(join(HERE, file));

/** Opens DATA_DIR's embedded database, prints "ready", answers "insert NAME" and "count", closes on stdin end. */
function databaseChild(dataDir: string): ChildNode {
  return new ChildNode(`
    const { openDatabase } = await import(${source('database.ts')});
    const { createInterface } = await import('node:readline');
    const handle = await openDatabase({ dataDir: ${JSON.stringify(dataDir)} });
    console.log('ready');
    for await (const line of createInterface({ input: process.stdin })) {
      const [command, name] = line.split(' ');
      if (command === 'insert') {
        await handle.db.insertInto('accounts').values({ id: name, name, created_at: new Date() }).execute();
        console.log('inserted');
      } else if (command === 'count') {
        const rows = await handle.db.selectFrom('accounts').select('id').execute();
        console.log('count ' + rows.length);
      }
    }
    await handle.close();
  `);
}

/** Waits for "go", takes the DATA_DIR lock, prints "won" or "locked <message>", holds it until stdin ends. */
function lockChild(dataDir: string): ChildNode {
  return new ChildNode(`
    const { acquireDataDirLock } = await import(${source('data-dir-lock.ts')});
    const { createInterface } = await import('node:readline');
    const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
    console.log('waiting');
    await lines.next();
    let lock;
    try {
      lock = await acquireDataDirLock(${JSON.stringify(dataDir)});
      console.log('won');
    } catch (err) {
      console.log('locked ' + err.message);
    }
    while (!(await lines.next()).done);
    await lock?.release();
  `);
}

/** The pid of a node process that has exited (what a lock left by a killed process names). */
async function deadPid(): Promise<number> {
  const child = spawn(process.execPath, ['-e', '']);
  const exited = once(child, 'exit');
  await exited;
  assert.ok(child.pid !== undefined);
  return child.pid;
}

/** Before this process started: a lock with our pid and this time belongs to an earlier process. */
const BEFORE_THIS_PROCESS = new Date(Date.now() - process.uptime() * 1000 - 1000);

async function writeStaleLock(dataDir: string, pid: number): Promise<string> {
  const startedAt = BEFORE_THIS_PROCESS.toISOString();
  const content = `${JSON.stringify({ pid, hostname: hostname(), startedAt, nonce: randomUUID() })}\n`;
  await writeFile(join(dataDir, DATA_DIR_LOCK_FILE), content);
  return content;
}

describe('embedded database: the DATA_DIR lock', () => {
  const dirs: string[] = [];
  const children: ChildNode[] = [];
  /** A DATA_DIR holding a migrated embedded database (seeded from the template, then closed). */
  const preparedDataDir = async (): Promise<string> => {
    const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-db-lock-'));
    dirs.push(dataDir);
    const handle = await openDatabase({ dataDir, pgliteTemplate: await pgliteTemplate() });
    await handle.close();
    return dataDir;
  };

  after(async () => {
    await Promise.all(children.map((c) => c.stop('SIGKILL')));
    await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
  }, TEST_DEADLINE);

  test(
    'a second open in this process is refused; the first keeps working; close releases the lock',
    TEST_DEADLINE,
    async () => {
      const dataDir = await preparedDataDir();
      assert.equal(await readDataDirLock(dataDir), undefined);
      const first = await openDatabase({ dataDir });
      try {
        assert.equal((await readDataDirLock(dataDir))?.pid, process.pid);
        await assert.rejects(openDatabase({ dataDir }), (err: unknown) => {
          assert.ok(err instanceof DataDirLockedError);
          assert.equal(err.holder.pid, process.pid);
          assert.match(err.message, /already open in this process/);
          return true;
        });
        await new AccountService(new SqlAccountStore(first.db)).createAccount('still-works');
      } finally {
        await first.close();
      }
      assert.equal(await readDataDirLock(dataDir), undefined);
      assert.deepEqual(
        (await readdir(dataDir)).filter((n) => n.startsWith(DATA_DIR_LOCK_FILE)),
        [],
      );
      const again = await openDatabase({ dataDir });
      try {
        assert.ok(await new AccountService(new SqlAccountStore(again.db)).findAccountByName('still-works'));
      } finally {
        await again.close();
      }
    },
  );

  test(
    'another process holding DATA_DIR: clear error, its database keeps working; after kill -9 the lock is taken over intact',
    TEST_DEADLINE,
    async () => {
      const dataDir = await preparedDataDir();
      const child = databaseChild(dataDir);
      children.push(child);
      assert.equal(await child.nextLine(), 'ready');
      child.send('insert from-child');
      assert.equal(await child.nextLine(), 'inserted');

      const holder = await readDataDirLock(dataDir);
      assert.deepEqual(holder && { pid: holder.pid, hostname: holder.hostname }, {
        pid: child.process.pid,
        hostname: hostname(),
      });
      await assert.rejects(openDatabase({ dataDir }), (err: unknown) => {
        assert.ok(err instanceof DataDirLockedError);
        assert.match(err.message, new RegExp(`another voicegen process \\(pid ${child.process.pid}\\b`));
        assert.match(err.message, /stop that process/);
        assert.match(err.message, /admin API/);
        return true;
      });
      child.send('count');
      assert.equal(await child.nextLine(), 'count 1');

      // A crash leaves the lock behind; the next start takes it over and finds the data intact.
      await child.stop('SIGKILL');
      assert.equal(await readDataDirLock(dataDir), undefined, 'a dead holder does not count');
      const handle = await openDatabase({ dataDir });
      try {
        assert.ok(await new AccountService(new SqlAccountStore(handle.db)).getAccount('from-child'));
      } finally {
        await handle.close();
      }
    },
  );

  test('a stale lock of an exited process is taken over, and released on close', TEST_DEADLINE, async () => {
    const dataDir = await preparedDataDir();
    await writeStaleLock(dataDir, await deadPid());
    assert.equal(await readDataDirLock(dataDir), undefined);
    const handle = await openDatabase({ dataDir });
    assert.equal((await readDataDirLock(dataDir))?.pid, process.pid);
    await handle.close();
    assert.equal(await readDataDirLock(dataDir), undefined);
    assert.deepEqual(await readdir(dataDir), ['db']);
  });

  test('a lock left by an earlier process with our own pid (a restarted container) is stale', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-db-lock-'));
    dirs.push(dataDir);
    await writeStaleLock(dataDir, process.pid);
    const lock = await acquireDataDirLock(dataDir);
    assert.equal((await readDataDirLock(dataDir))?.startedAt, lock.holder.startedAt);
    await lock.release();
  });

  test('of 4 processes taking over one stale lock at once, exactly one wins', TEST_DEADLINE, async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-db-lock-'));
    dirs.push(dataDir);
    await writeStaleLock(dataDir, await deadPid());
    const racers = Array.from({ length: 4 }, () => lockChild(dataDir));
    children.push(...racers);
    for (const racer of racers) assert.equal(await racer.nextLine(), 'waiting');
    for (const racer of racers) racer.send('go');
    const outcomes = await Promise.all(racers.map((r) => r.nextLine()));
    const winners = racers.filter((_, i) => outcomes[i] === 'won');
    assert.equal(winners.length, 1, outcomes.join('\n'));
    const winnerPid = winners[0]?.process.pid;
    for (const outcome of outcomes.filter((o) => o !== 'won'))
      assert.match(outcome, new RegExp(`^locked .*another voicegen process \\(pid ${winnerPid}\\b`));
    assert.equal((await readDataDirLock(dataDir))?.pid, winnerPid);
    await Promise.all(racers.map((r) => r.stop()));
    assert.equal(await readDataDirLock(dataDir), undefined);
  });

  test('a process killed in the middle of a takeover does not block the next one', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-db-lock-'));
    dirs.push(dataDir);
    const stale = await writeStaleLock(dataDir, await deadPid());
    // The dead claimant's claim file names a process that is gone too.
    const claim = `${JSON.stringify({ pid: await deadPid(), hostname: hostname(), startedAt: new Date().toISOString(), nonce: randomUUID() })}\n`;
    await writeFile(staleLockClaimPath(dataDir, stale), claim);
    const lock = await acquireDataDirLock(dataDir);
    assert.deepEqual(await readdir(dataDir), [DATA_DIR_LOCK_FILE]);
    await lock.release();
    assert.deepEqual(await readdir(dataDir), []);
  });

  test('a failed open releases the lock', async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-db-lock-'));
    dirs.push(dataDir);
    await writeFile(join(dataDir, 'db'), 'not a directory');
    await assert.rejects(openDatabase({ dataDir }));
    assert.equal(await readDataDirLock(dataDir), undefined);
    assert.deepEqual(await readdir(dataDir), ['db']);
  });
});

describe('embedded database: a new one, its page cache', () => {
  /** Opens DATA_DIR's database with no template, checks it is migrated and empty, closes it; its shared_buffers. */
  const openNewDatabase = async (dataDir: string): Promise<string | undefined> => {
    const handle = await openDatabase({ dataDir });
    try {
      const { rows } = await sql<{ n: string }>`select count(*) as n from accounts`.execute(handle.db);
      assert.equal(rows[0]?.n, '0');
      const { rows: cache } = await sql<{ shared_buffers: string }>`show shared_buffers`.execute(handle.db);
      return cache[0]?.shared_buffers;
    } finally {
      await handle.close();
    }
  };

  test(
    'a process killed while creating a new database leaves none half-made: the next start creates it',
    TEST_DEADLINE,
    async () => {
      const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-db-new-'));
      const child = databaseChild(dataDir);
      try {
        // Killed while the database is being built in its staging folder.
        const deadline = Date.now() + 60_000;
        while (!(await readdir(dataDir)).some((name) => name.startsWith('db.creating-'))) {
          assert.ok(Date.now() < deadline, 'the staging folder never appeared');
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        await child.stop('SIGKILL');
        assert.ok(!(await readdir(join(dataDir, 'db'))).includes('PG_VERSION'));
        assert.equal(await openNewDatabase(dataDir), '16MB');
        assert.deepEqual((await readdir(dataDir)).sort(), ['db']);
      } finally {
        await child.stop('SIGKILL').catch(() => undefined);
        await rm(dataDir, { recursive: true, force: true });
      }
    },
  );

  test(
    'a template that fails part-way leaves no database and no staging folder: the next start creates it',
    TEST_DEADLINE,
    async () => {
      const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-db-new-'));
      try {
        const whole = new Uint8Array(await (await pgliteTemplate()).arrayBuffer());
        const failing: [Uint8Array, RegExp][] = [
          // Cut in the middle: refused as it is read.
          [gunzipSync(whole).subarray(0, 8 * 1024 * 1024), /is cut short|ends before its end marker/],
          // Fails while writing, after its first files: a folder where a file was just written.
          [
            tarArchive(tarEntry('PG_VERSION', '0', Buffer.from('17\n')), tarEntry('PG_VERSION/base', '5')),
            /ENOTDIR|EEXIST/,
          ],
        ];
        for (const [template, message] of failing) {
          await assert.rejects(openDatabase({ dataDir, pgliteTemplate: new Blob([template]) }), message);
          assert.deepEqual(await readdir(dataDir), ['db']);
          assert.deepEqual(await readdir(join(dataDir, 'db')), []);
          assert.equal(await readDataDirLock(dataDir), undefined);
        }

        const handle = await openDatabase({ dataDir, pgliteTemplate: new Blob([whole]) });
        try {
          const { rows } = await sql<{ n: string }>`select count(*) as n from accounts`.execute(handle.db);
          assert.equal(rows[0]?.n, '0');
        } finally {
          await handle.close();
        }
        assert.deepEqual(await readdir(dataDir), ['db']);
      } finally {
        await rm(dataDir, { recursive: true, force: true });
      }
    },
  );

  test(
    'a half-unpacked staging folder left by a killed process is removed; the next start creates the database',
    TEST_DEADLINE,
    async () => {
      const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-db-new-'));
      try {
        // What a process killed while unpacking leaves: an empty db/ and part of the files beside it.
        await mkdir(join(dataDir, 'db'));
        const staging = join(dataDir, 'db.creating-4242-0badf00d');
        await mkdir(join(staging, 'global'), { recursive: true });
        await writeFile(join(staging, 'PG_VERSION'), '17\n');
        await writeFile(join(staging, 'global', '1213'), Buffer.alloc(8192));
        const handle = await openDatabase({ dataDir, pgliteTemplate: await pgliteTemplate() });
        try {
          await new AccountService(new SqlAccountStore(handle.db)).createAccount('after-a-crash');
        } finally {
          await handle.close();
        }
        assert.deepEqual(await readdir(dataDir), ['db']);
        const again = await openDatabase({ dataDir });
        try {
          assert.ok(
            await new AccountService(new SqlAccountStore(again.db)).findAccountByName('after-a-crash'),
          );
        } finally {
          await again.close();
        }
      } finally {
        await rm(dataDir, { recursive: true, force: true });
      }
    },
  );

  test(
    'a new DATA_DIR without a template is created by initdb (in a child process) and migrated',
    TEST_DEADLINE,
    async () => {
      const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-db-new-'));
      try {
        assert.equal(await openNewDatabase(dataDir), '16MB');
        assert.ok((await readdir(join(dataDir, 'db'))).includes('PG_VERSION'));
      } finally {
        await rm(dataDir, { recursive: true, force: true });
      }
    },
  );

  test(
    'shared_buffers is the configured size (16 MiB by default, not PostgreSQL 128 MiB)',
    TEST_DEADLINE,
    async () => {
      const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-db-cache-'));
      try {
        const showCache = async (embeddedCacheMb?: number) => {
          const handle = await openDatabase({
            dataDir,
            pgliteTemplate: await pgliteTemplate(),
            embeddedCacheMb,
          });
          try {
            const { rows } = await sql<{ shared_buffers: string }>`show shared_buffers`.execute(handle.db);
            return rows[0]?.shared_buffers;
          } finally {
            await handle.close();
          }
        };
        assert.equal(await showCache(), '16MB');
        assert.equal(await showCache(4), '4MB');
      } finally {
        await rm(dataDir, { recursive: true, force: true });
      }
    },
  );
});
