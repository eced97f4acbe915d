/**
 * Listing audit events since a time: exact at its edge, whatever offset the time is written
 * with, and read as a range of the id index (ids are UUID v7 of their time or later).
 */
import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { recordAudit } from '../../src/modules/audit/audit.repository.js';
import { systemContext } from '../../src/auth/context.js';
import { lowestUuidv7At, uuidv7 } from '../../src/lib/ids.js';

describeEachStore('audit events since a time', (env) => {
  it('lists exactly the events at or after since, newest first, in any offset', async () => {
    const ws = await env.workspace();
    const ctx = systemContext(ws.tenantId, ws.workspaceId, 'since-test');
    const times = ['2030-01-01T00:00:00.000Z', '2030-01-01T00:00:00.001Z', '2030-01-01T01:00:00.000Z', '2030-01-02T00:00:00.000Z'];
    for (const [n, at] of times.entries()) await recordAudit(env.db, ctx, at, [{ action: 'query.create', resourceType: 'query', resourceId: `q-${n}` }]);
    const since = async (value: string) =>
      (await ws.call('GET', `/v1/audit-events?action=query.create&since=${encodeURIComponent(value)}&limit=100`)).json().data.map((event: { resourceId: string }) => event.resourceId);
    const plain = async (value: string) =>
      (await ws.call('GET', `/v1/audit-events?since=${encodeURIComponent(value)}&limit=100`)).json().data.map((event: { resourceId: string }) => event.resourceId);
    expect(await since('2030-01-01T00:00:00.000Z')).toEqual(['q-3', 'q-2', 'q-1', 'q-0']);
    expect(await since('2030-01-01T00:00:00.001Z')).toEqual(['q-3', 'q-2', 'q-1']);
    expect(await plain('2030-01-01T01:00:00+01:00')).toEqual(['q-3', 'q-2', 'q-1', 'q-0']);
    expect(await plain('2030-01-01T02:00:00+01:00')).toEqual(['q-3', 'q-2']);
    expect(await plain('2030-01-02T00:00:00.001Z')).toEqual([]);
  });

  it('says how to write since and recordId when they are refused: an offset\'s + unescaped in the URL, an extId for a record id', async () => {
    const ws = await env.workspace();
    // `+01:00` as typed in a shell: the query string reads the + as a space.
    const offset = await ws.call('GET', '/v1/audit-events?since=2030-01-01T01:00:00+01:00');
    expect(offset.statusCode).toBe(400);
    expect(offset.json().code).toBe('invalid_request');
    expect(offset.json().error).toMatch(/^querystring\.since must be an RFC 3339 time .*%2B/);
    const extId = await ws.call('GET', '/v1/audit-events?recordId=demo-patient');
    expect(extId.statusCode).toBe(400);
    expect(extId.json().error).toMatch(/^querystring\.recordId must be a UUID/);
    expect((await ws.call('GET', '/v1/audit-events?since=2030-01-01T01:00:00%2B01:00')).statusCode).toBe(200);
  });

  it('bounds ids by time: the lowest id of a millisecond, its 48-bit time first', () => {
    expect(lowestUuidv7At(Date.parse('2030-01-01T00:00:00.000Z'))).toBe('01b8dac5-b400-0000-0000-000000000000');
    expect(lowestUuidv7At(-5)).toBe('00000000-0000-0000-0000-000000000000');
    const id = uuidv7(Date.parse('2030-01-01T00:00:00.000Z'));
    expect(id >= lowestUuidv7At(Date.parse('2030-01-01T00:00:00.000Z'))).toBe(true);
  });
});
