/** Running a store's multi-statement write in a transaction, its own or the caller's. */
import type { Kysely, Transaction } from 'kysely';
import type { Database } from './schema.js';

/**
 * Runs `work` in a transaction: `db` itself when it is one (a store made on a transaction then
 * writes within it, and the caller's commit or rollback decides), else a new one of `db`'s.
 */
export function inTransaction<T>(
  db: Kysely<Database>,
  work: (trx: Transaction<Database>) => Promise<T>,
): Promise<T> {
  return db.isTransaction ? work(db as Transaction<Database>) : db.transaction().execute(work);
}
