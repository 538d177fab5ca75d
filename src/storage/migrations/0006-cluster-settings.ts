/**
 * Settings every node of a cluster shares through the database, e.g. the secret that signs the
 * node-to-node stream relay requests (created once, by whichever node starts first).
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('cluster_settings')
    .addColumn('name', 'text', (c) => c.primaryKey())
    .addColumn('value', 'text', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('cluster_settings').execute();
}
