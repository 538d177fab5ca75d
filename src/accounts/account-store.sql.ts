/**
 * The account store over the metadata database (Kysely on PGlite or PostgreSQL): the `accounts`
 * and `api_keys` tables.
 */
import { sql, type Kysely, type Selectable, type Transaction } from 'kysely';
import type { AccountsTable, ApiKeysTable, Database } from '../storage/schema.js';
import type { Account, AccountStore, ApiKeyInfo, StoredApiKey } from './account-store.js';
import { inTransaction } from '../storage/transaction.js';

/** Advisory lock id of the first-run account creation (any constant of this service's own). */
const FIRST_RUN_LOCK = 0x766f6963;

function accountOf(row: Selectable<AccountsTable>): Account {
  return { id: row.id, name: row.name, createdAt: row.created_at };
}

function keyInfoOf(row: Selectable<ApiKeysTable>): ApiKeyInfo {
  return {
    id: row.id,
    accountId: row.account_id,
    prefix: row.key_prefix,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
  };
}

async function insertAccountRow(
  db: Kysely<Database> | Transaction<Database>,
  account: Account,
): Promise<void> {
  await db
    .insertInto('accounts')
    .values({ id: account.id, name: account.name, created_at: account.createdAt })
    .execute();
}

async function insertKeyRow(db: Kysely<Database> | Transaction<Database>, key: StoredApiKey): Promise<void> {
  await db
    .insertInto('api_keys')
    .values({
      id: key.id,
      account_id: key.accountId,
      key_hash: key.hash,
      key_prefix: key.prefix,
      created_at: key.createdAt,
      revoked_at: key.revokedAt,
    })
    .execute();
}

export class SqlAccountStore implements AccountStore {
  constructor(private readonly db: Kysely<Database>) {}

  async insertAccount(account: Account): Promise<void> {
    await insertAccountRow(this.db, account);
  }

  async accountById(id: string): Promise<Account | undefined> {
    const row = await this.db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
    return row && accountOf(row);
  }

  async accountByName(name: string): Promise<Account | undefined> {
    const row = await this.db.selectFrom('accounts').selectAll().where('name', '=', name).executeTakeFirst();
    return row && accountOf(row);
  }

  async listAccounts(): Promise<Account[]> {
    const rows = await this.db.selectFrom('accounts').selectAll().orderBy('created_at').execute();
    return rows.map(accountOf);
  }

  async insertKey(key: StoredApiKey): Promise<void> {
    await insertKeyRow(this.db, key);
  }

  async listKeys(accountId: string): Promise<ApiKeyInfo[]> {
    const rows = await this.db
      .selectFrom('api_keys')
      .selectAll()
      .where('account_id', '=', accountId)
      .orderBy('created_at')
      .execute();
    return rows.map(keyInfoOf);
  }

  async revokeKey(keyId: string, at: Date): Promise<boolean> {
    const result = await this.db
      .updateTable('api_keys')
      .set({ revoked_at: at })
      .where('id', '=', keyId)
      .where('revoked_at', 'is', null)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async accountOfActiveKey(hash: string): Promise<{ account: Account; keyHash: string } | undefined> {
    const row = await this.db
      .selectFrom('api_keys')
      .innerJoin('accounts', 'accounts.id', 'api_keys.account_id')
      .select(['api_keys.key_hash', 'accounts.id', 'accounts.name', 'accounts.created_at'])
      .where('api_keys.key_hash', '=', hash)
      .where('api_keys.revoked_at', 'is', null)
      .executeTakeFirst();
    return row && { account: accountOf(row), keyHash: row.key_hash };
  }

  async accountIdOfKey(hash: string): Promise<string | undefined> {
    const row = await this.db
      .selectFrom('api_keys')
      .select('account_id')
      .where('key_hash', '=', hash)
      .executeTakeFirst();
    return row?.account_id;
  }

  async insertFirstAccount(account: Account, key: StoredApiKey): Promise<boolean> {
    return inTransaction(this.db, async (trx) => {
      // Nodes starting together on one database take this lock first: one inserts, the others
      // then see an account exists.
      await sql`select pg_advisory_xact_lock(${FIRST_RUN_LOCK})`.execute(trx);
      const existing = await trx.selectFrom('accounts').select('id').limit(1).executeTakeFirst();
      if (existing !== undefined) return false;
      await insertAccountRow(trx, account);
      await insertKeyRow(trx, key);
      return true;
    });
  }
}
