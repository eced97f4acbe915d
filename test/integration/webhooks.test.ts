import { createHash, randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { describeEachStore, type TestEnv, type TestWorkspace } from '../helpers/test-env.js';
import { createSecretBox, decodeSecretKey } from '../../src/lib/secret-box.js';
import { activeSecretsOf, rotateSecret } from '../../src/modules/webhooks/webhook-secrets.js';
import { ConfigError, loadConfig } from '../../src/config.js';
import { checkSecretKeyOpensStore } from '../../src/modules/secrets/secret-key-check.js';
import { countPlainSecrets, sealPlainSecrets } from '../../src/modules/secrets/seal-plain-secrets.js';
import { readSecrets, setSecret } from '../../src/modules/secrets/secret.repository.js';

const SECRET_FORMAT = /^whsec_[A-Za-z0-9_-]{43}$/;
const sha256 = (text: string) => createHash('sha256').update(text).digest('hex');
const HEX_KEY = randomBytes(32).toString('hex');

async function createWebhook(ws: TestWorkspace, body: Record<string, unknown> = { name: 'EHR feed' }) {
  const res = await ws.call('POST', '/v1/webhooks', { body });
  expect(res.statusCode, res.body).toBe(201);
  return res.json();
}

function secretRows(env: TestEnv, webhookId: string) {
  return env.db.selectFrom('webhook_secrets').selectAll().where('webhook_id', '=', webhookId).orderBy('id').execute();
}

const boxOf = (env: TestEnv) => createSecretBox(env.container.config.secretKey);

describeEachStore('webhook endpoints', (env) => {
  it('creates an endpoint: 201 with its URL and a secret shown once', async () => {
    const ws = await env.workspace();
    const created = await createWebhook(ws);
    expect(Object.keys(created).sort()).toEqual(['active', 'auth', 'createdAt', 'name', 'secret', 'updatedAt', 'url', 'webhookId']);
    expect(created).toMatchObject({
      name: 'EHR feed',
      active: true,
      auth: 'signature',
      url: `${env.container.config.publicUrl}/v1/webhooks/${created.webhookId}`,
    });
    expect(created.secret).toMatch(SECRET_FORMAT);

    const got = await ws.call('GET', `/v1/webhooks/${created.webhookId}`);
    expect(got.statusCode).toBe(200);
    const { secret: _secret, ...withoutSecret } = created;
    expect(got.json()).toEqual(withoutSecret);
    const list = await ws.call('GET', '/v1/webhooks');
    expect(list.statusCode).toBe(200);
    expect(list.json()).toEqual([withoutSecret]);
    expect(list.body).not.toContain(created.secret);
  });

  it('stores the hash always and, without a configured key, the secret as plain: for signing', async () => {
    const ws = await env.workspace();
    const created = await createWebhook(ws);
    const rows = await secretRows(env, created.webhookId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ secret_hash: sha256(created.secret), sealed_secret: `plain:${created.secret}`, expires_at: null });
    const active = await activeSecretsOf(env.db, boxOf(env), created.webhookId, new Date());
    expect(active.map((s) => s.secret)).toEqual([created.secret]);
  });

  it('keeps only the hash of a bearer endpoint', async () => {
    const ws = await env.workspace();
    const created = await createWebhook(ws, { name: 'Legacy lab', auth: 'bearer', active: false });
    expect(created).toMatchObject({ auth: 'bearer', active: false });
    expect(created.secret).toMatch(SECRET_FORMAT);
    const rows = await secretRows(env, created.webhookId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ secret_hash: sha256(created.secret), sealed_secret: null });
    const active = await activeSecretsOf(env.db, boxOf(env), created.webhookId, new Date());
    expect(active).toEqual([{ id: rows[0].id, secretHash: sha256(created.secret), secret: null, expiresAt: null }]);
  });

  it('gives every endpoint its own secret', async () => {
    const ws = await env.workspace();
    const secrets = new Set<string>();
    for (let i = 0; i < 5; i++) secrets.add((await createWebhook(ws, { name: `Feed ${i}` })).secret);
    expect(secrets.size).toBe(5);
    const list = await ws.call('GET', '/v1/webhooks');
    expect(list.json().map((w: { name: string }) => w.name)).toEqual(['Feed 4', 'Feed 3', 'Feed 2', 'Feed 1', 'Feed 0']);
  });

  it('renames and deactivates; auth cannot change', async () => {
    const ws = await env.workspace();
    const created = await createWebhook(ws);
    const renamed = await ws.call('PATCH', `/v1/webhooks/${created.webhookId}`, { body: { name: 'Main EHR' } });
    expect(renamed.statusCode).toBe(200);
    expect(renamed.json()).toMatchObject({ webhookId: created.webhookId, name: 'Main EHR', active: true, url: created.url });
    expect(renamed.json()).not.toHaveProperty('secret');
    const off = await ws.call('PATCH', `/v1/webhooks/${created.webhookId}`, { body: { active: false } });
    expect(off.json()).toMatchObject({ name: 'Main EHR', active: false });
    expect((await ws.call('GET', `/v1/webhooks/${created.webhookId}`)).json()).toEqual(off.json());

    const auth = await ws.call('PATCH', `/v1/webhooks/${created.webhookId}`, { body: { auth: 'bearer' } });
    expect(auth.statusCode).toBe(400);
    expect(auth.json()).toMatchObject({ code: 'invalid_request' });
    expect(auth.json().error).toContain('body.auth');
    // A leaked or lost secret is replaced by an admin command (spec: not through the API): the answer says which.
    const secret = await ws.call('PATCH', `/v1/webhooks/${created.webhookId}`, { body: { secret: 'whsec_mine' } });
    expect(secret.statusCode).toBe(400);
    expect(secret.json()).toMatchObject({ code: 'invalid_request' });
    expect(secret.json().error).toContain(`carepath admin webhook rotate-secret ${created.webhookId}`);
    const url = await ws.call('PATCH', `/v1/webhooks/${created.webhookId}`, { body: { url: 'https://elsewhere.example' } });
    expect(url.statusCode).toBe(400);
    expect(url.json().error).toContain('"url"');
    expect((await ws.call('GET', `/v1/webhooks/${created.webhookId}`)).json()).toEqual(off.json());
  });

  it('deletes softly: 204, then 404 everywhere, gone from the list, and its secrets stop verifying', async () => {
    const ws = await env.workspace();
    const kept = await createWebhook(ws, { name: 'Kept' });
    const created = await createWebhook(ws, { name: 'Doomed' });
    const deleted = await ws.call('DELETE', `/v1/webhooks/${created.webhookId}`);
    expect(deleted.statusCode).toBe(204);
    expect(deleted.body).toBe('');
    for (const [method, body] of [['GET'], ['PATCH', { name: 'x' }], ['DELETE']] as const) {
      const res = await ws.call(method, `/v1/webhooks/${created.webhookId}`, { body });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ code: 'not_found', requestId: expect.any(String) });
    }
    expect((await ws.call('GET', '/v1/webhooks')).json().map((w: { webhookId: string }) => w.webhookId)).toEqual([kept.webhookId]);
    const row = await env.db.selectFrom('webhooks').selectAll().where('id', '=', created.webhookId).executeTakeFirstOrThrow();
    expect(row.deleted_at).not.toBeNull();
    expect(await activeSecretsOf(env.db, boxOf(env), created.webhookId, new Date())).toEqual([]);
    expect(await activeSecretsOf(env.db, boxOf(env), kept.webhookId, new Date())).toHaveLength(1);
  });

  it('rotates a secret: the old one verifies during the overlap only', async () => {
    const ws = await env.workspace();
    const created = await createWebhook(ws);
    const box = boxOf(env);
    const now = new Date();
    const overlap = 60 * 60 * 1000;
    const next = await rotateSecret(env.db, box, created.webhookId, overlap, now);
    expect(next).toMatch(SECRET_FORMAT);
    expect(next).not.toBe(created.secret);

    const during = await activeSecretsOf(env.db, box, created.webhookId, new Date(now.getTime() + overlap - 1));
    expect(during.map((s) => s.secret)).toEqual([next, created.secret]);
    expect(during[1].expiresAt).toBe(new Date(now.getTime() + overlap).toISOString());
    const after = await activeSecretsOf(env.db, box, created.webhookId, new Date(now.getTime() + overlap));
    expect(after.map((s) => s.secret)).toEqual([next]);

    // A second rotation during the overlap: the secret it replaces gets the new overlap, the one
    // retired before it stops at once (rotating again is how a leaked secret is ended).
    const second = new Date(now.getTime() + 1000);
    const third = await rotateSecret(env.db, box, created.webhookId, 2 * overlap, second);
    expect((await activeSecretsOf(env.db, box, created.webhookId, second)).map((s) => s.secret)).toEqual([third, next]);
    const later = await activeSecretsOf(env.db, box, created.webhookId, new Date(now.getTime() + overlap + 1000));
    expect(later.map((s) => s.secret)).toEqual([third, next]);
    // The URL and the endpoint stay as they were.
    expect((await ws.call('GET', `/v1/webhooks/${created.webhookId}`)).json().url).toBe(created.url);
  });

  it('rotates with no overlap, keeps a bearer endpoint hash-only, refuses deleted endpoints', async () => {
    const ws = await env.workspace();
    const box = boxOf(env);
    const bearer = await createWebhook(ws, { name: 'Bearer', auth: 'bearer' });
    const now = new Date();
    const next = await rotateSecret(env.db, box, bearer.webhookId, 0, now);
    const active = await activeSecretsOf(env.db, box, bearer.webhookId, now);
    expect(active).toEqual([{ id: expect.any(String), secretHash: sha256(next), secret: null, expiresAt: null }]);

    await ws.call('DELETE', `/v1/webhooks/${bearer.webhookId}`);
    await expect(rotateSecret(env.db, box, bearer.webhookId, 0, now)).rejects.toMatchObject({ code: 'not_found' });
    await expect(rotateSecret(env.db, box, randomUuid(), 0, now)).rejects.toMatchObject({ code: 'not_found' });
    const live = await createWebhook(ws);
    await expect(rotateSecret(env.db, box, live.webhookId, -1, now)).rejects.toMatchObject({ code: 'invalid_request' });
  });

  it('refuses bad bodies and writes nothing', async () => {
    const ws = await env.workspace();
    for (const [body, message] of [
      [{}, 'body.name is required'],
      [{ name: '' }, 'body.name'],
      [{ name: 'x'.repeat(201) }, 'body.name'],
      [{ name: 'W', auth: 'basic' }, 'body.auth'],
      [{ name: 'W', active: 'yes' }, 'body.active'],
      [{ name: 'W', secret: 'whsec_mine' }, '"secret"'],
    ] as const) {
      const res = await ws.call('POST', '/v1/webhooks', { body });
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json()).toMatchObject({ code: 'invalid_request', requestId: expect.any(String) });
      expect(res.json().error).toContain(message);
    }
    expect((await ws.call('GET', '/v1/webhooks')).json()).toEqual([]);
    const unknownParameter = await ws.call('GET', '/v1/webhooks?sort=name');
    expect(unknownParameter.statusCode).toBe(400);
    expect(unknownParameter.json().error).toContain('"sort"');
    for (const query of ['limit=0', 'limit=101', 'limit=ten']) {
      expect((await ws.call('GET', `/v1/webhooks?${query}`)).json()).toMatchObject({ code: 'invalid_request' });
    }
    expect((await ws.call('GET', '/v1/webhooks?cursor=garbage')).json()).toMatchObject({ code: 'invalid_cursor' });
  });

  it('lists every endpoint as a bare array, or pages with limit and a Link to the next page', async () => {
    const ws = await env.workspace();
    const made: string[] = [];
    for (let i = 0; i < 5; i++) made.push((await createWebhook(ws, { name: `Feed ${i}` })).webhookId);
    const newestFirst = [...made].reverse();
    const all = await ws.call('GET', '/v1/webhooks');
    expect(all.json().map((view: { webhookId: string }) => view.webhookId)).toEqual(newestFirst);
    expect(all.headers.link).toBeUndefined();

    const seen: string[] = [];
    let url: string | null = '/v1/webhooks?limit=2';
    while (url) {
      const page = await ws.call('GET', url);
      expect(page.statusCode, page.body).toBe(200);
      expect(page.json().length).toBeLessThanOrEqual(2);
      seen.push(...page.json().map((view: { webhookId: string }) => view.webhookId));
      const link = page.headers.link as string | undefined;
      const next = link ? /^<([^>]+)>; rel="next"$/.exec(link) : null;
      if (next) expect(next[1]).toMatch(/^http:\/\/[^/]+\/v1\/webhooks\?limit=2&cursor=/);
      url = next ? new URL(next[1]).pathname + new URL(next[1]).search : null;
      // A page is inserted before while the walk goes on: nothing shifts.
      if (seen.length === 2) await createWebhook(ws, { name: 'Late' });
    }
    expect(seen).toEqual(newestFirst);
  });

  it('keeps workspaces apart and needs the webhook scopes', async () => {
    const ws = await env.workspace();
    const other = await env.workspace();
    const created = await createWebhook(ws);
    expect((await other.call('GET', `/v1/webhooks/${created.webhookId}`)).statusCode).toBe(404);
    expect((await other.call('GET', '/v1/webhooks')).json()).toEqual([]);

    const reader = await ws.keyWith(['webhooks:read']);
    const writer = await ws.keyWith(['webhooks:write']);
    expect((await ws.call('GET', '/v1/webhooks', { key: reader.key })).statusCode).toBe(200);
    const refused = await ws.call('POST', '/v1/webhooks', { key: reader.key, body: { name: 'W' } });
    expect(refused.statusCode).toBe(403);
    expect(refused.json().error).toContain('webhooks:write');
    expect((await ws.call('GET', '/v1/webhooks', { key: writer.key })).json().code).toBe('insufficient_scope');
    expect((await ws.call('POST', '/v1/webhooks', { key: writer.key, body: { name: 'W' } })).statusCode).toBe(201);
  });
});

