import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/**
 * Seals secrets the service must be able to read back (webhook signing secrets: an HMAC needs
 * the key itself, so a hash will not do) with AES-256-GCM under the deployment's secret key
 * (`CAREPATH_SECRET_KEY`).
 *
 * Sealed text: `v1:<iv>:<tag>:<ciphertext>`, each part base64; a fresh 96-bit IV per seal.
 * The version prefix leaves room for another algorithm or key without rewriting old rows.
 *
 * Without a configured key the box stores `plain:<secret>`: a fresh install works with no
 * set-up, and production sets the key. Values stored plain stay readable after a key is set,
 * so configuring one later does not break existing endpoints; `carepath admin secret seal-stored`
 * seals them once every process has the key (modules/secrets/seal-plain-secrets.ts).
 *
 * Failures are plain errors, not API errors: a wrong key or a damaged row is an operator's
 * problem, and the HTTP layer logs unknown errors while answering `internal`.
 */
export interface SecretBox {
  /** true when a key is configured and new secrets are encrypted */
  readonly encrypts: boolean;
  seal(text: string): string;
  open(sealed: string): string;
}

export class SecretBoxError extends Error {
  /** Its messages are this file's own sentences (a wrong key, a damaged row): logs may keep them. */
  readonly loggable = true;
  constructor(message: string) {
    super(message);
    this.name = 'SecretBoxError';
  }
}

const KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const HEX_KEY = /^[0-9a-fA-F]{64}$/;
const BASE64_KEY = /^[A-Za-z0-9+/_-]{43}=?$/;

/** The key as 64 hex characters or base64 (standard or URL-safe) of 32 bytes; null otherwise. */
export function decodeSecretKey(text: string): Buffer | null {
  const trimmed = text.trim();
  if (HEX_KEY.test(trimmed)) return Buffer.from(trimmed, 'hex');
  if (BASE64_KEY.test(trimmed)) {
    const key = Buffer.from(trimmed.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (key.length === KEY_BYTES) return key;
  }
  return null;
}

const PLAIN_PREFIX = 'plain:';

/** A SQL LIKE pattern for the values stored without a key (`plain:…`), for the store's own reads of them. */
export const UNSEALED_LIKE = `${PLAIN_PREFIX}%`;

function openPlain(sealed: string): string | null {
  return sealed.startsWith(PLAIN_PREFIX) ? sealed.slice(PLAIN_PREFIX.length) : null;
}

export function createSecretBox(keyMaterial: string | undefined): SecretBox {
  if (keyMaterial === undefined || keyMaterial === '') {
    return {
      encrypts: false,
      seal: (text) => PLAIN_PREFIX + text,
      open: (sealed) => {
        const plain = openPlain(sealed);
        if (plain !== null) return plain;
        throw new SecretBoxError('this secret was sealed with a key; set CAREPATH_SECRET_KEY to the key it was sealed with');
      },
    };
  }
  const key = decodeSecretKey(keyMaterial);
  if (!key) throw new SecretBoxError('the secret key must be 32 bytes, written as 64 hex characters or base64');

  return {
    encrypts: true,
    seal(text) {
      const iv = randomBytes(IV_BYTES);
      const cipher = createCipheriv('aes-256-gcm', key, iv);
      const ciphertext = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
      const tag = cipher.getAuthTag();
      return ['v1', iv.toString('base64'), tag.toString('base64'), ciphertext.toString('base64')].join(':');
    },
    open(sealed) {
      const plain = openPlain(sealed);
      if (plain !== null) return plain;
      const parts = sealed.split(':');
      if (parts.length !== 4 || parts[0] !== 'v1') throw new SecretBoxError('sealed secret is not in the v1 format');
      const [, ivText, tagText, ciphertextText] = parts;
      const iv = Buffer.from(ivText, 'base64');
      const tag = Buffer.from(tagText, 'base64');
      if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) throw new SecretBoxError('sealed secret is damaged');
      try {
        const decipher = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
        decipher.setAuthTag(tag);
        return Buffer.concat([decipher.update(Buffer.from(ciphertextText, 'base64')), decipher.final()]).toString('utf8');
      } catch {
        throw new SecretBoxError('sealed secret does not open with the configured key (wrong key, or the row is damaged)');
      }
    },
  };
}
