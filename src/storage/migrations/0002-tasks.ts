/** Generation tasks and their content pieces; the tasks table is also the durable work queue. */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('tasks')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id').onDelete('cascade'))
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('auth_token', 'text', (c) => c.notNull())
    .addColumn('request', 'text', (c) => c.notNull())
    .addColumn('characters', 'integer', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('audio_key', 'text')
    .addColumn('duration_seconds', 'double precision')
    .addColumn('created_at', 'timestamptz', (c) => c.notNull())
    .addColumn('updated_at', 'timestamptz', (c) => c.notNull())
    .addColumn('generated_at', 'timestamptz')
    .execute();
  await db.schema
    .createIndex('tasks_account_created')
    .on('tasks')
    .columns(['account_id', 'created_at'])
    .execute();
  await db.schema.createIndex('tasks_status_created').on('tasks').columns(['status', 'created_at']).execute();
  await db.schema
    .createTable('task_contents')
    .addColumn('task_id', 'text', (c) => c.notNull().references('tasks.id').onDelete('cascade'))
    .addColumn('idx', 'integer', (c) => c.notNull())
    .addColumn('text', 'text', (c) => c.notNull())
    .addColumn('voice_id', 'text', (c) => c.notNull())
    .addColumn('binding', 'text', (c) => c.notNull())
    .addColumn('params', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('samples', 'bigint')
    .addColumn('audio_key', 'text')
    .addColumn('generated_at', 'timestamptz')
    .addPrimaryKeyConstraint('task_contents_pk', ['task_id', 'idx'])
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('task_contents').execute();
  await db.schema.dropTable('tasks').execute();
}