describeEachStore('secrets stored before a key was set', (env) => {
  it('are sealed under the key once, opening to the same secrets; rows sealed already are left alone', async () => {
    const ws = await env.workspace();
    const plainBox = createSecretBox(undefined);
    const first = await createWebhook(ws);
    const second = await createWebhook(ws, { name: 'Lab feed' });
    await setSecret(env.db, plainBox, ws.workspaceId, 'LAB_TOKEN', 'partner-token', new Date().toISOString());
    expect((await secretRows(env, first.webhookId))[0].sealed_secret).toBe(`plain:${first.secret}`);

    const keyed = createSecretBox(HEX_KEY);
    const other = await env.workspace();
    await setSecret(env.db, keyed, other.workspaceId, 'SEALED', 'sealed-before', new Date().toISOString());
    const sealedBefore = await env.db.selectFrom('workspace_secrets').select('sealed_value').where('workspace_id', '=', other.workspaceId).executeTakeFirstOrThrow();

    const readable = await countPlainSecrets(env.db);
    expect(readable.webhookSecrets).toBeGreaterThanOrEqual(2);
    expect(readable.partnerSecrets).toBeGreaterThanOrEqual(1);
    const counts = await sealPlainSecrets(env.db, keyed);
    expect(counts).toEqual(readable);
    expect(await countPlainSecrets(env.db)).toEqual({ webhookSecrets: 0, partnerSecrets: 0 });
    expect(counts.webhookSecrets).toBeGreaterThanOrEqual(2);
    expect(counts.partnerSecrets).toBeGreaterThanOrEqual(1);
    for (const created of [first, second]) {
      const [row] = await secretRows(env, created.webhookId);
      expect(row.sealed_secret).toMatch(/^v1:/);
      expect(row.sealed_secret).not.toContain(created.secret);
      expect((await activeSecretsOf(env.db, keyed, created.webhookId, new Date())).map((s) => s.secret)).toEqual([created.secret]);
    }
    expect(await readSecrets(env.db, keyed, ws.workspaceId, ['LAB_TOKEN'])).toEqual(new Map([['LAB_TOKEN', 'partner-token']]));
    const unsealed = await env.db.selectFrom('webhook_secrets').select('id').where('sealed_secret', 'like', 'plain:%').execute();
    expect(unsealed).toEqual([]);
    // A row sealed before is not rewritten, and a second pass finds nothing to do.
    expect((await env.db.selectFrom('workspace_secrets').select('sealed_value').where('workspace_id', '=', other.workspaceId).executeTakeFirstOrThrow()).sealed_value).toBe(sealedBefore.sealed_value);
    expect(await sealPlainSecrets(env.db, keyed)).toEqual({ webhookSecrets: 0, partnerSecrets: 0 });
    // The key the store now needs is checked like any other.
    await expect(checkSecretKeyOpensStore(env.db, undefined)).rejects.toThrow(ConfigError);
    await expect(checkSecretKeyOpensStore(env.db, HEX_KEY)).resolves.toBeUndefined();
  });

  it('refuses a box without a key', async () => {
    await expect(sealPlainSecrets(env.db, createSecretBox(undefined))).rejects.toThrow(/needs a box with a key/);
  });
});

