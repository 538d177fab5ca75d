/**
 * Database access for saved splitter configurations. The config is stored as JSON text, verbatim.
 * Writes that add configs or bytes check the account's storage limits under the account's lock, so
 * concurrent saves of one account never pass a limit together.
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import { storageRefusal, type StorageLimits, type StorageRefusal } from '../storage/storage-limits.js';
import { lockAccount, writeWithinLimits } from '../storage/account-lock.js';
import { fetchPage } from '../storage/paging.js';
import type { Database, SplitterRow } from '../storage/schema.js';
import { inTransaction } from '../storage/transaction.js';

/** A splitter's row without its config, and the config's size in bytes. */
export type SplitterSummaryRow = Omit<SplitterRow, 'config'> & { bytes: number };

/** The fields an update compares and writes. */
export type SplitterFields = Pick<SplitterRow, 'name' | 'config' | 'updated_at'>;

/** Saved configs of one account and their bytes together. */
export interface SplitterUsage {
  splitters: number;
  splitterBytes: number;
}

type Db = Kysely<Database> | Transaction<Database>;

/** UTF-8 bytes of a stored config, as the database counts them. */
const configBytes = sql<number>`octet_length(config)`;

export class SplitterStore {
  constructor(private readonly db: Kysely<Database>) {}

  /** Inserts `row` unless the account's limits refuse it; the refusal is returned, nothing written. */
  async insert(row: SplitterRow, limits?: StorageLimits): Promise<StorageRefusal | undefined> {
    const adding = { splitters: 1, splitterBytes: Buffer.byteLength(row.config, 'utf8') };
    if (limits === undefined || (limits.splitters === 0 && limits.splitterBytes === 0)) {
      await this.db.insertInto('splitters').values(row).execute();
      return undefined;
    }
    return writeWithinLimits(
      this.db,
      row.account_id,
      limits,
      adding,
      (db) => usage(db, row.account_id),
      async (trx) => {
        await trx.insertInto('splitters').values(row).execute();
      },
    );
  }

  async get(accountId: string, id: string): Promise<SplitterRow | undefined> {
    return this.db
      .selectFrom('splitters')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
  }

  /** The account's rows among `ids`, configs included, in no particular order. */
  async getMany(accountId: string, ids: readonly string[]): Promise<SplitterRow[]> {
    if (ids.length === 0) return [];
    return this.db
      .selectFrom('splitters')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', 'in', [...ids])
      .execute();
  }

  /** A page of the account's splitters without their configs (which may be large), newest first. */
  async listSummaries(
    accountId: string,
    limit: number,
    offset: number,
  ): Promise<{ rows: SplitterSummaryRow[]; total: number }> {
    const { rows, total } = await fetchPage(
      this.db
        .selectFrom('splitters')
        .select(['id', 'account_id', 'name', 'created_at', 'updated_at', configBytes.as('bytes')])
        .where('account_id', '=', accountId),
      limit,
      offset,
    );
    return { rows: rows.map((row) => ({ ...row, bytes: Number(row.bytes) })), total };
  }

  /** How many configs the account has saved, and their bytes together. */
  async usage(accountId: string): Promise<SplitterUsage> {
    return usage(this.db, accountId);
  }

  /**
   * Writes `values` only if the row still holds `expected` (name, config and updated_at: a
   * concurrent rename is a change too) and the account's byte limit allows the new config.
   * Returns 'changed', 'conflict' (the row changed meanwhile) or the limit's refusal.
   */
  async update(
    accountId: string,
    id: string,
    expected: SplitterFields,
    values: SplitterFields,
    limits?: StorageLimits,
  ): Promise<'changed' | 'conflict' | StorageRefusal> {
    const grows = Buffer.byteLength(values.config, 'utf8') - Buffer.byteLength(expected.config, 'utf8');
    if (limits === undefined || limits.splitterBytes === 0 || grows <= 0)
      return this.updateIfUnchanged(this.db, accountId, id, expected, values);
    return inTransaction(this.db, async (trx) => {
      await lockAccount(trx, accountId);
      const refused = storageRefusal(limits, await usage(trx, accountId), { splitterBytes: grows });
      return refused ?? this.updateIfUnchanged(trx, accountId, id, expected, values);
    });
  }

  async delete(accountId: string, id: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('splitters')
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  private async updateIfUnchanged(
    db: Db,
    accountId: string,
    id: string,
    expected: SplitterFields,
    values: SplitterFields,
  ): Promise<'changed' | 'conflict'> {
    const result = await db
      .updateTable('splitters')
      .set(values)
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('name', '=', expected.name)
      .where('config', '=', expected.config)
      .where('updated_at', '=', expected.updated_at)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n ? 'changed' : 'conflict';
  }
}

async function usage(db: Db, accountId: string): Promise<SplitterUsage> {
  const row = await db
    .selectFrom('splitters')
    .select([sql<string>`count(*)`.as('n'), sql<string>`coalesce(sum(octet_length(config)), 0)`.as('bytes')])
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return { splitters: Number(row?.n ?? 0), splitterBytes: Number(row?.bytes ?? 0) };
}
