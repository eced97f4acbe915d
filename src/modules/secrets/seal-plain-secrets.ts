/**
 * Secrets stored before `CAREPATH_SECRET_KEY` was set (`plain:…`: a staging store that started
 * without a key) are sealed under it when a process with the key starts.
 *
 * Why: the box opens `plain:` values after a key is set, so that setting one later breaks no
 * endpoint; but those values stayed readable in the database until each was rotated, and an
 * operator who set the key to protect the secrets at rest (a security review asks exactly that)
 * had nothing to tell them which ones were still bare. Now the first process with the key seals
 * every one of them, and says how many.
 *
 * Each row is rewritten only if it still holds the value read (processes starting together seal
 * it once; a rotation meanwhile wins). The old bytes may stay in the store's free space and
 * write-ahead log until reused: rotate the secrets whose database files may have been copied
 * (docs/operations.md "Secrets").
 */
import type { Transaction } from 'kysely';
import type { Database, Db } from '../../storage/database.js';
import type { SecretBox } from '../../lib/secret-box.js';

const UNSEALED = 'plain:%';
/** Rows rewritten per transaction: short transactions, however many endpoints a store has. */
const BATCH = 500;

export interface SealedCounts {
  webhookSecrets: number;
  partnerSecrets: number;
}

/** Seals every `plain:` secret with `box` (which must encrypt); answers how many rows it sealed. */
export async function sealPlainSecrets(db: Db, box: SecretBox): Promise<SealedCounts> {
  if (!box.encrypts) throw new Error('sealPlainSecrets needs a box with a key');
  return { webhookSecrets: await sealWebhookSecrets(db, box), partnerSecrets: await sealPartnerSecrets(db, box) };
}

/**
 * Seals the `plain:` rows `readAfter` pages through (in key order, BATCH at a time), each rewritten
 * by `rewrite` only if it still holds the value read; answers how many were rewritten.
 */
async function sealRows<Row, Key>(
  db: Db,
  box: SecretBox,
  start: Key,
  readAfter: (after: Key) => Promise<Row[]>,
  parts: { value(row: Row): string; key(row: Row): Key },
  rewrite: (tx: Transaction<Database>, row: Row, sealed: string) => Promise<bigint>,
): Promise<number> {
  let sealed = 0;
  let after = start;
  for (;;) {
    const rows = await readAfter(after);
    if (rows.length === 0) return sealed;
    await db.transaction().execute(async (tx) => {
      for (const row of rows) sealed += Number(await rewrite(tx, row, box.seal(box.open(parts.value(row)))));
    });
    after = parts.key(rows[rows.length - 1]);
  }
}

function sealWebhookSecrets(db: Db, box: SecretBox): Promise<number> {
  return sealRows(
    db,
    box,
    '',
    (after) =>
      db
        .selectFrom('webhook_secrets')
        .select(['id', 'sealed_secret'])
        .where('sealed_secret', 'like', UNSEALED)
        .where('id', '>', after)
        .orderBy('id')
        .limit(BATCH)
        .execute(),
    { value: (row) => row.sealed_secret!, key: (row) => row.id },
    async (tx, row, sealedSecret) =>
      (
        await tx
          .updateTable('webhook_secrets')
          .set({ sealed_secret: sealedSecret })
          .where('id', '=', row.id)
          .where('sealed_secret', '=', row.sealed_secret)
          .executeTakeFirst()
      ).numUpdatedRows,
  );
}

function sealPartnerSecrets(db: Db, box: SecretBox): Promise<number> {
  return sealRows(
    db,
    box,
    { workspace: '', name: '' },
    (after) =>
      db
        .selectFrom('workspace_secrets')
        .select(['workspace_id', 'name', 'sealed_value'])
        .where('sealed_value', 'like', UNSEALED)
        .where((eb) =>
          eb.or([eb('workspace_id', '>', after.workspace), eb.and([eb('workspace_id', '=', after.workspace), eb('name', '>', after.name)])]),
        )
        .orderBy('workspace_id')
        .orderBy('name')
        .limit(BATCH)
        .execute(),
    { value: (row) => row.sealed_value, key: (row) => ({ workspace: row.workspace_id, name: row.name }) },
    async (tx, row, sealedValue) =>
      (
        await tx
          .updateTable('workspace_secrets')
          .set({ sealed_value: sealedValue })
          .where('workspace_id', '=', row.workspace_id)
          .where('name', '=', row.name)
          .where('sealed_value', '=', row.sealed_value)
          .executeTakeFirst()
      ).numUpdatedRows,
  );
}