describeEachStore(
  'webhook secrets sealed with a configured key',
  (env) => {
    it('seals signing secrets as v1 AES-256-GCM and opens them for verification', async () => {
      const ws = await env.workspace();
      const created = await createWebhook(ws);
      const [row] = await secretRows(env, created.webhookId);
      expect(row.sealed_secret).toMatch(/^v1:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/);
      expect(row.sealed_secret).not.toContain(created.secret);
      expect(row.secret_hash).toBe(sha256(created.secret));
      const active = await activeSecretsOf(env.db, createSecretBox(HEX_KEY), created.webhookId, new Date());
      expect(active.map((s) => s.secret)).toEqual([created.secret]);
      const wrongKey = createSecretBox(randomBytes(32).toString('hex'));
      await expect(activeSecretsOf(env.db, wrongKey, created.webhookId, new Date())).rejects.toThrow(/does not open/);
    });

    it('tells a process whose key cannot open them before it starts (the check every process makes)', async () => {
      const ws = await env.workspace();
      await createWebhook(ws);
      await expect(checkSecretKeyOpensStore(env.db, HEX_KEY)).resolves.toBeUndefined();
      await expect(checkSecretKeyOpensStore(env.db, undefined)).rejects.toThrow(ConfigError);
      await expect(checkSecretKeyOpensStore(env.db, undefined)).rejects.toThrow(/CAREPATH_SECRET_KEY is not set, but this store holds secrets sealed with a key/);
      await expect(checkSecretKeyOpensStore(env.db, randomBytes(32).toString('hex'))).rejects.toThrow(/does not open the secrets sealed in this store/);
    });
  },
  { env: { CAREPATH_SECRET_KEY: HEX_KEY } },
);

