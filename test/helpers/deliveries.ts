/**
 * Helpers for the inbound-data suites: endpoints, signed deliveries, a processor and a scheduler
 * on the test container, triggers, and the FHIR fixtures (HL7 R4 examples, Synthea when present).
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { signPayload } from '../../src/ingestion/signature.js';
import { createFhirValidator, type FhirValidator } from '../../src/ingestion/fhir-validate.js';
import { DeliveryProcessor, type DeliveryProcessorOptions } from '../../src/modules/deliveries/delivery-processor.js';
import { Scheduler } from '../../src/modules/scheduling/scheduler.js';
import { workerBasics, type Container } from '../../src/container.js';
import type { Logger } from '../../src/lib/logger.js';
import { simpleBlueprint, type TestEnv, type TestWorkspace } from './test-env.js';
import { validateBlueprint } from '../../src/modules/blueprints/blueprint.validate.js';
import { SYNTHEA_FIXTURES } from './shared-files.js';

export const EXAMPLES = join(process.cwd(), 'node_modules/hl7.fhir.r4.examples');
export const SYNTHEA = SYNTHEA_FIXTURES;
export const hasSynthea = existsSync(SYNTHEA);

export type Resource = { resourceType: string; id?: string; [element: string]: unknown };

export const example = (file: string): Resource => JSON.parse(readFileSync(join(EXAMPLES, file), 'utf8')) as Resource;

/** Synthea NDJSON lines of one resource type. */
export function syntheaResources(type: string): Resource[] {
  const file = readdirSync(SYNTHEA).find((name) => name.startsWith(`${type}.`) && name.endsWith('.ndjson'));
  if (!file) return [];
  return readFileSync(join(SYNTHEA, file), 'utf8')
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line) => JSON.parse(line) as Resource);
}

export const bundle = (resources: Resource[], type = 'collection'): Resource => ({
  resourceType: 'Bundle',
  type,
  entry: resources.map((resource) => ({ fullUrl: `urn:uuid:${resource.id}`, resource })),
});

export interface Endpoint {
  webhookId: string;
  secret: string;
}

export async function createEndpoint(ws: TestWorkspace, body: Record<string, unknown> = {}): Promise<Endpoint> {
  const res = await ws.call('POST', '/v1/webhooks', { body: { name: 'EHR feed', ...body } });
  expect(res.statusCode, res.body).toBe(201);
  return { webhookId: res.json().webhookId, secret: res.json().secret };
}

export interface DeliverOptions {
  key?: string;
  /** signature time (Unix seconds); default: the container clock */
  t?: number;
  /** replace the signature header (null: send none) */
  signature?: string | null;
  headers?: Record<string, string>;
  /** send these bytes instead of JSON.stringify(body) */
  raw?: string | Buffer;
}

export function nowSeconds(container: Container): number {
  return Math.floor(container.clock.now().getTime() / 1000);
}

/** POSTs a signed delivery through the app, the way a sending system does. */
export function deliver(env: TestEnv, endpoint: Endpoint, body: unknown, options: DeliverOptions = {}): Promise<LightMyRequestResponse> {
  const raw = options.raw ?? JSON.stringify(body);
  const headers: Record<string, string> = { 'content-type': 'application/json', ...options.headers };
  const signature = options.signature === undefined ? signPayload(endpoint.secret, raw, options.t ?? nowSeconds(env.container)) : options.signature;
  if (signature !== null) headers['x-service-signature'] = signature;
  if (options.key !== undefined) headers['idempotency-key'] = options.key;
  return env.app.inject({ method: 'POST', url: `/v1/webhooks/${endpoint.webhookId}`, headers, payload: raw });
}

/** One compiled FHIR validator per test file: its first compile takes seconds. */
let sharedValidator: FhirValidator | undefined;
export function validator(): FhirValidator {
  sharedValidator ??= createFhirValidator();
  return sharedValidator;
}

