/**
 * Generation leases: the fencing token of the delivery that last claimed a task (its writes are
 * conditioned on it, so a holder that lost its lease cannot overwrite its successor's work) and
 * the URL of the node that holds it.
 */
import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('tasks')
    .addColumn('lease_token', 'text')
    .addColumn('worker_url', 'text')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('tasks').dropColumn('worker_url').dropColumn('lease_token').execute();
}
