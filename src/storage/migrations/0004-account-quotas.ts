/**
 * Per-account quotas and cancellation: characters accepted per account per
 * UTC day (one row each, raised by an atomic upsert), the reason a task's cancellation was asked
 * for (null: never asked; the generating node stops when it sees it), and an index for counting an
 * account's pending and processing tasks.
 */
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('tasks').addColumn('cancel_reason', 'text').execute();
  await db.schema.createIndex('tasks_account_status').on('tasks').columns(['account_id', 'status']).execute();
  await db.schema
    .createTable('account_daily_usage')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    // UTC day, 'YYYY-MM-DD' (text: no driver time-zone conversion of a date type).
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('characters', 'bigint', (c) => c.notNull().defaultTo(sql`0`))
    .addPrimaryKeyConstraint('account_daily_usage_pk', ['account_id', 'day'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('account_daily_usage').execute();
  await db.schema.dropIndex('tasks_account_status').execute();
  await db.schema.alterTable('tasks').dropColumn('cancel_reason').execute();
}
