import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { describeEachStore, type TestEnv, type TestWorkspace } from '../helpers/test-env.js';
import { createEndpoint, deliver, nowSeconds, type Endpoint } from '../helpers/deliveries.js';
import { signPayload, verifySignature } from '../../src/ingestion/signature.js';
import { verifyBearer } from '../../src/ingestion/bearer.js';
import { rotateSecret } from '../../src/modules/webhooks/webhook-secrets.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { sha256Hex } from '../../src/lib/json.js';

const patient = { resourceType: 'Patient', id: 'sig-1', name: [{ family: 'Chalmers', given: ['Peter'] }] };
const body = JSON.stringify(patient);
const hex = (secret: string, t: number | string, raw: string) => createHmac('sha256', secret).update(`${t}.${raw}`).digest('hex');

describe('verifySignature and signPayload (pure)', () => {
  const secret = 'whsec_test';
  const now = 1_700_000_000;
  const valid = signPayload(secret, body, now);

  it('signs t=<t>,v1=<lowercase hex HMAC-SHA256 of "<t>.<body>">', () => {
    expect(valid).toBe(`t=${now},v1=${hex(secret, now, body)}`);
    expect(verifySignature(valid, Buffer.from(body), [secret], now)).toEqual({ ok: true, timestamp: now, secretIndex: 0 });
  });

  it.each([
    ['no header', undefined, 'missing_header'],
    ['an empty header', '', 'missing_header'],
    ['a blank header', '   ', 'missing_header'],
    ['garbage', 'garbage', 'missing_timestamp'],
    ['no t', `v1=${hex(secret, now, body)}`, 'missing_timestamp'],
    ['t twice', `t=${now},t=${now},v1=${hex(secret, now, body)}`, 'malformed_header'],
    ['a non-numeric t', `t=soon,v1=${hex(secret, 'soon', body)}`, 'invalid_timestamp'],
    ['a negative t', `t=-5,v1=${hex(secret, -5, body)}`, 'invalid_timestamp'],
    ['v0 only', `t=${now},v0=${hex(secret, now, body)}`, 'missing_v1'],
    ['an empty v1', `t=${now},v1=`, 'malformed_v1'],
    ['a truncated v1', `t=${now},v1=${hex(secret, now, body).slice(0, 63)}`, 'malformed_v1'],
    ['an upper-case v1', `t=${now},v1=${hex(secret, now, body).toUpperCase()}`, 'malformed_v1'],
    ['a base64 v1', `t=${now},v1=${Buffer.from(hex(secret, now, body), 'hex').toString('base64')}`, 'malformed_v1'],
    ['a v1 of the wrong secret', signPayload('whsec_other', body, now), 'no_matching_signature'],
    ['a v1 over another t', `t=${now + 1},v1=${hex(secret, now, body)}`, 'no_matching_signature'],
    ['too many v1 values', `t=${now},${Array.from({ length: 17 }, () => `v1=${'0'.repeat(64)}`).join(',')}`, 'malformed_header'],
    ['a header sent twice', [valid, valid], 'malformed_header'],
  ])('refuses %s as invalid_signature (%s)', (_case, header, reason) => {
    expect(verifySignature(header as string | string[] | undefined, Buffer.from(body), [secret], now)).toEqual({
      ok: false,
      code: 'invalid_signature',
      reason,
    });
  });

  it('refuses t 301 s away (past or future) as signature_expired, accepts 300 s', () => {
    for (const t of [now - 301, now + 301]) {
      expect(verifySignature(signPayload(secret, body, t), body, [secret], now)).toMatchObject({ ok: false, code: 'signature_expired' });
    }
    for (const t of [now - 300, now + 300]) expect(verifySignature(signPayload(secret, body, t), body, [secret], now).ok).toBe(true);
  });

  it('says expired only to a holder of the secret: an old t with a wrong signature is invalid', () => {
    expect(verifySignature(signPayload('whsec_other', body, now - 1000), body, [secret], now)).toMatchObject({ code: 'invalid_signature' });
  });

  it('accepts one valid v1 among junk, and tells which secret matched', () => {
    const junk = `t=${now},v1=,v1=xyz,v0=${hex(secret, now, body)},foo=bar,stray,v1=${hex('whsec_old', now, body)},v2=abc`;
    expect(verifySignature(junk, body, ['whsec_new', 'whsec_old'], now)).toEqual({ ok: true, timestamp: now, secretIndex: 1 });
  });

  it('checks the raw bytes: a re-serialized body fails', () => {
    const pretty = JSON.stringify(patient, null, 2);
    expect(verifySignature(signPayload(secret, pretty, now), body, [secret], now)).toMatchObject({ reason: 'no_matching_signature' });
  });

  it('never runs with the time check switched off', () => {
    expect(() => verifySignature(valid, body, [secret], now, 0)).toThrow(RangeError);
  });

  it('verifyBearer compares SHA-256 digests of the presented secret', () => {
    const hashes = [sha256Hex('whsec_new'), sha256Hex('whsec_old')];
    expect(verifyBearer('Bearer whsec_old', hashes)).toEqual({ ok: true, secretIndex: 1 });
    expect(verifyBearer('bearer whsec_new ', hashes)).toEqual({ ok: true, secretIndex: 0 });
    expect(verifyBearer('Bearer whsec_wrong', hashes)).toEqual({ ok: false, reason: 'no_matching_secret' });
    expect(verifyBearer('Basic whsec_new', hashes)).toEqual({ ok: false, reason: 'missing_token' });
    expect(verifyBearer(undefined, hashes)).toEqual({ ok: false, reason: 'missing_token' });
  });
});

