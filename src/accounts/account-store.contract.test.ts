/**
 * The AccountStore contract, one suite run against the SQL store on both databases: embedded
 * PGlite in a temporary DATA_DIR (seeded from a migrated template) and a fresh database on the real
 * PostgreSQL test server. Nodes sharing a store are several stores on one database: their own
 * connections on PostgreSQL, the one embedded database (a DATA_DIR has one process) on PGlite.
 */
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freshPostgresDatabase } from '../../test/helpers/servers.js';
import { openDatabase, type DatabaseHandle } from '../storage/database.js';
import { createPgliteTemplate } from '../storage/database.pglite.js';
import type { Account, AccountStore, StoredApiKey } from './account-store.js';
import { SqlAccountStore } from './account-store.sql.js';

/** Generous upper bound for one test on a busy machine; a hang fails instead of blocking the run. */
const TEST_DEADLINE = { timeout: 120_000 };

/** A new, empty database: `node()` opens one more store on it (another node, where it can). */
interface FreshStore {
  store: AccountStore;
  node(): Promise<AccountStore>;
  dispose(): Promise<void>;
}

interface DatabaseUnderTest {
  kind: DatabaseHandle['kind'];
  fresh(): Promise<FreshStore>;
}

let template: Promise<Blob> | undefined;
/** One migrated PGlite dump per test run: each embedded database here starts from it (no initdb). */
function pgliteTemplate(): Promise<Blob> {
  template ??= createPgliteTemplate();
  return template;
}

const pglite: DatabaseUnderTest = {
  kind: 'pglite',
  fresh: async () => {
    const dataDir = await mkdtemp(join(tmpdir(), 'voicegen-account-store-'));
    const handle = await openDatabase({ dataDir, pgliteTemplate: await pgliteTemplate() });
    const store = new SqlAccountStore(handle.db);
    return {
      store,
      node: () => Promise.resolve(new SqlAccountStore(handle.db)),
      dispose: async () => {
        await handle.close();
        await rm(dataDir, { recursive: true, force: true });
      },
    };
  },
};

const postgres: DatabaseUnderTest = {
  kind: 'postgres',
  fresh: async () => {
    const database = await freshPostgresDatabase();
    // DATA_DIR is not used with a database URL: a path that does not exist proves it.
    const dataDir = join(tmpdir(), `voicegen-unused-${randomUUID()}`);
    const handles: DatabaseHandle[] = [];
    const open = async (): Promise<AccountStore> => {
      const handle = await openDatabase({ dataDir, databaseUrl: database.url });
      handles.push(handle);
      return new SqlAccountStore(handle.db);
    };
    const store = await open();
    return {
      store,
      node: open,
      dispose: async () => {
        for (const handle of handles) await handle.close();
        await database.drop();
      },
    };
  },
};

/** Distinct, increasing times (a shared clock could give equal ones). */
function at(second: number): Date {
  return new Date(Date.UTC(2025, 0, 1, 0, 0, second));
}

let counter = 0;
function account(createdAt: Date, name = `account-${++counter}`): Account {
  return { id: randomUUID(), name, createdAt };
}

function key(accountId: string, createdAt: Date): StoredApiKey {
  const hash = randomUUID().replaceAll('-', '').repeat(2);
  return { id: randomUUID(), accountId, hash, prefix: 'sk-abcd', createdAt, revokedAt: null };
}

function listed({ hash: _hash, ...info }: StoredApiKey) {
  return info;
}

