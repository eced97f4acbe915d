/**
 * Workspace secrets in http headers: `${secrets.NAME}` in a blueprint, the value set with
 * `carepath admin secret set`, sealed at rest, filled in as the call is made, kept out of the
 * graph, the steps and the audit trail, and never usable from another workspace.
 */
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { chain, fire, getRun, getSteps, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { LedgerServer } from '../helpers/ledger-server.js';
import { createAllowList } from '../../src/engine/outbound/allow-list.js';
import { secretDelete, secretList, secretSet } from '../../src/cli/admin/secret.js';

const ledger = new LedgerServer();
beforeAll(() => ledger.listen());
afterAll(() => ledger.close());

const TOKEN = 'lab-partner-token-7f3a9c';
/** A key for sealing: the production setting, so the stored value must not be readable. */
const SECRET_KEY = 'a'.repeat(64);

const withSecret = (path: string) =>
  chain('Secret call', [
    {
      id: 'call',
      automations: [
        {
          id: 'post',
          type: 'http',
          with: { method: 'POST', url: ledger.url(path), headers: { authorization: 'Bearer ${secrets.LAB_TOKEN}', 'x-ward': '{{ payload.ward }}' }, body: { n: 1 } },
        },
      ],
    },
  ]);

describeEachStore(
  'engine: workspace secrets in http headers',
  (env) => {
    const worker = () => testWorker(env, {}, { allow: createAllowList(['127.0.0.1']) });

    it('sends the value, keeps it sealed, and shows only the name in the graph, the steps and the audit trail', async () => {
      const ws = await env.workspace();
      expect(await secretSet(env.container, { workspaceId: ws.workspaceId, name: 'LAB_TOKEN', value: TOKEN })).toEqual({ workspaceId: ws.workspaceId, name: 'LAB_TOKEN', created: true });
      // A partner that echoes what it was sent.
      ledger.on('/with-secret', { status: 200, body: { youSent: `Bearer ${TOKEN}`, ok: true } });
      const { blueprintId, triggerId } = await webTriggerFor(ws, withSecret('/with-secret'));
      const runId = await fire(ws, triggerId, { ward: 'B2' });
      const seen = ledger.requests.length;
      await worker().drain();

      expect((await getRun(ws, runId)).automationStatus).toBe('completed');
      const sent = ledger.requests.slice(seen);
      expect(sent).toHaveLength(1);
      expect(sent[0].headers.authorization).toBe(`Bearer ${TOKEN}`);
      expect(sent[0].headers['x-ward']).toBe('B2');
      expect((await getSteps(ws, runId))[0].output).toEqual({ status: 200, body: { youSent: 'Bearer [secret]', ok: true } });

      const stored = await env.db.selectFrom('workspace_secrets').selectAll().where('workspace_id', '=', ws.workspaceId).executeTakeFirstOrThrow();
      expect(stored.sealed_value).toMatch(/^v1:/);
      expect(stored.sealed_value).not.toContain(TOKEN);
      for (const url of [`/v1/diagrams/${blueprintId}/graph`, `/v1/diagrams/${runId}/graph`, `/v1/runs/${runId}/steps`, '/v1/audit-events?limit=100']) {
        const res = await ws.call('GET', url);
        expect(res.statusCode, url).toBe(200);
        expect(res.body, url).not.toContain(TOKEN);
      }
      const graph = (await ws.call('GET', `/v1/diagrams/${blueprintId}/graph`)).json();
      expect(graph.nodes[1].automations[0].with.headers.authorization).toBe('Bearer ${secrets.LAB_TOKEN}');
      const audit = (await ws.call('GET', '/v1/audit-events?action=secret.set')).json().data;
      expect(audit).toEqual([expect.objectContaining({ keyName: 'carepath admin', resourceType: 'secret', resourceId: 'LAB_TOKEN', details: { name: 'LAB_TOKEN', created: true } })]);
      expect(await secretList(env.container, { workspaceId: ws.workspaceId })).toEqual([{ name: 'LAB_TOKEN', createdAt: expect.any(String), updatedAt: expect.any(String) }]);
    });

    it('reads [secret] where a partner echoes it JSON-escaped, or where the answer was cut inside it', async () => {
      const ws = await env.workspace();
      const escaped = 'ab"cd\\ef/gh-123456';
      await secretSet(env.container, { workspaceId: ws.workspaceId, name: 'LAB_TOKEN', value: escaped });
      // The echo as a JSON text writes it: `ab\"cd\\ef/gh-123456`.
      ledger.on('/echo-json', { status: 200, body: { headers: { authorization: `Bearer ${escaped}` } } });
      const cap = 64 * 1024;
      ledger.on('/echo-cut', { status: 200, body: `${'x'.repeat(cap - 'Bearer '.length - 10)}Bearer ${escaped}` });
      // One after the other: the two imports are versions of one blueprint (same name).
      const echoedRun = await fire(ws, (await webTriggerFor(ws, withSecret('/echo-json'))).triggerId, { ward: 'B2' });
      await worker().drain();
      const cutRun = await fire(ws, (await webTriggerFor(ws, withSecret('/echo-cut'))).triggerId, { ward: 'B2' });
      await worker().drain();
      expect((await getSteps(ws, echoedRun))[0].output).toEqual({ status: 200, body: { headers: { authorization: 'Bearer [secret]' } } });
      const cutOutput = (await getSteps(ws, cutRun))[0].output as { body: string; truncated: boolean };
      expect(cutOutput.truncated).toBe(true);
      expect(cutOutput.body.slice(-30)).toBe('xxxxxxxxxxxxxxxBearer [secret]');
      for (const runId of [echoedRun, cutRun]) expect((await ws.call('GET', `/v1/runs/${runId}/steps`)).body).not.toMatch(/ab\\"cd|ab"cd/);
    });

    it("is never another workspace's: a run there errors, names the secret, and sends nothing", async () => {
      const owner = await env.workspace();
      const other = await env.workspace();
      await secretSet(env.container, { workspaceId: owner.workspaceId, name: 'LAB_TOKEN', value: TOKEN });
      const { triggerId } = await webTriggerFor(other, withSecret('/not-yours'));
      const runId = await fire(other, triggerId, { ward: 'C1' });
      const seen = ledger.requests.length;
      await worker().drain();
      expect(ledger.requests.length).toBe(seen);
      const run = await getRun(other, runId);
      expect(run.automationStatus).toBe('errored');
      expect(run.error).toEqual({ nodeId: 'call', message: 'http: secret LAB_TOKEN not set in this workspace (carepath admin secret set)' });
    });

    it('takes a replaced value at the next call, and fails calls once the secret is deleted', async () => {
      const ws = await env.workspace();
      await secretSet(env.container, { workspaceId: ws.workspaceId, name: 'LAB_TOKEN', value: 'first-value-0001' });
      expect((await secretSet(env.container, { workspaceId: ws.workspaceId, name: 'LAB_TOKEN', value: 'second-value-0002' })).created).toBe(false);
      ledger.on('/rotated', { status: 204 });
      const { triggerId } = await webTriggerFor(ws, withSecret('/rotated'));
      const first = await fire(ws, triggerId, { ward: 'A' });
      const seen = ledger.requests.length;
      await worker().drain();
      expect((await getRun(ws, first)).automationStatus).toBe('completed');
      expect(ledger.requests.slice(seen).map((r) => r.headers.authorization)).toEqual(['Bearer second-value-0002']);

      await secretDelete(env.container, { workspaceId: ws.workspaceId, name: 'LAB_TOKEN' });
      const second = await fire(ws, triggerId, { ward: 'A' });
      await worker().drain();
      expect((await getRun(ws, second)).error?.message).toMatch(/secret LAB_TOKEN not set/);
      await expect(secretDelete(env.container, { workspaceId: ws.workspaceId, name: 'LAB_TOKEN' })).rejects.toThrow('has no secret "LAB_TOKEN"');
      expect(await secretList(env.container, { workspaceId: ws.workspaceId })).toEqual([]);
    });

    it('tries again when the database does not answer while the secrets are read, like a network failure', async () => {
      const ws = await env.workspace();
      ledger.on('/store-blip', { status: 204 });
      const { triggerId } = await webTriggerFor(ws, withSecret('/store-blip'));
      const runId = await fire(ws, triggerId, { ward: 'D' });
      let reads = 0;
      const flaky = async (): Promise<Map<string, string>> => {
        if (reads++ === 0) throw new Error('Connection terminated unexpectedly');
        return new Map([['LAB_TOKEN', TOKEN]]);
      };
      const seen = ledger.requests.length;
      await testWorker(env, {}, { allow: createAllowList(['127.0.0.1']), secrets: flaky }).drain();
      expect((await getRun(ws, runId)).automationStatus).toBe('completed');
      expect(reads).toBe(2);
      expect(ledger.requests.slice(seen).map((r) => r.headers.authorization)).toEqual([`Bearer ${TOKEN}`]);
    });

    it('refuses a value an HTTP header cannot carry, and an empty one', async () => {
      const ws = await env.workspace();
      await expect(secretSet(env.container, { workspaceId: ws.workspaceId, name: 'LAB_TOKEN', value: 'abc\r\nX-Injected: 1' })).rejects.toThrow('may not hold line breaks');
      await expect(secretSet(env.container, { workspaceId: ws.workspaceId, name: 'LAB_TOKEN', value: '' })).rejects.toThrow('no secret value');
      expect(await secretList(env.container, { workspaceId: ws.workspaceId })).toEqual([]);
    });
  },
  { env: { CAREPATH_SECRET_KEY: SECRET_KEY } },
);
