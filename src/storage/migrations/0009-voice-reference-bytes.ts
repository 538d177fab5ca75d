/**
 * The bytes of a voice's reference clip (the WAV a reference-audio voice speaks like), counted with
 * its uploaded samples against the account's upload limit. Voices made before count 0.
 */
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('voices')
    .addColumn('reference_bytes', 'bigint', (c) => c.notNull().defaultTo(sql`0`))
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('voices').dropColumn('reference_bytes').execute();
}
