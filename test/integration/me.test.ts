import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { issueKey, listKeys, revokeKey } from '../../src/modules/tenancy/tenancy.repository.js';
import { touchKeys } from '../../src/auth/key.repository.js';
import { ManualClock } from '../../src/lib/clock.js';

describeEachStore('GET /v1/me', (env) => {
  it('returns the key context for a valid key', async () => {
    const ws = await env.workspace();
    const res = await ws.call('GET', '/v1/me', { headers: { 'x-request-id': 'req-123' } });
    expect(res.statusCode).toBe(200);
    expect(res.headers['x-request-id']).toBe('req-123');
    expect(res.json()).toEqual({
      tenantId: ws.tenantId,
      workspaceId: ws.workspaceId,
      keyId: ws.keyId,
      keyName: 'test key',
      scopes: [],
      environment: 'staging',
    });
    expect(res.headers['ratelimit-limit']).toBeDefined();
    // Health data is never kept by a cache on the way, nor read as another type.
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['x-content-type-options']).toBe('nosniff');
  });

  it('answers 401 with the error body for a missing, malformed or unknown key', async () => {
    const ws = await env.workspace();
    for (const headers of <Record<string, string>[]>[
      {},
      { authorization: 'Basic abc' },
      { authorization: 'Bearer nope' },
      { authorization: `Bearer cpk_staging_${'A'.repeat(43)}` },
    ]) {
      const res = await ws.call('GET', '/v1/me', { headers, key: null });
      expect(res.statusCode).toBe(401);
      const body = res.json();
      expect(body.code).toBe('invalid_api_key');
      expect(typeof body.error).toBe('string');
      expect(body.requestId).toBe(res.headers['x-request-id']);
      expect(res.headers['cache-control']).toBe('no-store');
    }
  });

  it('refuses a revoked key on the very next request', async () => {
    const ws = await env.workspace();
    const other = await ws.keyWith(['runs:read']);
    expect((await ws.call('GET', '/v1/me', { key: other.key })).statusCode).toBe(200);
    await ws.revoke(other.keyId);
    const res = await ws.call('GET', '/v1/me', { key: other.key });
    expect(res.statusCode).toBe(401);
    expect(res.json().code).toBe('invalid_api_key');
  });

  it('refuses a key issued for another environment, saying which (this deployment is staging)', async () => {
    const ws = await env.workspace();
    const workspace = { id: ws.workspaceId, tenant_id: ws.tenantId };
    const production = await issueKey(env.container.db, workspace, 'copied from production', [], 'production', new Date().toISOString());
    expect(production.key).toMatch(/^cpk_production_/);
    const res = await ws.call('GET', '/v1/me', { key: production.key });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({
      error: 'this is a production key and this deployment is staging: use a key issued with CAREPATH_ENVIRONMENT=staging',
      code: 'invalid_api_key',
      requestId: expect.any(String),
    });
    // A refused call is not a use of the key.
    expect((await listKeys(env.container.db, ws.workspaceId)).find((key) => key.keyId === production.keyId)?.lastUsedAt).toBeNull();
  });

  it('replaces an unacceptable X-Request-Id with a generated one', async () => {
    const ws = await env.workspace();
    const res = await ws.call('GET', '/v1/me', { headers: { 'x-request-id': 'x'.repeat(129) } });
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('records lastUsedAt for a key whose call succeeded, and only then', async () => {
    const ws = await env.workspace();
    const used = await ws.keyWith([]);
    const refused = await ws.keyWith(['runs:read']);
    const lastUsed = async () => new Map((await listKeys(env.db, ws.workspaceId)).map((key) => [key.keyId, key.lastUsedAt]));
    expect((await lastUsed()).get(used.keyId)).toBeNull();

    const before = new Date().toISOString();
    expect((await ws.call('GET', '/v1/me', { key: used.key })).statusCode).toBe(200);
    // No scope for triggers: a 403 is not a use.
    expect((await ws.call('GET', '/v1/triggers', { key: refused.key })).statusCode).toBe(403);
    // Written at most once a second per process; flushed here rather than waited for.
    await env.container.keyUsage.flush();

    const after = await lastUsed();
    expect(after.get(used.keyId)! >= before).toBe(true);
    expect(after.get(refused.keyId)).toBeNull();
  });
});

const clock = new ManualClock('2030-03-01T10:00:00.000Z');

describeEachStore('lastUsedAt', (env) => {
  it('is the time of the call, not of the write a second later: never after a revocation that came after the call', async () => {
    const ws = await env.workspace();
    const key = await ws.keyWith([]);
    const calledAt = clock.now().toISOString();
    expect((await ws.call('GET', '/v1/me', { key: key.key })).statusCode).toBe(200);
    clock.advance(300);
    const revokedAt = clock.now().toISOString();
    await revokeKey(env.db, key.keyId, revokedAt);
    clock.advance(600);
    await env.container.keyUsage.flush();
    const lastUsedAt = async () => (await listKeys(env.db, ws.workspaceId)).find((listed) => listed.keyId === key.keyId)?.lastUsedAt;
    expect(await lastUsedAt()).toBe(calledAt);
    // Another process's older use (or a clock behind) never moves it back.
    await touchKeys(env.db, new Map([[key.keyId, '2030-03-01T09:59:59.000Z']]));
    expect(await lastUsedAt()).toBe(calledAt);
  });
}, { clock });
