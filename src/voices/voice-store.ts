/** Database access for voice characters. */
import type { Kysely } from 'kysely';
import { fetchPage } from '../storage/paging.js';
import type { Database, NewVoiceRow, VoiceRow, VoiceVersion } from '../storage/schema.js';

export class VoiceStore {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(row: NewVoiceRow): Promise<void> {
    await this.db.insertInto('voices').values(row).execute();
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

  async delete(accountId: string, id: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('voices')
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }

  async setLora(accountId: string, id: string): Promise<boolean> {
    const result = await this.db
      .updateTable('voices')
      .set({ with_lora: true, updated_at: new Date() })
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
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
