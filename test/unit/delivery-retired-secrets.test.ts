/**
 * A refused delivery is checked against the secret the endpoint retired last (to tell a sender
 * still on it what is wrong), not against every secret it ever had: each one checked is an
 * HMAC over the whole body (up to 20 MiB, about 17 ms) on the serving thread, for anyone who
 * knows the endpoint's URL, so the work of a refusal grew with every rotation.
 */
import { describe, expect, it } from 'vitest';
import { createSecretBox, type SecretBox } from '../../src/lib/secret-box.js';
import { checkDeliveryCredentials, type DeliveryEndpoint } from '../../src/modules/deliveries/delivery-endpoint.js';
import { signPayload } from '../../src/ingestion/signature.js';
import { hashWebhookSecret } from '../../src/modules/webhooks/webhook-secrets.js';
import type { SecretRow } from '../../src/modules/webhooks/webhook-secrets.js';

const now = new Date('2026-11-28T12:00:00.000Z');
const body = Buffer.from('{"resourceType":"Patient","id":"p1"}');

function countingBox(): SecretBox & { opened: number } {
  const inner = createSecretBox(undefined);
  const box = {
    encrypts: inner.encrypts,
    opened: 0,
    seal: (text: string) => inner.seal(text),
    open: (sealed: string) => {
      box.opened++;
      return inner.open(sealed);
    },
  };
  return box;
}

/** An endpoint with its current secret and `retired` secrets rotated out, one a day, the newest last. */
function endpointWith(auth: 'signature' | 'bearer', retired: number): { endpoint: DeliveryEndpoint; current: string; old: string[] } {
  const secrets: SecretRow[] = [];
  const old: string[] = [];
  const row = (secret: string, index: number, expiresAt: string | null): SecretRow => ({
    id: `0190a000-0000-7000-8000-${String(index).padStart(12, '0')}`,
    sealed_secret: auth === 'signature' ? `plain:${secret}` : null,
    secret_hash: hashWebhookSecret(secret),
    expires_at: expiresAt,
  });
  for (let i = 0; i < retired; i++) {
    const secret = `whsec_retired_${i}`;
    old.push(secret);
    secrets.push(row(secret, i, new Date(now.getTime() - (retired - i) * 86_400_000).toISOString()));
  }
  const current = 'whsec_current';
  secrets.push(row(current, retired, null));
  return { endpoint: { id: 'e', workspaceId: 'w', tenantId: 't', active: true, auth, secrets }, current, old };
}

const t = Math.floor(now.getTime() / 1000);

async function refusal(box: SecretBox, endpoint: DeliveryEndpoint, presented: { signature?: string; authorization?: string }): Promise<string> {
  try {
    await checkDeliveryCredentials({ db: undefined as never, box }, endpoint, { signature: presented.signature, authorization: presented.authorization }, body, now);
  } catch (error) {
    return (error as Error).message;
  }
  throw new Error('the delivery was taken');
}

describe('a refused delivery and the secrets an endpoint retired', () => {
  it('opens and checks the last retired secret only, however many rotations there were', async () => {
    const { endpoint, current, old } = endpointWith('signature', 30);
    const box = countingBox();
    expect(await refusal(box, endpoint, { signature: signPayload('whsec_a-guess', body, t) })).toMatch(/^no v1 signature matches/);
    // The current secret, and the one retired last.
    expect(box.opened).toBe(2);
    // The sender still on the secret just rotated out is told so.
    expect(await refusal(countingBox(), endpoint, { signature: signPayload(old.at(-1)!, body, t) })).toMatch(/made with a secret this endpoint stopped accepting/);
    // The current secret is taken as before.
    await expect(checkDeliveryCredentials({ db: undefined as never, box }, endpoint, { signature: signPayload(current, body, t), authorization: undefined }, body, now)).resolves.toEqual({ signedAt: t });
  });

  it('names the secret retired last when a rotation without overlap ended it and an older one at the same instant', async () => {
    // What `rotate-secret --overlap PT0S` leaves after an earlier rotation: both old secrets
    // stop at the rotation's instant; the rows come in no particular order.
    const at = new Date(now.getTime() - 60_000).toISOString();
    const row = (secret: string, id: string, expiresAt: string | null): SecretRow => ({ id, sealed_secret: `plain:${secret}`, secret_hash: hashWebhookSecret(secret), expires_at: expiresAt });
    const endpoint: DeliveryEndpoint = {
      id: 'e',
      workspaceId: 'w',
      tenantId: 't',
      active: true,
      auth: 'signature',
      secrets: [
        row('whsec_first', '0190a000-0000-7000-8000-000000000001', at),
        row('whsec_second', '0190a000-0000-7000-8000-000000000002', at),
        row('whsec_third', '0190a000-0000-7000-8000-000000000003', null),
      ],
    };
    expect(await refusal(countingBox(), endpoint, { signature: signPayload('whsec_second', body, t) })).toMatch(/made with a secret this endpoint stopped accepting/);
    expect(await refusal(countingBox(), endpoint, { signature: signPayload('whsec_first', body, t) })).toMatch(/^no v1 signature matches/);
  });

  it('the same for bearer endpoints', async () => {
    const { endpoint, old } = endpointWith('bearer', 30);
    expect(await refusal(countingBox(), endpoint, { authorization: `Bearer ${old.at(-1)}` })).toMatch(/the bearer secret is one this endpoint stopped accepting/);
    expect(await refusal(countingBox(), endpoint, { authorization: `Bearer ${old[0]}` })).toMatch(/^missing or invalid bearer secret/);
  });
});
