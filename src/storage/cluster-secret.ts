/** A secret every node of a cluster shares: created by the first node that asks, then read by all. */
import { randomBytes } from 'node:crypto';
import type { Kysely } from 'kysely';
import type { Database } from './schema.js';

/** The shared secret called `name`, created (32 random bytes, base64url) if there is none yet. */
export async function clusterSecret(db: Kysely<Database>, name: string): Promise<string> {
  await db
    .insertInto('cluster_settings')
    .values({ name, value: randomBytes(32).toString('base64url') })
    .onConflict((oc) => oc.column('name').doNothing())
    .execute();
  const row = await db
    .selectFrom('cluster_settings')
    .select('value')
    .where('name', '=', name)
    .executeTakeFirstOrThrow();
  return row.value;
}
