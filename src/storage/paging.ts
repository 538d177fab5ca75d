/** One page of an account's rows, newest first, with the total: the shape every list endpoint returns. */
import { sql, type SelectQueryBuilder, type Simplify } from 'kysely';

/**
 * Runs `query` (filtered, with its selection) as a page ordered by created_at, id descending, and
 * counts every row it matches. One statement: each row carries the count of all matches (a window
 * over the filtered rows, computed before the page is cut); only a page past the last row, which
 * has no row to carry it, costs a second statement.
 */
export async function fetchPage<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  limit: number,
  offset: number,
): Promise<{ rows: Simplify<O>[]; total: number }> {
  const counted = await query
    .select(sql<string>`count(*) over ()`.as('matching_rows'))
    .$castTo<O & { matching_rows: string }>()
    .orderBy(sql`created_at`, 'desc')
    .orderBy(sql`id`, 'desc')
    .limit(limit)
    .offset(offset)
    .execute();
  if (counted.length === 0 && offset > 0) {
    const [count] = await query
      .clearSelect()
      .select(sql<string>`count(*)`.as('n'))
      .$castTo<{ n: string }>()
      .execute();
    return { rows: [], total: Number(count?.n ?? 0) };
  }
  const total = Number(counted[0]?.matching_rows ?? 0);
  const rows = counted.map((row) => {
    const { matching_rows: _, ...rest } = row;
    return rest as unknown as Simplify<O>;
  });
  return { rows, total };
}
