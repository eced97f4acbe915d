import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';

/** Every operation the interface spec names, and the ones the issues add, as the document spells them. */
const OPERATIONS = [
  'GET /v1/me',
  'POST /v1/triggers',
  'GET /v1/triggers',
  'GET /v1/triggers/{triggerId}',
  'PATCH /v1/triggers/{triggerId}',
  'DELETE /v1/triggers/{triggerId}',
  'POST /v1/triggers/{triggerId}',
  'GET /v1/triggers/{triggerId}/status',
  'POST /v1/triggers/{triggerId}/evaluate',
  'GET /v1/runs',
  'GET /v1/runs/{runId}',
  'POST /v1/runs/{runId}/start',
  'POST /v1/runs/{runId}/cancel',
  'POST /v1/runs/{runId}/pause',
  'POST /v1/runs/{runId}/resume',
  'GET /v1/runs/{runId}/steps',
  'POST /v1/queries',
  'GET /v1/queries',
  'GET /v1/queries/{queryId}',
  'PATCH /v1/queries/{queryId}',
  'DELETE /v1/queries/{queryId}',
  'POST /v1/search',
  'POST /v1/search/count',
  'GET /v1/diagrams',
  'GET /v1/diagrams/{id}',
  'GET /v1/diagrams/{id}/graph',
  'POST /v1/webhooks',
  'GET /v1/webhooks',
  'GET /v1/webhooks/{webhookId}',
  'PATCH /v1/webhooks/{webhookId}',
  'DELETE /v1/webhooks/{webhookId}',
  'POST /v1/webhooks/{webhookId}',
  'GET /v1/webhooks/{webhookId}/deliveries',
  'GET /v1/events/catalog',
  'GET /v1/audit-events',
];

type Schema = { type?: string; additionalProperties?: boolean; required?: string[]; properties?: Record<string, unknown> };
type Operation = { operationId?: string; requestBody?: { content: Record<string, { schema: Schema }> }; responses: Record<string, { content?: Record<string, { schema: Schema }> }> };

describeEachStore('GET /v1/openapi.json and /docs', (env) => {
  it('documents every operation, without a key, and none of the operational routes', async () => {
    const res = await env.app.inject({ method: 'GET', url: '/v1/openapi.json' });
    expect(res.statusCode).toBe(200);
    const doc = res.json() as { openapi: string; paths: Record<string, Record<string, Operation>> };
    expect(doc.openapi).toBe('3.1.0');
    const documented = Object.entries(doc.paths).flatMap(([path, methods]) => Object.keys(methods).map((method) => `${method.toUpperCase()} ${path}`));
    for (const operation of OPERATIONS) expect(documented).toContain(operation);
    for (const hidden of ['/healthz', '/readyz', '/metrics', '/v1/openapi.json']) expect(Object.keys(doc.paths)).not.toContain(hidden);
  });

  it('names every operation with an operationId of its own, for generated clients', async () => {
    const doc = (await env.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as { paths: Record<string, Record<string, Operation>> };
    const ids = Object.values(doc.paths).flatMap((methods) => Object.values(methods).map((operation) => operation.operationId));
    expect(ids.every((id) => typeof id === 'string' && /^[a-z][A-Za-z]+$/.test(id))).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    expect(doc.paths['/v1/triggers/{triggerId}'].post.operationId).toBe('fireTrigger');
    expect(doc.paths['/v1/runs/{runId}/pause'].post.operationId).toBe('pauseRun');
  });

  it('describes bodies with the schemas that validate them: what the document refuses, the API refuses', async () => {
    const doc = (await env.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as { paths: Record<string, Record<string, Operation>> };
    const create = doc.paths['/v1/queries'].post;
    const body = create.requestBody!.content['application/json'].schema;
    expect(body.additionalProperties).toBe(false);
    expect(body.required).toEqual(expect.arrayContaining(['name', 'resourceType']));
    // Every error answer is the one error body.
    expect(create.responses['400'].content!['application/json'].schema.required).toEqual(['error', 'code', 'requestId']);

    const ws = await env.workspace();
    const unknownField = await ws.call('POST', '/v1/queries', { body: { name: 'q', resourceType: 'Patient', colour: 'red' } });
    expect(unknownField.statusCode).toBe(400);
    const missingField = await ws.call('POST', '/v1/queries', { body: { name: 'q' } });
    expect(missingField.statusCode).toBe(400);
    const accepted = await ws.call('POST', '/v1/queries', { body: { name: 'q', resourceType: 'Patient' } });
    expect(accepted.statusCode).toBe(201);
    // And the answer has the documented shape.
    const answer = create.responses['201'].content!['application/json'].schema;
    expect(Object.keys(accepted.json()).sort()).toEqual(Object.keys(answer.properties!).sort());
  });

  it('serves the browsable documentation at /docs without a key', async () => {
    const res = await env.app.inject({ method: 'GET', url: '/docs' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
  });
});
