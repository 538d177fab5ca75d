/** The per-account lock that serialises an account's admissions and quota checks across every node. */
import type { Transaction } from 'kysely';
import type { Database } from './schema.js';

/** Locks `accountId`'s row until `trx` ends (FOR NO KEY UPDATE). */
export async function lockAccount(trx: Transaction<Database>, accountId: string): Promise<void> {
  // NO KEY UPDATE: inserts elsewhere that only reference the account (KEY SHARE) are not blocked.
  await trx.selectFrom('accounts').select('id').where('id', '=', accountId).forNoKeyUpdate().execute();
}