describe('secret box', () => {
  it('round-trips with a hex or base64 key, with a fresh IV each time', () => {
    const key = randomBytes(32);
    for (const material of [key.toString('hex'), key.toString('base64'), key.toString('base64url')]) {
      const box = createSecretBox(material);
      expect(box.encrypts).toBe(true);
      const a = box.seal('whsec_example');
      const b = box.seal('whsec_example');
      expect(a).not.toBe(b);
      expect(a.split(':')).toHaveLength(4);
      expect(box.open(a)).toBe('whsec_example');
      expect(createSecretBox(key.toString('hex')).open(b)).toBe('whsec_example');
    }
  });

  it('detects tampering and a wrong key', () => {
    const box = createSecretBox(randomBytes(32).toString('hex'));
    const sealed = box.seal('whsec_example');
    const [version, iv, tag, ciphertext] = sealed.split(':');
    const flipped = Buffer.from(ciphertext, 'base64');
    flipped[0] ^= 1;
    expect(() => box.open([version, iv, tag, flipped.toString('base64')].join(':'))).toThrow(/does not open/);
    expect(() => createSecretBox(randomBytes(32).toString('hex')).open(sealed)).toThrow(/does not open/);
    expect(() => box.open('v2:a:b:c')).toThrow(/v1 format/);
    expect(() => box.open('v1:AAAA:AAAA:AAAA')).toThrow(/damaged/);
  });

  it('stores plain: without a key, still opens plain: values once a key is set, and refuses sealed ones without it', () => {
    const plainBox = createSecretBox(undefined);
    expect(plainBox.encrypts).toBe(false);
    expect(plainBox.seal('whsec_x')).toBe('plain:whsec_x');
    expect(plainBox.open('plain:whsec_x')).toBe('whsec_x');
    const keyed = createSecretBox(randomBytes(32).toString('hex'));
    expect(keyed.open('plain:whsec_x')).toBe('whsec_x');
    expect(() => plainBox.open(keyed.seal('whsec_x'))).toThrow(/CAREPATH_SECRET_KEY/);
  });

  it('accepts only 32-byte keys', () => {
    expect(decodeSecretKey('ab'.repeat(32))).toHaveLength(32);
    expect(decodeSecretKey('ab'.repeat(31))).toBeNull();
    expect(decodeSecretKey(randomBytes(16).toString('base64'))).toBeNull();
    expect(decodeSecretKey('not a key at all, not even close to one....')).toBeNull();
    expect(() => createSecretBox('short')).toThrow(/32 bytes/);
  });

  it('is read from CAREPATH_SECRET_KEY, and an invalid one stops the configuration', () => {
    expect(loadConfig({}).secretKey).toBeUndefined();
    expect(loadConfig({ CAREPATH_SECRET_KEY: HEX_KEY }).secretKey).toBe(HEX_KEY);
    expect(() => loadConfig({ CAREPATH_SECRET_KEY: 'too-short' })).toThrow(ConfigError);
  });

  it('must be set in production: secrets are never stored unsealed there', () => {
    expect(() => loadConfig({ CAREPATH_ENVIRONMENT: 'production' })).toThrow(/CAREPATH_SECRET_KEY must be set when CAREPATH_ENVIRONMENT=production/);
    expect(loadConfig({ CAREPATH_ENVIRONMENT: 'production', CAREPATH_SECRET_KEY: HEX_KEY }).environment).toBe('production');
    expect(loadConfig({ CAREPATH_ENVIRONMENT: 'staging' }).secretKey).toBeUndefined();
  });
});

function randomUuid(): string {
  return '0190a8c2-7f8e-7b3a-9c1d-' + randomBytes(6).toString('hex');
}
