import { expect, it } from 'vitest';
import { ERROR_STATUS } from '../../src/lib/errors.js';
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

type Schema = { $ref?: string; type?: string; title?: string; additionalProperties?: boolean; required?: string[]; properties?: Record<string, unknown> };
type Operation = {
  operationId?: string;
  parameters?: { name?: string; in?: string; $ref?: string }[];
  requestBody?: { content: Record<string, { schema: Schema }> };
  responses: Record<string, { description?: string; content?: Record<string, { schema: Schema }>; headers?: Record<string, unknown> }>;
};
type Document = {
  paths: Record<string, Record<string, Operation>>;
  components: { headers: Record<string, unknown>; parameters: Record<string, { name: string }>; schemas: Record<string, Schema> };
};

/** A schema, or the named one it refers to. */
function deref(doc: Document, schema: Schema): Schema {
  const name = schema.$ref?.replace('#/components/schemas/', '');
  return name === undefined ? schema : doc.components.schemas[name];
}

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

  it('says how each operation authenticates: an API key, or for a delivery the endpoint secret', async () => {
    const doc = (await env.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as Document & {
      security: unknown[];
      components: { securitySchemes: Record<string, { type: string; in?: string; name?: string; scheme?: string }> };
      paths: Record<string, Record<string, Operation & { security?: unknown[] }>>;
    };
    expect(doc.security).toEqual([{ apiKey: [] }]);
    expect(doc.components.securitySchemes.webhookSignature).toMatchObject({ type: 'apiKey', in: 'header', name: 'X-Service-Signature' });
    expect(doc.components.securitySchemes.webhookBearer).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(doc.paths['/v1/webhooks/{webhookId}'].post.security).toEqual([{ webhookSignature: [] }, { webhookBearer: [] }]);
    expect(doc.paths['/v1/webhooks/{webhookId}'].get.security).toBeUndefined();
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
    const doc = (await env.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as Document;
    const create = doc.paths['/v1/queries'].post;
    const body = deref(doc, create.requestBody!.content['application/json'].schema);
    expect(body.additionalProperties).toBe(false);
    expect(body.required).toEqual(expect.arrayContaining(['name', 'resourceType']));
    // Every error answer is the one error body.
    expect(create.responses['400'].content!['application/json'].schema).toEqual({ $ref: '#/components/schemas/Error' });
    expect(deref(doc, create.responses['400'].content!['application/json'].schema).required).toEqual(['error', 'code', 'requestId']);

    const ws = await env.workspace();
    const unknownField = await ws.call('POST', '/v1/queries', { body: { name: 'q', resourceType: 'Patient', colour: 'red' } });
    expect(unknownField.statusCode).toBe(400);
    const missingField = await ws.call('POST', '/v1/queries', { body: { name: 'q' } });
    expect(missingField.statusCode).toBe(400);
    const accepted = await ws.call('POST', '/v1/queries', { body: { name: 'q', resourceType: 'Patient' } });
    expect(accepted.statusCode).toBe(201);
    // And the answer has the documented shape.
    const answer = deref(doc, create.responses['201'].content!['application/json'].schema);
    expect(Object.keys(accepted.json()).sort()).toEqual(Object.keys(answer.properties!).sort());
  });

  it('documents the headers every answer carries, and the ones the answers really send', async () => {
    const doc = (await env.app.inject({ method: 'GET', url: '/v1/openapi.json' })).json() as Document;
    expect(doc.components.parameters.RequestId.name).toBe('X-Request-Id');
    for (const [path, methods] of Object.entries(doc.paths)) {
      for (const [method, operation] of Object.entries(methods)) {
        const where = `${method.toUpperCase()} ${path}`;
        expect(operation.parameters, where).toContainEqual({ $ref: '#/components/parameters/RequestId' });
        for (const [status, response] of Object.entries(operation.responses)) {
          expect(Object.keys(response.headers ?? {}), `${where} ${status}`).toContain('X-Request-Id');
          if (status === '429') expect(Object.keys(response.headers ?? {}), where).toContain('Retry-After');
        }
        if (operation.requestBody) expect(Object.keys(operation.responses), where).toEqual(expect.arrayContaining(['413', '415']));
        expect(Object.keys(operation.responses), where).toEqual(expect.arrayContaining(['408', '500']));
        // Every answer says what it is, and an error answer the codes its status may carry.
        for (const [status, response] of Object.entries(operation.responses)) {
          expect(response.description, `${where} ${status}`).not.toBe('Default Response');
          const codes = Object.entries(ERROR_STATUS).filter(([, code]) => String(code) === status).map(([name]) => name);
          for (const code of codes) expect(response.description, `${where} ${status}`).toContain(code);
        }
        expect(JSON.stringify(operation), where).not.toContain('x-body-optional');
      }
    }
    expect(doc.paths['/v1/runs/{runId}/cancel'].post.responses['409'].description).toBe(
      'An error. Its `code` is one of idempotency_mismatch, trigger_not_web, trigger_inactive, run_not_queued, run_not_paused, run_terminal, query_in_use.',
    );
    // A type-specific field of a trigger says that another type refuses it, null as well.
    const createTrigger = deref(doc, doc.paths['/v1/triggers'].post.requestBody!.content['application/json'].schema) as { properties: Record<string, { description?: string }> };
    expect(createTrigger.properties.queryId.description).toMatch(/^Search triggers only: sent for a trigger of another type, also as null, it is refused with 400/);
    expect(createTrigger.properties.when.description).toMatch(/^Event triggers only/);
    // The shapes a client works with are named once and referred to; every reference resolves.
    expect(Object.keys(doc.components.schemas)).toEqual(
      expect.arrayContaining(['Error', 'Run', 'CreatedRun', 'Trigger', 'CreateTrigger', 'Query', 'Webhook', 'CreatedWebhook', 'Delivery', 'Diagram', 'Graph', 'Step', 'SearchResult', 'AuditEvent', 'KeyContext']),
    );
    const refs = [...JSON.stringify(doc).matchAll(/"\$ref":"#\/components\/schemas\/([^"]+)"/g)].map((match) => match[1]);
    expect(refs.length).toBeGreaterThan(300);
    for (const name of new Set(refs)) expect(doc.components.schemas[name], name).toBeDefined();
    expect(JSON.stringify(doc.paths)).not.toContain('"title"');
    expect(deref(doc, doc.paths['/v1/runs/{runId}'].get.responses['200'].content!['application/json'].schema).required).toEqual(expect.arrayContaining(['runId', 'automationStatus']));
    // One spelling of the Idempotency-Key header across the operations that take it.
    for (const [path, method] of [['/v1/triggers/{triggerId}', 'post'], ['/v1/triggers/{triggerId}/evaluate', 'post'], ['/v1/webhooks/{webhookId}', 'post']]) {
      const names = doc.paths[path][method].parameters!.filter((parameter) => parameter.in === 'header').map((parameter) => parameter.name);
      expect(names, path).toContain('Idempotency-Key');
      expect(names, path).not.toContain('idempotency-key');
    }
    // One $id names one schema: the error body inlined in 28 answers with its $id made JSON Schema tools refuse the document.
    expect(JSON.stringify(doc.paths)).not.toContain('"$id"');
    // The bodies that may be left out say so; the others are required.
    const required = (path: string, method: string) => (doc.paths[path][method].requestBody as { required?: boolean }).required;
    for (const [path, method] of [['/v1/triggers/{triggerId}', 'post'], ['/v1/runs/{runId}/cancel', 'post'], ['/v1/triggers/{triggerId}/evaluate', 'post']]) {
      expect(required(path, method), path).toBe(false);
    }
    expect(required('/v1/triggers', 'post')).toBe(true);
    expect(Object.keys(doc.paths['/v1/webhooks'].get.responses['200'].headers!)).toContain('Link');
    const fire = doc.paths['/v1/triggers/{triggerId}'].post;
    expect(Object.keys(fire.responses['200'].headers!)).toEqual(expect.arrayContaining(['RateLimit-Limit', 'RateLimit-Remaining', 'RateLimit-Reset', 'Idempotent-Replayed']));
    expect(deref(doc, fire.responses['201'].content!['application/json'].schema).properties!.automationStatus).toMatchObject({ enum: expect.arrayContaining(['scheduled', 'queued']) });
    const deliver = doc.paths['/v1/webhooks/{webhookId}'].post;
    expect(deliver.parameters!.map((parameter) => parameter.name)).toEqual(expect.arrayContaining(['X-Service-Signature', 'Idempotency-Key']));
    expect(Object.keys(deliver.requestBody!.content)).toEqual(['application/json', 'application/fhir+json']);

    // What the document says, a real answer sends.
    const ws = await env.workspace();
    const blueprint = await ws.importBlueprint({ name: 'Documented', nodes: [{ id: 'start', kind: 'start' }, { id: 'done', kind: 'end' }], links: [{ from: 'start', to: 'done' }] });
    const trigger = (await ws.call('POST', '/v1/triggers', { body: { name: 'T', sourceId: blueprint.id, type: 'web' } })).json();
    const fired = await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: {}, headers: { 'idempotency-key': 'documented-1', 'x-request-id': 'mine-1' } });
    const replayed = await ws.call('POST', `/v1/triggers/${trigger.triggerId}`, { body: {}, headers: { 'idempotency-key': 'documented-1' } });
    expect(fired.headers['x-request-id']).toBe('mine-1');
    for (const header of ['ratelimit-limit', 'ratelimit-remaining', 'ratelimit-reset']) expect(fired.headers[header], header).toMatch(/^\d+$/);
    expect(replayed.statusCode).toBe(200);
    expect(replayed.headers['idempotent-replayed']).toBe('true');
    const tooBig = await ws.call('POST', '/v1/queries', { payload: JSON.stringify({ name: 'x'.repeat(2 * 1024 * 1024) }), headers: { 'content-type': 'application/json' } });
    expect(tooBig.statusCode).toBe(413);
    const notJson = await ws.call('POST', '/v1/queries', { payload: 'name=x', headers: { 'content-type': 'application/x-www-form-urlencoded' } });
    expect(notJson.statusCode).toBe(415);
  });

  it('serves the browsable documentation at /docs without a key', async () => {
    const res = await env.app.inject({ method: 'GET', url: '/docs' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
  });
});
