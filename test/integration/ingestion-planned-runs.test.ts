import { expect, it } from 'vitest';
import type { KyselyPlugin, QueryId } from 'kysely';
import { describeEachStore, simpleBlueprint } from '../helpers/test-env.js';
import { ManualClock } from '../../src/lib/clock.js';
import { plannedRun } from '../../src/modules/events/run-plan.js';
import { insertPlannedRuns, subjectKey, subjectsWithLiveRuns, type PlannedRunRow } from '../../src/modules/events/planned-runs.repository.js';
import { insertRecords } from '../../src/modules/records/record.repository.js';
import { createPlannedRuns, sweepPlannedRuns, type RunStarterDeps } from '../../src/modules/events/planned-runs.js';
import { processorFor } from '../helpers/deliveries.js';
import { capturedLogger } from '../helpers/log-capture.js';

const clock = new ManualClock('2025-01-01T00:00:00.000Z');

describeEachStore(
  'planned runs',
  (env) => {
    const deps = (): RunStarterDeps => ({ db: env.db, dialect: env.container.store.dialect, runCreator: env.container.runCreator, now: () => clock.now() });

    async function plan(count: number, owner: string, leaseExpiresAt: string): Promise<{ rows: PlannedRunRow[]; workspaceId: string; ws: Awaited<ReturnType<typeof env.workspace>> }> {
      const ws = await env.workspace();
      const blueprint = await ws.importBlueprint(simpleBlueprint('Planned'));
      const trigger = (await ws.call('POST', '/v1/triggers', { body: { name: 'E', sourceId: blueprint.id, type: 'event', event: 'Task.ready' } })).json();
      const context = {
        tenantId: ws.tenantId,
        workspaceId: ws.workspaceId,
        requestId: 'req-planned',
        keyId: null,
        keyName: 'carepath',
        owner,
        leaseExpiresAt,
        at: clock.now().toISOString(),
      };
      const row = { id: trigger.triggerId, source_id: blueprint.id, auto_start: 1, one_per_subject: 0, blueprint_name: blueprint.name, blueprint_version: blueprint.version };
      const rows = Array.from({ length: count }, (_, i) =>
        plannedRun(row, context, { subjectRecordId: null, payloadJson: JSON.stringify({ n: i }), idempotencyKey: 'planned-key', origin: { via: 'test' } }),
      );
      await insertPlannedRuns(env.db, rows);
      return { rows, workspaceId: ws.workspaceId, ws };
    }

    const runsIn = async (workspaceId: string) => env.db.selectFrom('runs').select('id').where('workspace_id', '=', workspaceId).execute();
    const plannedIn = async (workspaceId: string) => env.db.selectFrom('planned_runs').select('id').where('workspace_id', '=', workspaceId).execute();

    it('creates the runs of its own planned rows once, with the ids fixed when they were planned', async () => {
      clock.set('2025-01-01T00:00:00.000Z');
      const { rows, workspaceId } = await plan(5, 'me', '2025-01-01T00:01:00.000Z');
      expect(await createPlannedRuns(deps(), 'me', rows.map((r) => r.id))).toBe(5);
      expect((await runsIn(workspaceId)).map((r) => r.id).sort()).toEqual(rows.map((r) => r.id).sort());
      expect(await plannedIn(workspaceId)).toHaveLength(0);
      // Asked again (a retry), nothing more happens.
      expect(await createPlannedRuns(deps(), 'me', rows.map((r) => r.id))).toBe(0);
      expect(await runsIn(workspaceId)).toHaveLength(5);
    });

    it('drops the planned runs of a trigger deleted or switched off since they were planned: no run is made after the change, and the log says so', async () => {
      clock.set('2025-01-15T00:00:00.000Z');
      for (const change of ['DELETE', 'PATCH'] as const) {
        const { rows, workspaceId, ws } = await plan(3, 'me', '2025-01-15T00:01:00.000Z');
        const url = `/v1/triggers/${rows[0].trigger_id}`;
        const answer = change === 'DELETE' ? await ws.call('DELETE', url) : await ws.call('PATCH', url, { body: { active: false } });
        expect(answer.statusCode, change).toBeLessThan(300);
        const { logger, lines } = capturedLogger('info');
        expect(await createPlannedRuns({ ...deps(), logger }, 'me', rows.map((r) => r.id))).toBe(0);
        expect(await runsIn(workspaceId)).toHaveLength(0);
        expect(await plannedIn(workspaceId)).toHaveLength(0);
        expect(lines.map((line) => [line.msg, line.triggerId, line.workspaceId, line.runs])).toEqual([
          ['planned runs dropped: their trigger was deleted or switched off after they were planned', rows[0].trigger_id, workspaceId, 3],
        ]);
      }
      // Rows of a dead process are dropped by the sweep the same way.
      const { rows, workspaceId, ws } = await plan(2, 'dead-process', '2025-01-15T00:01:00.000Z');
      await ws.call('DELETE', `/v1/triggers/${rows[0].trigger_id}`);
      clock.set('2025-01-15T00:02:00.000Z');
      expect(await sweepPlannedRuns(deps(), 'sweeper')).toBe(0);
      expect(await runsIn(workspaceId)).toHaveLength(0);
      expect(await plannedIn(workspaceId)).toHaveLength(0);
    });

    it('a subject whose planned run becomes a run meanwhile is live to onePerSubject (one snapshot of both tables)', async () => {
      clock.set('2025-01-20T00:00:00.000Z');
      const { rows, ws } = await plan(1, 'me', '2025-01-20T00:01:00.000Z');
      const [subject] = await insertRecords(env.db, ws.workspaceId, [{ resourceType: 'Patient', extId: 'live-1', name: 'Live 1', tags: [] }], clock.now().toISOString());
      await env.db.updateTable('planned_runs').set({ subject_record_id: subject }).where('id', '=', rows[0].id).execute();
      // Right after the check's first statement that reads `runs`, the planned run becomes a run
      // (its run committed, then its planned row deleted: createHeld's order). Read in two
      // statements, the check saw neither and a second live run was started for the patient.
      if (env.container.store.dialect === 'sqlite') {
        // One connection, held by a statement until its result is read: nothing can land inside
        // one statement, so one statement for both tables is the whole guarantee. Counted here.
        let statements = 0;
        const counting: KyselyPlugin = { transformQuery: (args) => args.node, transformResult: async (args) => (statements++, args.result) };
        const live = await subjectsWithLiveRuns(env.db.withPlugin(counting), [rows[0].trigger_id], [subject]);
        expect(statements).toBe(1);
        expect([...live]).toEqual([subjectKey(rows[0].trigger_id, subject)]);
        expect(await createPlannedRuns(deps(), 'me', [rows[0].id])).toBe(1);
        return;
      }
      let converted = false;
      const convertAfterRunsRead: KyselyPlugin = {
        transformQuery: (args) => {
          const from = (args.node as { from?: { froms?: { table?: { identifier?: { name?: string } } }[] } }).from?.froms?.[0]?.table?.identifier?.name;
          if (from === 'runs') runsReads.add(args.queryId);
          return args.node;
        },
        transformResult: async (args) => {
          if (runsReads.has(args.queryId) && !converted) {
            converted = true;
            expect(await createPlannedRuns(deps(), 'me', [rows[0].id])).toBe(1);
          }
          return args.result;
        },
      };
      const runsReads = new Set<QueryId>();
      const live = await subjectsWithLiveRuns(env.db.withPlugin(convertAfterRunsRead), [rows[0].trigger_id], [subject]);
      expect(converted).toBe(true);
      expect(await env.db.selectFrom('planned_runs').select('id').where('id', '=', rows[0].id).execute()).toHaveLength(0);
      expect([...live]).toEqual([subjectKey(rows[0].trigger_id, subject)]);
    });

    it("leaves another holder's rows alone until their lease runs out, then takes them over", async () => {
      clock.set('2025-02-01T00:00:00.000Z');
      const { rows, workspaceId } = await plan(4, 'dead-process', '2025-02-01T00:01:00.000Z');
      expect(await createPlannedRuns(deps(), 'someone-else', rows.map((r) => r.id))).toBe(0);
      expect(await sweepPlannedRuns(deps(), 'sweeper')).toBe(0);
      expect(await runsIn(workspaceId)).toHaveLength(0);

      // The holder died after creating two of them, before it could clean up.
      for (const row of rows.slice(0, 2)) {
        await env.container.runCreator.create({
          ctx: { tenantId: row.tenant_id, workspaceId, keyId: '', keyName: 'carepath', scopes: [], environment: 'staging', requestId: row.request_id },
          runId: row.id,
          triggerId: row.trigger_id,
          blueprint: { id: row.source_id, name: row.blueprint_name, version: row.source_version },
          status: row.status,
          payloadJson: row.payload,
          subjectRecordId: null,
          idempotencyKey: row.idempotency_key,
          claim: null,
          origin: {},
          at: row.planned_at,
        });
      }
      clock.set('2025-02-01T00:01:00.001Z');
      const sweeps = await Promise.all([sweepPlannedRuns(deps(), 'sweeper-a'), sweepPlannedRuns(deps(), 'sweeper-b')]);
      expect(sweeps[0] + sweeps[1]).toBe(2);
      expect((await runsIn(workspaceId)).map((r) => r.id).sort()).toEqual(rows.map((r) => r.id).sort());
      expect(await plannedIn(workspaceId)).toHaveLength(0);
    });

    it('hands over the wakes a dead processor left on a processed delivery, once its lease ran out', async () => {
      clock.set('2025-03-01T00:00:00.000Z');
      const ws = await env.workspace();
      const wakes = [{ subjectRecordId: 'no-such-record', event: 'Encounter.finished', eventPayload: { event: 'Encounter.finished', resource: {}, deliveryId: 'd' } }];
      const row = {
        id: '01950000-0000-7000-8000-00000000d001',
        tenant_id: ws.tenantId,
        workspace_id: ws.workspaceId,
        webhook_id: '01950000-0000-7000-8000-00000000e001',
        request_id: 'req',
        idempotency_key: null,
        body_sha256: 'x',
        body: null,
        accepted: 1,
        status: 'processed' as const,
        attempts: 1,
        lease_owner: 'dead-process',
        lease_expires_at: '2025-03-01T00:01:00.000Z',
        received_at: '2025-03-01T00:00:00.000Z',
        processed_at: '2025-03-01T00:00:00.000Z',
        problems: '[]',
        problem_count: 0,
        events: '[]',
        runs_started: 0,
        error: null,
        pending_wakes: JSON.stringify(wakes),
      };
      await env.db.insertInto('deliveries').values(row).execute();
      const processor = processorFor(env);
      await processor.sweep();
      expect(await env.db.selectFrom('deliveries').select('pending_wakes').where('id', '=', row.id).executeTakeFirstOrThrow()).toEqual({
        pending_wakes: row.pending_wakes,
      });
      clock.set('2025-03-01T00:01:00.001Z');
      await processor.sweep();
      expect(await env.db.selectFrom('deliveries').select(['pending_wakes', 'lease_owner']).where('id', '=', row.id).executeTakeFirstOrThrow()).toEqual({
        pending_wakes: null,
        lease_owner: null,
      });
    });
  },
  { clock },
);
