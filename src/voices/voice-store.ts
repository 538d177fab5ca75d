/**
 * Database access for voice characters. Writes that add voices or uploaded bytes check the
 * account's storage limits under the account's lock, so concurrent writes never pass a limit together.
 */
import { sql, type Kysely, type Transaction } from 'kysely';
import { storageRefusal, type StorageLimits, type StorageRefusal } from '../storage/storage-limits.js';
import { lockAccount, writeWithinLimits } from '../storage/account-lock.js';
import { fetchPage } from '../storage/paging.js';
import type { Database, NewVoiceRow, VoiceRow, VoiceVersion } from '../storage/schema.js';
import { inTransaction } from '../storage/transaction.js';

/** An account's voices and the bytes of their uploaded samples. */
export interface VoiceUsage {
  voices: number;
  uploadBytes: number;
}

/** A recorded upload, with the key of the sample it replaced (to delete), if any. */
export type UploadOutcome = { replaced: string | null } | StorageRefusal | 'gone';

type Db = Kysely<Database> | Transaction<Database>;

export class VoiceStore {
  constructor(private readonly db: Kysely<Database>) {}

  /**
   * Inserts `row` unless the account's voice limit, or its upload limit for the row's reference
   * clip, refuses it; the refusal is returned, nothing written.
   */
  async insert(row: NewVoiceRow, limits?: StorageLimits): Promise<StorageRefusal | undefined> {
    const referenceBytes = Number(row.reference_bytes ?? 0);
    if (limits === undefined || (limits.voices === 0 && (referenceBytes === 0 || limits.uploadBytes === 0))) {
      await this.db.insertInto('voices').values(row).execute();
      return undefined;
    }
    return writeWithinLimits(
      this.db,
      row.account_id,
      limits,
      { voices: 1, uploadBytes: referenceBytes },
      (db) => usage(db, row.account_id),
      async (trx) => {
        await trx.insertInto('voices').values(row).execute();
      },
    );
  }

  async usage(accountId: string): Promise<VoiceUsage> {
    return usage(this.db, accountId);
  }

  /**
   * Records that voice `id`'s sample is now `bytes` bytes at `key`, unless that takes the account's
   * uploads past `limits` (the voice's previous sample no longer counts). 'gone': deleted meanwhile.
   */
  async recordUpload(
    accountId: string,
    id: string,
    upload: { key: string; bytes: number },
    limits: StorageLimits,
  ): Promise<UploadOutcome> {
    return inTransaction(this.db, async (trx): Promise<UploadOutcome> => {
      await lockAccount(trx, accountId);
      const row = await trx
        .selectFrom('voices')
        .select(['with_lora', 'lora_bytes', 'lora_key'])
        .where('id', '=', id)
        .where('account_id', '=', accountId)
        .executeTakeFirst();
      if (row === undefined) return 'gone';
      const others = (await usage(trx, accountId)).uploadBytes - Number(row.lora_bytes);
      const refused = storageRefusal(limits, { uploadBytes: others }, { uploadBytes: upload.bytes });
      if (refused !== undefined) return refused;
      await trx
        .updateTable('voices')
        .set({ with_lora: true, lora_bytes: upload.bytes, lora_key: upload.key, updated_at: new Date() })
        .where('id', '=', id)
        .where('account_id', '=', accountId)
        .execute();
      return { replaced: row.lora_key ?? (row.with_lora ? `voices/${id}/lora.bin` : null) };
    });
  }

  async get(accountId: string, id: string): Promise<VoiceRow | undefined> {
    return this.db
      .selectFrom('voices')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
  }

  /** The account's voices among `ids` (missing ones are left out). */
  async getMany(accountId: string, ids: readonly string[]): Promise<VoiceRow[]> {
    if (ids.length === 0) return [];
    return this.db
      .selectFrom('voices')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('id', 'in', [...ids])
      .execute();
  }

  async list(accountId: string, limit: number, offset: number): Promise<{ rows: VoiceRow[]; total: number }> {
    return fetchPage(
      this.db.selectFrom('voices').selectAll().where('account_id', '=', accountId),
      limit,
      offset,
    );
  }

  /** The account's voices called exactly `name`, oldest first. */
  async named(accountId: string, name: string): Promise<VoiceRow[]> {
    return this.db
      .selectFrom('voices')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('name', '=', name)
      .orderBy('created_at')
      .orderBy('id')
      .execute();
  }

  async delete(accountId: string, id: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('voices')
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  /**
   * Moves a ready, non-LoRA voice from one of `from` to `to` in one conditional UPDATE, so of many
   * concurrent calls exactly one succeeds. Returns whether this call changed the row.
   */
  async migrateVersion(
    accountId: string,
    id: string,
    from: VoiceVersion[],
    to: VoiceVersion,
  ): Promise<boolean> {
    const result = await this.db
      .updateTable('voices')
      .set({ version: to, updated_at: new Date() })
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('version', 'in', from)
      .where('with_lora', '=', false)
      .where('status', '=', 'ready')
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }
}

async function usage(db: Db, accountId: string): Promise<VoiceUsage> {
  const row = await db
    .selectFrom('voices')
    .select([
      sql<string>`count(*)`.as('n'),
      // A reference clip is an uploaded sample too.
      sql<string>`coalesce(sum(lora_bytes + reference_bytes), 0)`.as('bytes'),
    ])
    .where('account_id', '=', accountId)
    .executeTakeFirst();
  return { voices: Number(row?.n ?? 0), uploadBytes: Number(row?.bytes ?? 0) };
}
