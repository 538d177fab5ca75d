/**
 * Timings of generated speech: one row per sentence of a content piece (its span in the piece's
 * canonical samples, its text range and its words), written while the piece is synthesised so
 * readers on any node see what has been produced so far. And the splitter marker that started
 * each piece (its speaker on subtitles).
 */
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('task_timings')
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.id').onDelete('cascade'))
    .addColumn('content_idx', 'integer', (c) => c.notNull())
    .addColumn('seq', 'integer', (c) => c.notNull())
    .addColumn('start_sample', 'bigint', (c) => c.notNull())
    .addColumn('end_sample', 'bigint', (c) => c.notNull())
    .addColumn('text_start', 'integer', (c) => c.notNull())
    .addColumn('text_end', 'integer', (c) => c.notNull())
    .addColumn('words', 'text', (c) => c.notNull().defaultTo(sql`'[]'`))
    .addPrimaryKeyConstraint('task_timings_pk', ['task_id', 'content_idx', 'seq'])
    .execute();
  await db.schema.alterTable('task_contents').addColumn('speaker', 'text').execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('task_contents').dropColumn('speaker').execute();
  await db.schema.dropTable('task_timings').execute();
}
