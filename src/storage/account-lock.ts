/** The per-account lock that serialises an account's admissions and quota checks across every node. */
import type { Kysely, Transaction } from 'kysely';
import type { Database } from './schema.js';
import {
  storageRefusal,
  type StorageLimits,
  type StorageRefusal,
  type StorageUsage,
} from './storage-limits.js';
import { inTransaction } from './transaction.js';

/** Locks `accountId`'s row until `trx` ends (FOR NO KEY UPDATE). */
export async function lockAccount(trx: Transaction<Database>, accountId: string): Promise<void> {
  // NO KEY UPDATE: inserts elsewhere that only reference the account (KEY SHARE) are not blocked.
  await trx.selectFrom('accounts').select('id').where('id', '=', accountId).forNoKeyUpdate().execute();
}

/**
 * Runs `write` unless `adding` on top of what the account uses (`usage`) passes one of `limits`;
 * returns the refusal then, with nothing written. Decided under the account's lock, so concurrent
 * writes on any node never pass a limit together; one unlocked read first answers a flood of
 * refusals without taking the lock for each.
 */
export async function writeWithinLimits(
  db: Kysely<Database>,
  accountId: string,
  limits: StorageLimits,
  adding: Partial<StorageUsage>,
  usage: (db: Kysely<Database> | Transaction<Database>) => Promise<Partial<StorageUsage>>,
  write: (trx: Transaction<Database>) => Promise<void>,
): Promise<StorageRefusal | undefined> {
  const early = storageRefusal(limits, await usage(db), adding);
  if (early !== undefined) return early;
  return inTransaction(db, async (trx) => {
    await lockAccount(trx, accountId);
    const refused = storageRefusal(limits, await usage(trx), adding);
    if (refused === undefined) await write(trx);
    return refused;
  });
}
