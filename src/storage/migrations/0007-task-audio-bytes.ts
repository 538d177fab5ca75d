/**
 * Per-account storage limits of task audio: the bytes of each stored piece MP3 and of each task's
 * merged MP3 (0 when the task's merged audio is its one piece's). Audio stored before sizes were
 * kept counts as 0 bytes. Summing an account's uses the tasks' (account_id, created_at) index and
 * the pieces' primary key.
 */
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('tasks')
    .addColumn('audio_bytes', 'bigint', (c) => c.notNull().defaultTo(sql`0`))
    .execute();
  await db.schema
    .alterTable('task_contents')
    .addColumn('audio_bytes', 'bigint', (c) => c.notNull().defaultTo(sql`0`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('task_contents').dropColumn('audio_bytes').execute();
  await db.schema.alterTable('tasks').dropColumn('audio_bytes').execute();
}
