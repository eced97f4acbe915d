/**
 * Does this process's `CAREPATH_SECRET_KEY` open the secrets already sealed in the store?
 *
 * Every process of a deployment, and every admin shell that writes a secret, must hold the same
 * key. One without it (or with another) would otherwise start and fail later: every signed
 * delivery to an endpoint answered 500, because its secret could not be opened; an admin shell
 * without the key stored a rotated webhook secret unsealed, in a production database (found by
 * following docs/operations.md from a shell without the deployment's settings). The newest
 * sealed value of each kind is tried (no value is read out or logged); a store with none, or
 * only unsealed ones (a first try without a key), has nothing to disagree with.
 */
import { ConfigError } from '../../config.js';
import { createSecretBox, UNSEALED_LIKE, type SecretBox } from '../../lib/secret-box.js';
import type { DbOrTx } from '../../storage/database.js';

export async function checkSecretKeyOpensStore(db: DbOrTx, secretKey: string | undefined): Promise<void> {
  const sealed = await newestSealedValues(db);
  if (sealed.length === 0) return;
  const box = createSecretBox(secretKey);
  for (const value of sealed) {
    try {
      box.open(value);
    } catch {
      throw new ConfigError(
        secretKey === undefined
          ? 'CAREPATH_SECRET_KEY is not set, but this store holds secrets sealed with a key: set it to the deployment\'s key'
          : 'CAREPATH_SECRET_KEY does not open the secrets sealed in this store (they were sealed with another key): set it to the deployment\'s key',
      );
    }
  }
}

async function newestSealedValues(db: DbOrTx): Promise<string[]> {
  const webhook = await db
    .selectFrom('webhook_secrets')
    .select('sealed_secret as value')
    .where('sealed_secret', 'is not', null)
    .where('sealed_secret', 'not like', UNSEALED_LIKE)
    .orderBy('created_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  const partner = await db
    .selectFrom('workspace_secrets')
    .select('sealed_value as value')
    .where('sealed_value', 'not like', UNSEALED_LIKE)
    .orderBy('updated_at', 'desc')
    .limit(1)
    .executeTakeFirst();
  return [webhook?.value, partner?.value].filter((value): value is string => typeof value === 'string');
}

/** The box to seal new secrets with, once the key is known to be the one the store's secrets need. */
export async function checkedSecretBox(db: DbOrTx, secretKey: string | undefined): Promise<SecretBox> {
  await checkSecretKeyOpensStore(db, secretKey);
  return createSecretBox(secretKey);
}
