import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { chain, fire, patient, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { validateBlueprint } from '../../src/modules/blueprints/blueprint.validate.js';

const blueprint = {
  name: 'Seen',
  tags: ['demo'],
  swimlanes: [{ id: 'team', name: 'Team' }],
  ...(() => {
    const { nodes, links } = chain('Seen', [
      { id: 'a', automations: [{ id: 's', type: 'set', with: { vars: { x: '1' } } }] },
      { id: 'b', automations: [{ id: 'nap', type: 'wait', with: { duration: 'P1D' } }] },
    ]);
    return { nodes: nodes.map((n) => (n.id === 'a' ? { ...n, name: 'First', swimlaneId: 'team' } : n)), links: [...links.slice(0, 2), { ...links[2], when: 'true' }] };
  })(),
};

describeEachStore('engine: steps and graph endpoints', (env) => {
  it('GET /v1/diagrams/{id}/graph of a blueprint answers the import file format (importable as is)', async () => {
    const ws = await env.workspace();
    const { blueprintId } = await webTriggerFor(ws, blueprint);
    const res = await ws.call('GET', `/v1/diagrams/${blueprintId}/graph`);
    expect(res.statusCode).toBe(200);
    const graph = res.json();
    expect(graph).toEqual(validateBlueprint(blueprint));
    expect(validateBlueprint(graph)).toEqual(graph);
  });

  it('an instance graph shows node states and times; the timeline lists steps in order', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, blueprint);
    const runId = await fire(ws, triggerId);
    const pending = (await ws.call('GET', `/v1/diagrams/${runId}/graph`)).json();
    expect(pending.nodes.map((n: { state: string }) => n.state)).toEqual(['pending', 'pending', 'pending', 'pending']);
    expect(pending.nodes[1]).toMatchObject({ id: 'a', name: 'First', swimlaneId: 'team', startedAt: null, finishedAt: null });
    await testWorker(env).drain();
    const graph = (await ws.call('GET', `/v1/diagrams/${runId}/graph`)).json();
    expect(graph.nodes.map((n: { id: string; state: string }) => [n.id, n.state])).toEqual([
      ['start', 'done'],
      ['a', 'done'],
      ['b', 'waiting'],
      ['done', 'pending'],
    ]);
    const b = graph.nodes[2];
    expect(b.startedAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    expect(b.finishedAt).toBeNull();
    // When it goes on: the wait's automation and due time (P1D after its step started).
    expect(b.wait).toEqual({ automationId: 'nap', dueAt: expect.any(String) });
    expect(graph.nodes[1].wait).toBeUndefined();
    const timeline = (await ws.call('GET', `/v1/runs/${runId}/steps`)).json();
    expect(timeline.runId).toBe(runId);
    expect(timeline.nextCursor).toBeNull();
    expect(timeline.steps.map((s: { automationId: string; outcome: string | null }) => [s.automationId, s.outcome])).toEqual([['s', 'ok'], ['nap', null]]);
    const nap = timeline.steps[1];
    expect(Date.parse(b.wait.dueAt) - Date.parse(nap.startedAt)).toBe(24 * 3600_000);
  });

  it('the timeline says which record the run is about: the patient a fire named, none without one', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, blueprint);
    const recordId = await patient(env, ws, 'subj-1');
    const withSubject = await fire(ws, triggerId, { subject: { reference: 'Patient/subj-1' } });
    const without = await fire(ws, triggerId, { n: 1 });
    expect((await ws.call('GET', `/v1/runs/${withSubject}/steps`)).json().subject).toEqual({
      recordId,
      resourceType: 'Patient',
      extId: 'subj-1',
      name: expect.any(String),
    });
    expect((await ws.call('GET', `/v1/runs/${without}/steps`)).json().subject).toBeNull();
  });

  it('a run that ended mid-wait shows the waiting node interrupted, finished when the run ended', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, blueprint);
    const runId = await fire(ws, triggerId);
    await testWorker(env).drain();
    const canceled = await ws.call('POST', `/v1/runs/${runId}/cancel`);
    expect(canceled.statusCode, canceled.body).toBe(200);
    const graph = (await ws.call('GET', `/v1/diagrams/${runId}/graph`)).json();
    expect(graph.nodes.map((n: { id: string; state: string }) => [n.id, n.state])).toEqual([
      ['start', 'done'],
      ['a', 'done'],
      ['b', 'interrupted'],
      ['done', 'pending'],
    ]);
    expect(graph.nodes[2].finishedAt).toBe(canceled.json().updatedAt);
    expect(graph.nodes[2].wait).toBeUndefined();
    const [, nap] = (await ws.call('GET', `/v1/runs/${runId}/steps`)).json().steps;
    expect(nap).toMatchObject({ automationId: 'nap', outcome: 'canceled' });
  });

  it('unknown ids, other workspaces\' ids and non-UUIDs answer 404; scopes are enforced', async () => {
    const ws = await env.workspace();
    const other = await env.workspace();
    const { blueprintId, triggerId } = await webTriggerFor(ws, blueprint);
    const runId = await fire(ws, triggerId);
    for (const url of [
      `/v1/runs/${runId}/steps`,
      `/v1/diagrams/${runId}/graph`,
      `/v1/diagrams/${blueprintId}/graph`,
      '/v1/runs/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/steps',
      '/v1/diagrams/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b/graph',
    ]) {
      const res = await other.call('GET', url);
      expect(res.statusCode, url).toBe(404);
      expect(res.json().code).toBe('not_found');
    }
    expect((await ws.call('GET', '/v1/runs/not-a-uuid/steps')).statusCode).toBe(404);
    const diagramsOnly = await ws.keyWith(['diagrams:read']);
    const runsOnly = await ws.keyWith(['runs:read']);
    expect((await ws.call('GET', `/v1/runs/${runId}/steps`, { key: diagramsOnly.key })).statusCode).toBe(403);
    expect((await ws.call('GET', `/v1/diagrams/${runId}/graph`, { key: runsOnly.key })).statusCode).toBe(403);
    expect((await ws.call('GET', `/v1/runs/${runId}/steps`, { key: runsOnly.key })).statusCode).toBe(200);
    expect((await ws.call('GET', `/v1/diagrams/${runId}/graph`, { key: diagramsOnly.key })).statusCode).toBe(200);
  });

  it('audits each read of a timeline (run, patient record, key, request id); refused reads record nothing', async () => {
    const ws = await env.workspace();
    const other = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, blueprint);
    const patientId = await patient(env, ws, 'audited-patient');
    const runId = await fire(ws, triggerId, { subject: { reference: 'Patient/audited-patient' } });
    await testWorker(env).drain();
    const reader = await ws.keyWith(['runs:read']);
    const res = await ws.call('GET', `/v1/runs/${runId}/steps`, { key: reader.key, headers: { 'x-request-id': 'steps-read-1' } });
    expect(res.statusCode).toBe(200);
    // Another workspace's key and a key without the scope are refused: no event for either.
    expect((await other.call('GET', `/v1/runs/${runId}/steps`)).statusCode).toBe(404);
    expect((await ws.call('GET', `/v1/runs/${runId}/steps`, { key: (await ws.keyWith(['diagrams:read'])).key })).statusCode).toBe(403);
    const events = (await ws.call('GET', '/v1/audit-events?action=run.steps.read')).json().data;
    expect(events).toEqual([
      expect.objectContaining({
        action: 'run.steps.read',
        requestId: 'steps-read-1',
        keyId: reader.keyId,
        resourceType: 'run',
        resourceId: runId,
        details: { subjectRecordId: patientId, steps: 2, cursor: false },
      }),
    ]);
    expect((await other.call('GET', '/v1/audit-events?action=run.steps.read')).json().data).toEqual([]);
  });

  it("audits each read of an instance's graph, whose node states tell which way the run went; a blueprint's graph is not", async () => {
    const ws = await env.workspace();
    const other = await env.workspace();
    const { triggerId, blueprintId } = await webTriggerFor(ws, blueprint);
    const patientId = await patient(env, ws, 'graph-patient');
    const runId = await fire(ws, triggerId, { subject: { reference: 'Patient/graph-patient' } });
    await testWorker(env).drain();
    const reader = await ws.keyWith(['diagrams:read']);
    expect((await ws.call('GET', `/v1/diagrams/${runId}/graph`, { key: reader.key, headers: { 'x-request-id': 'graph-read-1' } })).statusCode).toBe(200);
    expect((await ws.call('GET', `/v1/diagrams/${blueprintId}/graph`, { key: reader.key })).statusCode).toBe(200);
    expect((await other.call('GET', `/v1/diagrams/${runId}/graph`)).statusCode).toBe(404);
    expect((await ws.call('GET', `/v1/diagrams/${runId}/graph`, { key: (await ws.keyWith(['runs:read'])).key })).statusCode).toBe(403);
    const events = (await ws.call('GET', '/v1/audit-events?action=run.graph.read')).json().data;
    expect(events).toEqual([
      expect.objectContaining({
        action: 'run.graph.read',
        requestId: 'graph-read-1',
        keyId: reader.keyId,
        resourceType: 'run',
        resourceId: runId,
        details: { subjectRecordId: patientId },
      }),
    ]);
    expect((await other.call('GET', '/v1/audit-events?action=run.graph.read')).json().data).toEqual([]);
  });

  it("audits each errored run answered, whose message may hold data; runs without an error stay unaudited", async () => {
    const ws = await env.workspace();
    const failing = await webTriggerFor(ws, chain('Escalate', [{ id: 'escalate', kind: 'action', automations: [{ id: 'stop-here', type: 'fail', with: { message: 'HbA1c {{payload.value}} for {{subject.extId}}' } }] }]));
    const fine = await webTriggerFor(ws, blueprint);
    const patientId = await patient(env, ws, 'mrn-778812');
    const erroredRun = await fire(ws, failing.triggerId, { value: 11.2, subject: { reference: 'Patient/mrn-778812' } });
    const waitingRun = await fire(ws, fine.triggerId, { subject: { reference: 'Patient/mrn-778812' } });
    await testWorker(env).drain();
    const reader = await ws.keyWith(['runs:read']);

    const single = await ws.call('GET', `/v1/runs/${erroredRun}`, { key: reader.key, headers: { 'x-request-id': 'error-read-1' } });
    expect(single.json().error).toEqual({ nodeId: 'escalate', message: 'HbA1c 11.2 for mrn-778812' });
    expect((await ws.call('GET', `/v1/runs/${waitingRun}`, { key: reader.key })).json().error).toBeNull();
    const listed = await ws.call('GET', '/v1/runs?limit=10', { key: reader.key, headers: { 'x-request-id': 'error-list-1' } });
    expect(listed.json().data).toHaveLength(2);
    expect((await ws.call('GET', `/v1/runs?status=running`, { key: reader.key })).json().data).toHaveLength(1);

    const events = (await ws.call('GET', '/v1/audit-events?action=run.error.read')).json().data;
    const shown = { action: 'run.error.read', keyId: reader.keyId, resourceType: 'run', resourceId: erroredRun, details: { subjectRecordId: patientId } };
    expect(events).toEqual([
      expect.objectContaining({ ...shown, requestId: 'error-list-1' }),
      expect.objectContaining({ ...shown, requestId: 'error-read-1' }),
    ]);
  });
});
