/**
 * Per-account storage limits: the bytes of each voice's uploaded sample and the blob key holding it
 * (a new upload goes to a new key and replaces the old one only once it is stored and counted).
 * Counting an account's voices and splitters uses their (account_id, created_at) indexes.
 */
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .alterTable('voices')
    .addColumn('lora_bytes', 'bigint', (c) => c.notNull().defaultTo(sql`0`))
    .addColumn('lora_key', 'text')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('voices').dropColumn('lora_key').dropColumn('lora_bytes').execute();
}