for (const database of [pglite, postgres]) {
  describe(`account store contract: ${database.kind}`, () => {
    let fresh: FreshStore;
    let store: AccountStore;

    before(async () => {
      fresh = await database.fresh();
      store = fresh.store;
    }, TEST_DEADLINE);

    after(async () => {
      await fresh.dispose();
    }, TEST_DEADLINE);

    test('an account is found by id and by name, as it was stored', async () => {
      const stored = account(at(1));
      await store.insertAccount(stored);
      assert.deepEqual(await store.accountById(stored.id), stored);
      assert.deepEqual(await store.accountByName(stored.name), stored);
      assert.equal(await store.accountById(randomUUID()), undefined);
      assert.equal(await store.accountByName('nobody'), undefined);
    });

    test('a name is taken once', async () => {
      const first = account(at(2));
      await store.insertAccount(first);
      await assert.rejects(store.insertAccount(account(at(3), first.name)));
      assert.deepEqual(await store.accountByName(first.name), first);
    });

    test('accounts are listed oldest first', async () => {
      const later = account(at(20));
      const earlier = account(at(10));
      await store.insertAccount(later);
      await store.insertAccount(earlier);
      const ids = (await store.listAccounts()).map((a) => a.id);
      assert.ok(ids.indexOf(earlier.id) < ids.indexOf(later.id), 'oldest first');
      const times = (await store.listAccounts()).map((a) => a.createdAt.getTime());
      assert.deepEqual(
        times,
        [...times].sort((a, b) => a - b),
      );
    });

    test("an account's keys are listed oldest first, without their hash", async () => {
      const owner = account(at(30));
      await store.insertAccount(owner);
      const second = key(owner.id, at(32));
      const first = key(owner.id, at(31));
      await store.insertKey(second);
      await store.insertKey(first);
      assert.deepEqual(await store.listKeys(owner.id), [listed(first), listed(second)]);
      assert.deepEqual(await store.listKeys(randomUUID()), []);
    });

    test('a hash is stored once', async () => {
      const owner = account(at(33));
      await store.insertAccount(owner);
      const stored = key(owner.id, at(34));
      await store.insertKey(stored);
      await assert.rejects(store.insertKey({ ...key(owner.id, at(35)), hash: stored.hash }));
      assert.equal((await store.listKeys(owner.id)).length, 1);
    });

    test('an active key leads to its account; a revoked or unknown one does not', async () => {
      const owner = account(at(40));
      await store.insertAccount(owner);
      const stored = key(owner.id, at(41));
      await store.insertKey(stored);
      assert.deepEqual(await store.accountOfActiveKey(stored.hash), {
        account: owner,
        keyHash: stored.hash,
      });
      assert.equal(await store.accountOfActiveKey('0'.repeat(64)), undefined);

      const revokedAt = at(42);
      assert.equal(await store.revokeKey(stored.id, revokedAt), true);
      assert.equal(await store.accountOfActiveKey(stored.hash), undefined);
      assert.deepEqual(await store.listKeys(owner.id), [{ ...listed(stored), revokedAt }]);
    });

    test('a key is revoked once; an unknown key id is not revoked', async () => {
      const owner = account(at(50));
      await store.insertAccount(owner);
      const stored = key(owner.id, at(51));
      await store.insertKey(stored);
      assert.equal(await store.revokeKey(stored.id, at(52)), true);
      assert.equal(await store.revokeKey(stored.id, at(53)), false);
      assert.deepEqual((await store.listKeys(owner.id))[0]?.revokedAt, at(52), 'the first revocation stays');
      assert.equal(await store.revokeKey(randomUUID(), at(54)), false);
    });

    test('a registered key is known by its hash, revoked or not', async () => {
      const owner = account(at(60));
      await store.insertAccount(owner);
      const stored = key(owner.id, at(61));
      await store.insertKey(stored);
      assert.equal(await store.accountIdOfKey(stored.hash), owner.id);
      await store.revokeKey(stored.id, at(62));
      assert.equal(await store.accountIdOfKey(stored.hash), owner.id);
      assert.equal(await store.accountIdOfKey('f'.repeat(64)), undefined);
    });
  });

  describe(`account store contract, first run: ${database.kind}`, () => {
    test(
      'the first account is added once, with its key, by one of the nodes starting together',
      TEST_DEADLINE,
      async () => {
        const fresh = await database.fresh();
        try {
          const nodes = [fresh.store, ...(await Promise.all([1, 2, 3].map(() => fresh.node())))];
          const candidates = nodes.map((_, i) => {
            const first = account(at(100 + i), `first-${i}`);
            return { account: first, key: key(first.id, at(110 + i)) };
          });
          const added = await Promise.all(
            nodes.map((node, i) => {
              const candidate = candidates[i] as (typeof candidates)[number];
              return node.insertFirstAccount(candidate.account, candidate.key);
            }),
          );
          assert.equal(added.filter(Boolean).length, 1, 'exactly one node adds the first account');
          const winner = candidates[added.indexOf(true)] as (typeof candidates)[number];
          assert.deepEqual(await fresh.store.listAccounts(), [winner.account]);
          assert.deepEqual(await fresh.store.listKeys(winner.account.id), [listed(winner.key)]);
          assert.equal(await fresh.store.accountIdOfKey(winner.key.hash), winner.account.id);
          for (const other of candidates.filter((c) => c !== winner)) {
            assert.equal(await fresh.store.accountIdOfKey(other.key.hash), undefined, 'no key of a loser');
          }

          // Once any account exists, nothing more is added.
          const late = account(at(120), 'late');
          assert.equal(await fresh.store.insertFirstAccount(late, key(late.id, at(121))), false);
          assert.equal(await fresh.store.accountById(late.id), undefined);
        } finally {
          await fresh.dispose();
        }
      },
    );

    test('no first account is added beside an existing one', TEST_DEADLINE, async () => {
      const fresh = await database.fresh();
      try {
        const existing = account(at(130));
        await fresh.store.insertAccount(existing);
        const first = account(at(131), 'default');
        const firstKey = key(first.id, at(132));
        assert.equal(await fresh.store.insertFirstAccount(first, firstKey), false);
        assert.deepEqual(await fresh.store.listAccounts(), [existing]);
        assert.equal(await fresh.store.accountIdOfKey(firstKey.hash), undefined);
      } finally {
        await fresh.dispose();
      }
    });
  });
}
