/**
 * Ids are UUIDs, and a UUID in upper case is the same UUID (RFC 9562 §4). Systems that keep ids
 * upper-cased (SQL Server's uniqueidentifier) send them that way: in paths, filters and bodies
 * they name the same resource, and ids are always answered in lower case.
 */
import { expect, it } from 'vitest';
import { describeEachStore, simpleBlueprint } from '../helpers/test-env.js';
import { createEndpoint, deliver } from '../helpers/deliveries.js';

const upper = (id: string) => id.toUpperCase();

describeEachStore('ids in upper case', (env) => {
  it('name the same resource in paths, list filters and bodies; answers keep lower case', async () => {
    const ws = await env.workspace();
    const blueprint = await ws.importBlueprint(simpleBlueprint('Cased'));
    const created = await ws.call('POST', '/v1/triggers', { body: { name: 'Cased', sourceId: upper(blueprint.id), type: 'web' } });
    expect(created.statusCode, created.body).toBe(201);
    const trigger = created.json();
    expect(trigger.sourceId).toBe(blueprint.id);

    const fired = await ws.call('POST', `/v1/triggers/${upper(trigger.triggerId)}`, { body: { autoStart: false } });
    expect(fired.statusCode, fired.body).toBe(201);
    const { runId } = fired.json();

    expect((await ws.call('GET', `/v1/triggers/${upper(trigger.triggerId)}`)).json().triggerId).toBe(trigger.triggerId);
    expect((await ws.call('GET', `/v1/runs/${upper(runId)}`)).json().runId).toBe(runId);
    expect((await ws.call('GET', `/v1/diagrams/${upper(blueprint.id)}`)).json().id).toBe(blueprint.id);
    expect((await ws.call('GET', `/v1/diagrams/${upper(runId)}/graph`)).statusCode).toBe(200);
    expect((await ws.call('POST', `/v1/runs/${upper(runId)}/cancel`)).json().automationStatus).toBe('canceled');

    const filtered = (await ws.call('GET', `/v1/runs?triggerId=${upper(trigger.triggerId)}`)).json();
    expect(filtered.data.map((run: { runId: string }) => run.runId)).toEqual([runId]);
    const instances = (await ws.call('GET', `/v1/diagrams?type=instance&sourceId=${upper(blueprint.id)}`)).json();
    expect(instances.data.map((diagram: { id: string }) => diagram.id)).toEqual([runId]);

    const patched = await ws.call('PATCH', `/v1/triggers/${upper(trigger.triggerId)}`, { body: { name: 'Renamed' } });
    expect(patched.json()).toMatchObject({ triggerId: trigger.triggerId, name: 'Renamed' });
  });

  it('still keeps other workspaces out, whatever the case', async () => {
    const ws = await env.workspace();
    const other = await env.workspace();
    const theirs = await other.importBlueprint(simpleBlueprint('Theirs'));
    expect((await ws.call('GET', `/v1/diagrams/${upper(theirs.id)}`)).statusCode).toBe(404);
    const refused = await ws.call('POST', '/v1/triggers', { body: { name: 'x', sourceId: upper(theirs.id), type: 'web' } });
    expect(refused.statusCode).toBe(400);
  });

  it('take a delivery at the endpoint URL with its id in upper case', async () => {
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    const res = await deliver(env, { ...endpoint, webhookId: upper(endpoint.webhookId) }, { resourceType: 'Patient', id: 'p-1' });
    expect(res.statusCode, res.body).toBe(202);
    const deliveries = (await ws.call('GET', `/v1/webhooks/${upper(endpoint.webhookId)}/deliveries`)).json();
    expect(deliveries.data).toHaveLength(1);
  });
});
