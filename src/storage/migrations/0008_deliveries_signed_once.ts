/**
 * A signed delivery is taken once: `signature_t` keeps the `t` of the signature that proved a
 * delivery sent without an Idempotency-Key, and no endpoint takes the same body signed at the
 * same `t` twice. The same request sent again within the 300 s window (a replay: it needs no
 * secret, only a copy of the request) is answered with the first 202 and processed nothing
 * again. Text, not an integer column: Unix seconds outgrow PostgreSQL's `integer` in 2038, and
 * the value is only ever compared.
 *
 * Frozen in time: a migration never imports application code and is never edited once shipped.
 */
import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('deliveries').addColumn('signature_t', 'text').execute();
  await db.schema
    .createIndex('deliveries_signed_once')
    .on('deliveries')
    .columns(['webhook_id', 'signature_t', 'body_sha256'])
    .unique()
    .where(sql.ref('signature_t'), 'is not', null)
    .execute();
}
