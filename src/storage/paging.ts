/** One page of an account's rows, newest first, with the total: the shape every list endpoint returns. */
import { sql, type SelectQueryBuilder, type Simplify } from 'kysely';

/**
 * Runs `query` (filtered, with its selection) as a page ordered by created_at, id descending, and
 * counts every row it matches.
 */
export async function fetchPage<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  limit: number,
  offset: number,
): Promise<{ rows: Simplify<O>[]; total: number }> {
  // Both at once: one round trip to the database instead of two (on the embedded one, both are
  // sent to its worker together).
  const [rows, [count]] = await Promise.all([
    query
      .orderBy(sql`created_at`, 'desc')
      .orderBy(sql`id`, 'desc')
      .limit(limit)
      .offset(offset)
      .execute(),
    query
      .clearSelect()
      .select(sql<string>`count(*)`.as('n'))
      .$castTo<{ n: string }>()
      .execute(),
  ]);
  return { rows, total: Number(count?.n ?? 0) };
}