describeEachStore('delivery signatures over HTTP', (env) => {
  let ws: TestWorkspace;
  let endpoint: Endpoint;

  const refused = async (options: Parameters<typeof deliver>[3], code: string, raw: string = body) => {
    const res = await deliver(env, endpoint, undefined, { raw, ...options });
    expect(res.statusCode, res.body).toBe(401);
    expect(res.json()).toMatchObject({ code, requestId: expect.any(String) });
    return res;
  };

  it('sets up an endpoint', async () => {
    ws = await env.workspace();
    endpoint = await createEndpoint(ws);
  });

  it('accepts a valid signature', async () => {
    const res = await deliver(env, endpoint, undefined, { raw: body });
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json()).toEqual({ accepted: 1, idempotencyKey: null });
  });

  it.each([
    ['a missing header', null],
    ['an empty header', ''],
    ['a malformed header', 'this is not a signature'],
    ['a header with only v0', () => `t=${nowSeconds(env.container)},v0=${hex(endpoint.secret, nowSeconds(env.container), body)}`],
    ['an empty v1', () => `t=${nowSeconds(env.container)},v1=`],
    ['a truncated v1', () => signPayload(endpoint.secret, body, nowSeconds(env.container)).slice(0, -2)],
    ['a wrong secret', () => signPayload('whsec_not-the-secret', body, nowSeconds(env.container))],
    ['a non-numeric t', () => `t=now,v1=${hex(endpoint.secret, 'now', body)}`],
  ])('refuses %s with invalid_signature', async (_case, signature) => {
    const header = typeof signature === 'function' ? signature() : signature;
    const res = await refused({ signature: header }, 'invalid_signature');
    expect(res.json().error).toMatch(/X-Service-Signature|v1 signature/);
  });

  it('says what is wrong with a v1 of the wrong form, and how a matching one is made', async () => {
    const now = nowSeconds(env.container);
    const upper = await refused({ signature: `t=${now},v1=${hex(endpoint.secret, now, body).toUpperCase()}` }, 'invalid_signature');
    expect(upper.json().error).toBe('X-Service-Signature v1 must be the HMAC-SHA256 as 64 lower-case hex characters (not base64, not upper case)');
    // The HMAC keyed with the secret's decoded bytes (another convention) is of the right form, and wrong.
    const decoded = Buffer.from(endpoint.secret.slice('whsec_'.length), 'base64url');
    const other = `t=${now},v1=${createHmac('sha256', decoded).update(`${now}.${body}`).digest('hex')}`;
    expect((await refused({ signature: other }, 'invalid_signature')).json().error).toBe(
      "no v1 signature matches this body under the endpoint's secret (the HMAC key is the whole secret, whsec_ included, as UTF-8 text; " +
        'the message is "<t>." followed by the exact bytes of the body sent)',
    );
  });

  it('says that t counts seconds when a sender signs with milliseconds (Date.now())', async () => {
    const ms = env.container.clock.now().getTime();
    const res = await refused({ signature: `t=${ms},v1=${hex(endpoint.secret, ms, body)}` }, 'invalid_signature');
    expect(res.json().error).toMatch(/^X-Service-Signature t must be whole Unix seconds.*not milliseconds/);
  });

  it('refuses a body re-serialized after signing', async () => {
    const signedPretty = signPayload(endpoint.secret, JSON.stringify(patient, null, 2), nowSeconds(env.container));
    await refused({ signature: signedPretty }, 'invalid_signature', body);
  });

  it('refuses t 301 s in the past and in the future with signature_expired', async () => {
    // How far off and which way: the sender's clock (NTP) or a replay, told apart at a glance.
    const late = await refused({ t: nowSeconds(env.container) - 1000 }, 'signature_expired');
    expect(late.json().error).toMatch(/^X-Service-Signature t is 100\d seconds behind this service's clock \(at most 300 are accepted\)/);
    const early = await refused({ t: nowSeconds(env.container) + 301 }, 'signature_expired');
    expect(early.json().error).toMatch(/^X-Service-Signature t is 30\d seconds ahead of this service's clock/);
  });

  it('accepts one valid v1 among junk', async () => {
    const t = nowSeconds(env.container);
    const header = `t=${t},v1=deadbeef,v0=${'a'.repeat(64)},v1=,junk,v1=${hex(endpoint.secret, t, body)}`;
    const res = await deliver(env, endpoint, undefined, { raw: body, signature: header });
    expect(res.statusCode, res.body).toBe(202);
  });

  it('takes the old and the new secret during a rotation overlap, only the new one after it', async () => {
    const box = createSecretBox(env.container.config.secretKey);
    const rotating = await createEndpoint(ws);
    const fresh = await rotateSecret(env.db, box, rotating.webhookId, 60 * 60_000, env.container.clock.now());
    for (const secret of [rotating.secret, fresh]) {
      const res = await deliver(env, { ...rotating, secret }, undefined, { raw: body });
      expect(res.statusCode, res.body).toBe(202);
    }
    // Both signatures in one header, as a sender mid-switch sends them.
    const t = nowSeconds(env.container);
    const both = `t=${t},v1=${hex(fresh, t, body)},v1=${hex(rotating.secret, t, body)}`;
    expect((await deliver(env, rotating, undefined, { raw: body, signature: both })).statusCode).toBe(202);

    // A rotation whose overlap has already passed: the old secret is refused.
    const ended = await createEndpoint(ws);
    const past = new Date(env.container.clock.now().getTime() - 10 * 60_000);
    const newest = await rotateSecret(env.db, box, ended.webhookId, 60_000, past);
    const old = await deliver(env, ended, undefined, { raw: body });
    expect(old.statusCode).toBe(401);
    // Said as what it is: a wrong secret and a rotated-out one read alike after an overlap.
    const retiredAt = new Date(past.getTime() + 60_000).toISOString();
    expect(old.json()).toMatchObject({
      code: 'invalid_signature',
      error: `X-Service-Signature was made with a secret this endpoint stopped accepting at ${retiredAt} (the secret was rotated); use the endpoint's current secret`,
    });
    expect((await deliver(env, { ...ended, secret: newest }, undefined, { raw: body })).statusCode).toBe(202);
    expect((await deliver(env, { ...ended, secret: 'whsec_never-its-secret' }, undefined, { raw: body })).json().error).toMatch(/^no v1 signature matches/);
  });

  it('bearer endpoints take the secret as a bearer token, compared by hash', async () => {
    const bearer = await createEndpoint(ws, { auth: 'bearer' });
    const send = (authorization: string | null) =>
      deliver(env, bearer, undefined, { raw: body, signature: null, headers: authorization === null ? {} : { authorization } });
    expect((await send(`Bearer ${bearer.secret}`)).statusCode).toBe(202);
    for (const wrong of [null, 'Bearer whsec_wrong', bearer.secret, `Basic ${bearer.secret}`]) {
      const res = await send(wrong);
      expect(res.statusCode).toBe(401);
      expect(res.json().code).toBe('invalid_signature');
    }
    // A signature is not what a bearer endpoint takes.
    const signed = await deliver(env, bearer, undefined, { raw: body });
    expect(signed.statusCode).toBe(401);
    // A bearer secret rotated out is named as such.
    const past = new Date(env.container.clock.now().getTime() - 10 * 60_000);
    await rotateSecret(env.db, createSecretBox(env.container.config.secretKey), bearer.webhookId, 60_000, past);
    const retired = await send(`Bearer ${bearer.secret}`);
    expect(retired.statusCode).toBe(401);
    expect(retired.json().error).toBe(
      `the bearer secret is one this endpoint stopped accepting at ${new Date(past.getTime() + 60_000).toISOString()} (the secret was rotated); use the endpoint's current secret`,
    );
  });

  it('answers 404 for unknown, deleted and non-UUID endpoints, before looking at the signature', async () => {
    const unknown = { webhookId: '01900000-0000-7000-8000-000000000000', secret: 'x' };
    expect((await deliver(env, unknown, undefined, { raw: body, signature: null })).statusCode).toBe(404);
    expect((await deliver(env, { webhookId: 'not-a-uuid', secret: 'x' }, undefined, { raw: body })).statusCode).toBe(404);
    const doomed = await createEndpoint(ws);
    expect((await ws.call('DELETE', `/v1/webhooks/${doomed.webhookId}`)).statusCode).toBe(204);
    const res = await deliver(env, doomed, undefined, { raw: body });
    expect(res.statusCode).toBe(404);
    expect(res.json().code).toBe('not_found');
  });

  it('answers 403 webhook_inactive to a signed delivery to an inactive endpoint', async () => {
    const paused = await createEndpoint(ws, { active: false });
    const res = await deliver(env, paused, undefined, { raw: body });
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe('webhook_inactive');
    // Without the secret the caller learns nothing about its state.
    expect((await deliver(env, paused, undefined, { raw: body, signature: null })).statusCode).toBe(401);
  });

  it('answers a retry of a delivery stored before the endpoint was switched off with its first 202; a new delivery is 403', async () => {
    const switching = await createEndpoint(ws);
    const first = await deliver(env, switching, undefined, { raw: body, key: 'before-off' });
    expect(first.statusCode).toBe(202);
    expect((await ws.call('PATCH', `/v1/webhooks/${switching.webhookId}`, { body: { active: false } })).statusCode).toBe(200);
    const retried = await deliver(env, switching, undefined, { raw: body, key: 'before-off' });
    expect(retried.statusCode).toBe(202);
    expect(retried.headers['idempotent-replayed']).toBe('true');
    expect(retried.json()).toEqual(first.json());
    // The same key with another body is still the key's mismatch; new data is the endpoint's refusal.
    const otherBody = JSON.stringify({ resourceType: 'Patient', id: 'other-after-off' });
    expect((await deliver(env, switching, undefined, { raw: otherBody, key: 'before-off' })).json().code).toBe('idempotency_mismatch');
    const fresh = await deliver(env, switching, undefined, { raw: JSON.stringify({ resourceType: 'Patient', id: 'new-after-off' }), key: 'after-off' });
    expect(fresh.statusCode).toBe(403);
    expect(fresh.json()).toMatchObject({ code: 'webhook_inactive', requestId: expect.any(String) });
    const stored = await env.db.selectFrom('deliveries').select('id').where('webhook_id', '=', switching.webhookId).execute();
    expect(stored).toHaveLength(1);
  });

  it('carries RateLimit headers on every answer', async () => {
    const res = await deliver(env, endpoint, undefined, { raw: body });
    expect(res.headers['ratelimit-limit']).toBeDefined();
    expect(res.headers['ratelimit-remaining']).toBeDefined();
    expect(res.headers['ratelimit-reset']).toBeDefined();
  });
});

describeEachStore(
  'delivery rate limit per endpoint',
  (env: TestEnv) => {
    it('answers 429 rate_limited with Retry-After once the endpoint bucket is empty, per endpoint', async () => {
      const ws = await env.workspace();
      const endpoint = await createEndpoint(ws);
      const statuses: number[] = [];
      let limited;
      for (let i = 0; i < 6 && !limited; i++) {
        const res = await deliver(env, endpoint, undefined, { raw: body });
        statuses.push(res.statusCode);
        if (res.statusCode === 429) limited = res;
      }
      expect(statuses[0]).toBe(202);
      expect(limited?.json().code).toBe('rate_limited');
      expect(Number(limited?.headers['retry-after'])).toBeGreaterThan(0);
      // Another endpoint has its own budget.
      const other = await createEndpoint(ws);
      expect((await deliver(env, other, undefined, { raw: body })).statusCode).toBe(202);
    });

    it('keeps refused deliveries to a budget of their own: junk at the URL cannot keep the real sender out', async () => {
      const ws = await env.workspace();
      const endpoint = await createEndpoint(ws);
      const junk = [];
      for (let i = 0; i < 6; i++) junk.push((await deliver(env, endpoint, undefined, { raw: body, signature: 't=1,v1=00' })).statusCode);
      expect(junk).toEqual([401, 401, 401, 429, 429, 429]);
      const signed = await deliver(env, endpoint, undefined, { raw: body });
      expect(signed.statusCode, signed.body).toBe(202);
      expect(signed.headers['ratelimit-remaining']).toBe('2');
    });
  },
  { env: { CAREPATH_RATE_LIMIT: '3/60s' } },
);