/** A processor on the test container (its logger, unless one is given to read its lines back). */
export function processorFor(env: TestEnv, options: DeliveryProcessorOptions = {}, logger?: Logger): DeliveryProcessor {
  const c = env.container;
  return new DeliveryProcessor({ ...workerBasics(c), reader: c.deliveryReader, ...(logger ? { logger } : {}) }, options);
}

export function schedulerFor(container: Container): Scheduler {
  return new Scheduler({ ...workerBasics(container), now: () => container.clock.now() });
}

/** Delivers, expects the 202, and processes everything waiting. */
export async function deliverAndProcess(env: TestEnv, endpoint: Endpoint, body: unknown, options: DeliverOptions = {}) {
  const res = await deliver(env, endpoint, body, options);
  expect(res.statusCode, res.body).toBe(202);
  await processorFor(env).drain();
  return res.json() as { accepted: number; idempotencyKey: string | null };
}

export async function eventTrigger(ws: TestWorkspace, event: string, extra: Record<string, unknown> = {}) {
  const blueprint = await ws.importBlueprint(simpleBlueprint(`On ${event}`));
  const res = await ws.call('POST', '/v1/triggers', { body: { name: `On ${event}`, sourceId: blueprint.id, type: 'event', event, ...extra } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { triggerId: string; sourceId: string };
}

export async function savedQuery(ws: TestWorkspace, resourceType: string, filters: { op: string; tag: string }[] = []) {
  const res = await ws.call('POST', '/v1/queries', { body: { name: `${resourceType} cohort`, resourceType, filters } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { queryId: string };
}

export async function searchTrigger(ws: TestWorkspace, queryId: string, extra: Record<string, unknown> = {}) {
  const blueprint = await ws.importBlueprint(simpleBlueprint('Cohort pathway'));
  const res = await ws.call('POST', '/v1/triggers', { body: { name: 'Cohort', sourceId: blueprint.id, type: 'search', queryId, ...extra } });
  expect(res.statusCode, res.body).toBe(201);
  return res.json() as { triggerId: string; nextRunAt: string | null };
}

export async function lastDelivery(ws: TestWorkspace, endpoint: Endpoint) {
  const res = await ws.call('GET', `/v1/webhooks/${endpoint.webhookId}/deliveries?limit=1`);
  expect(res.statusCode, res.body).toBe(200);
  return res.json().data[0];
}

export async function runsOf(ws: TestWorkspace, query: string) {
  const all = [];
  let cursor: string | null = null;
  do {
    const res: LightMyRequestResponse = await ws.call('GET', `/v1/runs?limit=100&${query}${cursor ? `&cursor=${cursor}` : ''}`);
    expect(res.statusCode, res.body).toBe(200);
    all.push(...res.json().data);
    cursor = res.json().nextCursor;
  } while (cursor);
  return all;
}

export async function search(ws: TestWorkspace, resourceType: string, filters: { op: string; tag: string }[] = [], limit = 500) {
  const res = await ws.call('POST', '/v1/search', { body: { resourceType, filters, limit } });
  expect(res.statusCode, res.body).toBe(200);
  return res.json() as { total: number; results: { id: string; extId: string; name: string; tags: string[] }[] };
}

/** start → a `wait_for_event Encounter.finished` (30 days) → end: a pathway from admission to discharge. */
export const admissionToDischarge = () =>
  validateBlueprint({
    name: 'Admission to discharge',
    nodes: [
      { id: 'start', kind: 'start' },
      { id: 'wait', kind: 'action', automations: [{ id: 'discharge', type: 'wait_for_event', with: { event: 'Encounter.finished', timeout: 'P30D' } }] },
      { id: 'done', kind: 'end' },
    ],
    links: [
      { from: 'start', to: 'wait' },
      { from: 'wait', to: 'done' },
    ],
  }) as unknown as Record<string, unknown>;
