/**
 * What the engine's integration suites share: a worker driven by hand (runOnce/drain) with short
 * leases and fast retries, blueprints imported the way `carepath admin blueprint import` does
 * (validated first), web triggers, fires, patients, and reads of a run and its steps.
 */
import { expect } from 'vitest';
import { engineServices, type OutboundSettings } from '../../src/engine/engine-services.js';
import { RunWorker, type WorkerOptions } from '../../src/engine/worker.js';
import { validateBlueprint } from '../../src/modules/blueprints/blueprint.validate.js';
import { insertRecords } from '../../src/modules/records/record.repository.js';
import type { TestEnv, TestWorkspace } from './test-env.js';
import type { StepView } from '../../src/engine/run-views.js';

export const FAST_RETRIES = { attempts: 3, baseMs: 5, maxMs: 20 };

export function testWorker(env: TestEnv, options: WorkerOptions = {}, outbound: Partial<OutboundSettings> = {}): RunWorker {
  return new RunWorker(engineServices(env.container, { backoff: FAST_RETRIES, timeoutMs: 2_000, ...outbound }), {
    leaseMs: 5_000,
    ...options,
  });
}

/** Imports a blueprint (validated, as the admin import does) and makes a web trigger for it. */
export async function webTriggerFor(ws: TestWorkspace, blueprint: unknown, extra: Record<string, unknown> = {}) {
  const valid = validateBlueprint(blueprint);
  const imported = await ws.importBlueprint(valid as unknown as Record<string, unknown>);
  const res = await ws.call('POST', '/v1/triggers', { body: { name: `${valid.name} trigger`, sourceId: imported.id, type: 'web', ...extra } });
  expect(res.statusCode).toBe(201);
  return { blueprintId: imported.id, triggerId: res.json().triggerId as string };
}

export async function fire(ws: TestWorkspace, triggerId: string, payload?: unknown, autoStart?: boolean): Promise<string> {
  const res = await ws.call('POST', `/v1/triggers/${triggerId}`, {
    body: { ...(payload === undefined ? {} : { payload }), ...(autoStart === undefined ? {} : { autoStart }) },
  });
  expect(res.statusCode).toBe(201);
  return res.json().runId;
}

export async function getRun(ws: TestWorkspace, runId: string) {
  const res = await ws.call('GET', `/v1/runs/${runId}`);
  expect(res.statusCode).toBe(200);
  return res.json() as { automationStatus: string; error: { message: string; nodeId: string } | null; updatedAt: string };
}

/** A step as `GET /v1/runs/{runId}/steps` answers it. */
export type StepJson = StepView;

/** Every step of a run, in order: the timeline is paged, so this walks every page (500 a page). */
export async function getSteps(ws: TestWorkspace, runId: string): Promise<StepJson[]> {
  const steps: StepJson[] = [];
  let cursor: string | null = null;
  do {
    const res = await ws.call('GET', `/v1/runs/${runId}/steps?limit=500${cursor ? `&cursor=${cursor}` : ''}`);
    expect(res.statusCode, res.body).toBe(200);
    steps.push(...(res.json().steps as StepJson[]));
    cursor = res.json().nextCursor;
  } while (cursor);
  return steps;
}

export async function getGraph(ws: TestWorkspace, id: string) {
  const res = await ws.call('GET', `/v1/diagrams/${id}/graph`);
  expect(res.statusCode).toBe(200);
  return res.json() as { nodes: { id: string; state?: string; startedAt?: string | null; finishedAt?: string | null }[] };
}

/** A Patient search record with these tags; answers its record id. */
export async function patient(env: TestEnv, ws: TestWorkspace, extId: string, tags: string[] = []): Promise<string> {
  const [id] = await insertRecords(env.db, ws.workspaceId, [{ resourceType: 'Patient', extId, name: `Patient ${extId}`, tags }], new Date().toISOString());
  return id;
}

export async function recordTags(env: TestEnv, recordId: string): Promise<string[]> {
  const rows = await env.db.selectFrom('record_tags').select('tag').where('record_id', '=', recordId).orderBy('tag').execute();
  return rows.map((row) => row.tag);
}

/** A pathway start → the given nodes in a chain → end. */
export function chain(name: string, nodes: { id: string; kind?: string; automations?: unknown[] }[]) {
  const all = [{ id: 'start', kind: 'start' }, ...nodes.map((node) => ({ kind: 'action', ...node })), { id: 'done', kind: 'end' }];
  return {
    name,
    nodes: all,
    links: all.slice(1).map((node, i) => ({ from: all[i].id, to: node.id })),
  };
}
