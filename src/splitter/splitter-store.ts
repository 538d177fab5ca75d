/** Database access for saved splitter configurations. The config is stored as JSON text, verbatim. */
import type { Kysely } from 'kysely';
import { fetchPage } from '../storage/paging.js';
import type { Database, SplitterRow } from '../storage/schema.js';

export class SplitterStore {
  constructor(private readonly db: Kysely<Database>) {}

  async insert(row: SplitterRow): Promise<void> {
    await this.db.insertInto('splitters').values(row).execute();
  }

  async get(accountId: string, id: string): Promise<SplitterRow | undefined> {
    return this.db
      .selectFrom('splitters')
      .selectAll()
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
  }

  async list(
    accountId: string,
    limit: number,
    offset: number,
  ): Promise<{ rows: SplitterRow[]; total: number }> {
    return fetchPage(
      this.db.selectFrom('splitters').selectAll().where('account_id', '=', accountId),
      limit,
      offset,
    );
  }

  /** Replaces name and config only if the row still holds `expectedConfig` (optimistic concurrency). */
  async update(
    accountId: string,
    id: string,
    expectedConfig: string,
    values: { name: string; config: string; updated_at: Date },
  ): Promise<boolean> {
    const result = await this.db
      .updateTable('splitters')
      .set(values)
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .where('config', '=', expectedConfig)
      .executeTakeFirst();
    return result.numUpdatedRows > 0n;
  }

  async delete(accountId: string, id: string): Promise<boolean> {
    const result = await this.db
      .deleteFrom('splitters')
      .where('id', '=', id)
      .where('account_id', '=', accountId)
      .executeTakeFirst();
    return result.numDeletedRows > 0n;
  }
}
