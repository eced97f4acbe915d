/**
 * Secrets stored before `CAREPATH_SECRET_KEY` was set (`plain:…`: a staging store that started
 * without a key): counted, so that a process with the key can say they are still readable, and
 * sealed under the key by `carepath admin secret seal-stored`.
 *
 * Why: the box opens `plain:` values after a key is set, so that setting one later breaks no
 * endpoint; but those values stayed readable in the database until each was rotated, and nothing
 * told the operator (a security review). Sealing is the operator's step, taken once every process
 * runs with the key: done by the first process to start with it, it broke the ones still running
 * without it in a rolling deploy (every signed delivery they took answered 500; a code review).
 *
 * Each row is rewritten only if it still holds the value read (two commands at once seal it
 * once; a rotation meanwhile wins). The old bytes may stay in the store's free space and
 * write-ahead log until reused: rotate the secrets whose database files may have been copied
 * (docs/operations.md "Secrets").
 */
import type { Transaction } from 'kysely';
import type { Database, Db } from '../../storage/database.js';
import { UNSEALED_LIKE, type SecretBox } from '../../lib/secret-box.js';

/** Rows rewritten per transaction: short transactions, however many endpoints a store has. */
const BATCH = 500;

export interface SealedCounts {
  webhookSecrets: number;
  partnerSecrets: number;
}

/** How many secrets of each kind are stored `plain:`. */
export async function countPlainSecrets(db: Db): Promise<SealedCounts> {
  const webhook = await db.selectFrom('webhook_secrets').select((eb) => eb.fn.countAll<number>().as('n')).where('sealed_secret', 'like', UNSEALED_LIKE).executeTakeFirstOrThrow();
  const partner = await db.selectFrom('workspace_secrets').select((eb) => eb.fn.countAll<number>().as('n')).where('sealed_value', 'like', UNSEALED_LIKE).executeTakeFirstOrThrow();
  return { webhookSecrets: Number(webhook.n), partnerSecrets: Number(partner.n) };
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
        .where('sealed_secret', 'like', UNSEALED_LIKE)
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
        .where('sealed_value', 'like', UNSEALED_LIKE)
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
