/**
 * Every management route against input it must refuse: wrong types, missing and unknown fields,
 * out-of-range limits, huge strings, broken JSON, other content types, oversized bodies,
 * prototype-pollution keys, ids that are not UUIDs, foreign ids, missing scopes and bad cursors.
 * Each refusal is `{error, code, requestId}` and leaves the workspace exactly as it was.
 */
import { randomBytes } from 'node:crypto';
import { expect, it } from 'vitest';
import type { LightMyRequestResponse } from 'fastify';
import { describeEachStore, simpleBlueprint, type TestWorkspace } from '../helpers/test-env.js';
import { SCOPES, type Scope } from '../../src/auth/scopes.js';
/** The documented body limit (1 MiB), written out: a test built from the code's own constant cannot see it change. */
const ONE_MIB = 1_048_576;

type Method = 'GET' | 'POST' | 'PATCH' | 'DELETE';

interface Fixture {
  blueprintId: string;
  triggerId: string;
  runId: string;
  queryId: string;
  webhookId: string;
}

interface RouteCase {
  method: Method;
  path: (f: Fixture) => string;
  scope: Scope;
  body?: (f: Fixture) => unknown;
  /** The path names one resource by id. */
  byId?: boolean;
}

const RUN_ACTIONS = ['start', 'pause', 'resume', 'cancel'] as const;

/** Every route that needs an API key with a scope. */
const ROUTES: RouteCase[] = [
  { method: 'POST', path: () => '/v1/triggers', scope: 'triggers:write', body: (f) => ({ name: 'T', sourceId: f.blueprintId, type: 'web' }) },
  { method: 'GET', path: () => '/v1/triggers', scope: 'triggers:read' },
  { method: 'GET', path: (f) => `/v1/triggers/${f.triggerId}`, scope: 'triggers:read', byId: true },
  { method: 'PATCH', path: (f) => `/v1/triggers/${f.triggerId}`, scope: 'triggers:write', body: () => ({ name: 'Renamed' }), byId: true },
  { method: 'DELETE', path: (f) => `/v1/triggers/${f.triggerId}`, scope: 'triggers:write', byId: true },
  { method: 'POST', path: (f) => `/v1/triggers/${f.triggerId}`, scope: 'runs:write', body: () => ({ payload: {} }), byId: true },
  { method: 'GET', path: (f) => `/v1/triggers/${f.triggerId}/status`, scope: 'runs:read', byId: true },
  { method: 'GET', path: () => '/v1/runs', scope: 'runs:read' },
  { method: 'GET', path: (f) => `/v1/runs/${f.runId}`, scope: 'runs:read', byId: true },
  ...RUN_ACTIONS.map((action): RouteCase => ({ method: 'POST', path: (f) => `/v1/runs/${f.runId}/${action}`, scope: 'runs:write', byId: true })),
  { method: 'POST', path: () => '/v1/queries', scope: 'queries:write', body: () => ({ name: 'Q', resourceType: 'Patient' }) },
  { method: 'GET', path: () => '/v1/queries', scope: 'queries:read' },
  { method: 'GET', path: (f) => `/v1/queries/${f.queryId}`, scope: 'queries:read', byId: true },
  { method: 'PATCH', path: (f) => `/v1/queries/${f.queryId}`, scope: 'queries:write', body: () => ({ name: 'Renamed' }), byId: true },
  { method: 'DELETE', path: (f) => `/v1/queries/${f.queryId}`, scope: 'queries:write', byId: true },
  { method: 'POST', path: () => '/v1/search', scope: 'search:read', body: () => ({ resourceType: 'Patient' }) },
  { method: 'POST', path: () => '/v1/search/count', scope: 'search:read', body: () => ({ resourceType: 'Patient' }) },
  { method: 'GET', path: () => '/v1/diagrams', scope: 'diagrams:read' },
  { method: 'GET', path: (f) => `/v1/diagrams/${f.blueprintId}`, scope: 'diagrams:read', byId: true },
  { method: 'GET', path: (f) => `/v1/diagrams/${f.runId}`, scope: 'diagrams:read', byId: true },
  { method: 'POST', path: () => '/v1/webhooks', scope: 'webhooks:write', body: () => ({ name: 'W' }) },
  { method: 'GET', path: () => '/v1/webhooks', scope: 'webhooks:read' },
  { method: 'GET', path: (f) => `/v1/webhooks/${f.webhookId}`, scope: 'webhooks:read', byId: true },
  { method: 'PATCH', path: (f) => `/v1/webhooks/${f.webhookId}`, scope: 'webhooks:write', body: () => ({ name: 'Renamed' }), byId: true },
  { method: 'DELETE', path: (f) => `/v1/webhooks/${f.webhookId}`, scope: 'webhooks:write', byId: true },
  { method: 'GET', path: () => '/v1/audit-events', scope: 'audit:read' },
];

interface BodyCase {
  label: string;
  method: Method;
  path: (f: Fixture) => string;
  valid: (f: Fixture) => Record<string, unknown>;
  /** A field set to a value of the wrong type, and the field the message must name. */
  wrongType: [Record<string, unknown>, string];
  /** A required field (create routes). */
  required?: string;
  /** A field set to 10,000 characters, and the field the message must name. */
  huge: [Record<string, unknown>, string];
  /** Fire treats an empty body as "no payload": it must not be in the empty-body cases. */
  emptyBodyIsValid?: boolean;
}

const HUGE = 'x'.repeat(10_000);

const BODY_ROUTES: BodyCase[] = [
  {
    label: 'create trigger',
    method: 'POST',
    path: () => '/v1/triggers',
    valid: (f) => ({ name: 'T', sourceId: f.blueprintId, type: 'web' }),
    wrongType: [{ autoStart: 'yes' }, 'body.autoStart'],
    required: 'sourceId',
    huge: [{ name: HUGE }, 'body.name'],
  },
  {
    label: 'update trigger',
    method: 'PATCH',
    path: (f) => `/v1/triggers/${f.triggerId}`,
    valid: () => ({ name: 'Renamed' }),
    wrongType: [{ active: 1 }, 'body.active'],
    huge: [{ name: HUGE }, 'body.name'],
  },
  {
    label: 'fire trigger',
    method: 'POST',
    path: (f) => `/v1/triggers/${f.triggerId}`,
    valid: () => ({ payload: { riskScore: 7 } }),
    wrongType: [{ autoStart: 'false' }, 'body.autoStart'],
    huge: [{ idempotencyKey: HUGE }, 'body.idempotencyKey'],
    emptyBodyIsValid: true,
  },
  {
    label: 'create query',
    method: 'POST',
    path: () => '/v1/queries',
    valid: () => ({ name: 'Q', resourceType: 'Patient', filters: [{ op: 'with', tag: 'copd' }] }),
    wrongType: [{ filters: { op: 'with', tag: 'copd' } }, 'body.filters'],
    required: 'resourceType',
    huge: [{ name: HUGE }, 'body.name'],
  },
  {
    label: 'update query',
    method: 'PATCH',
    path: (f) => `/v1/queries/${f.queryId}`,
    valid: () => ({ name: 'Renamed' }),
    wrongType: [{ filters: [{ op: 'with', tag: 7 }] }, 'body.filters.0.tag'],
    huge: [{ name: HUGE }, 'body.name'],
  },
  {
    label: 'search',
    method: 'POST',
    path: () => '/v1/search',
    valid: () => ({ resourceType: 'Patient' }),
    wrongType: [{ limit: '10' }, 'body.limit'],
    required: 'resourceType',
    huge: [{ filters: [{ op: 'with', tag: HUGE }] }, 'body.filters.0.tag'],
  },
  {
    label: 'count',
    method: 'POST',
    path: () => '/v1/search/count',
    valid: () => ({ resourceType: 'Pathway' }),
    wrongType: [{ filters: 'copd' }, 'body.filters'],
    required: 'resourceType',
    huge: [{ order: HUGE }, 'body.order'],
  },
  {
    label: 'create webhook',
    method: 'POST',
    path: () => '/v1/webhooks',
    valid: () => ({ name: 'W' }),
    wrongType: [{ active: 'true' }, 'body.active'],
    required: 'name',
    huge: [{ name: HUGE }, 'body.name'],
  },
  {
    label: 'update webhook',
    method: 'PATCH',
    path: (f) => `/v1/webhooks/${f.webhookId}`,
    valid: () => ({ active: false }),
    wrongType: [{ name: ['W'] }, 'body.name'],
    huge: [{ name: HUGE }, 'body.name'],
  },
];

const LIST_ROUTES: { path: string; badEnum?: [string, string]; nameSearch?: boolean }[] = [
  { path: '/v1/triggers', badEnum: ['type', 'cron'] },
  { path: '/v1/runs', badEnum: ['status', 'finished'] },
  { path: '/v1/queries', badEnum: ['resourceType', 'Encounter'], nameSearch: true },
  { path: '/v1/diagrams', badEnum: ['type', 'template'], nameSearch: true },
  { path: '/v1/audit-events' },
];

function expectError(res: LightMyRequestResponse, status: number, code: string, mentions?: string): void {
  expect(res.statusCode, `${status} expected, got ${res.statusCode}: ${res.body.slice(0, 300)}`).toBe(status);
  const body = res.json();
  expect(Object.keys(body).sort()).toEqual(['code', 'error', 'requestId']);
  expect(body.code).toBe(code);
  expect(body.error).toEqual(expect.any(String));
  expect(body.requestId).toBe(res.headers['x-request-id']);
  if (mentions) expect(body.error).toContain(mentions);
}

/** A workspace with one of everything: blueprint, web trigger, queued run (and its instance), query, webhook. */
async function fixture(ws: TestWorkspace): Promise<Fixture> {
  const blueprint = await ws.importBlueprint(simpleBlueprint('Fixture pathway'));
  const trigger = await ws.call('POST', '/v1/triggers', { body: { name: 'Fixture', sourceId: blueprint.id, type: 'web' } });
  const run = await ws.call('POST', `/v1/triggers/${trigger.json().triggerId}`, { body: { autoStart: false } });
  const query = await ws.call('POST', '/v1/queries', { body: { name: 'Fixture', resourceType: 'Patient' } });
  const webhook = await ws.call('POST', '/v1/webhooks', { body: { name: 'Fixture' } });
  for (const res of [trigger, run, query, webhook]) expect(res.statusCode).toBe(201);
  return {
    blueprintId: blueprint.id,
    triggerId: trigger.json().triggerId,
    runId: run.json().runId,
    queryId: query.json().queryId,
    webhookId: webhook.json().webhookId,
  };
}

/**
 * The request id of the reads a test means to make of the audit trail: each page answered is
 * audited (`audit.read`), so `stateOf` leaves out the events of its own reads and of reads sent
 * with this id, and shows any other, a refused request's among them.
 */
const MEANT_READ = 'meant-read';

/** Everything the API shows of a workspace: if a refused request wrote anything, this changes. */
async function stateOf(ws: TestWorkspace, f: Fixture): Promise<unknown> {
  const urls = [
    '/v1/triggers',
    '/v1/runs',
    '/v1/queries',
    '/v1/webhooks',
    '/v1/diagrams',
    '/v1/diagrams?type=instance',
    '/v1/audit-events?limit=100',
    `/v1/triggers/${f.triggerId}`,
    `/v1/runs/${f.runId}`,
    `/v1/queries/${f.queryId}`,
    `/v1/webhooks/${f.webhookId}`,
    `/v1/diagrams/${f.blueprintId}`,
  ];
  const answers = [];
  for (const url of urls) {
    const res = await ws.call('GET', url, { headers: { 'x-request-id': MEANT_READ } });
    expect(res.statusCode, url).toBe(200);
    const answer = res.json();
    if (url.startsWith('/v1/audit-events')) {
      answer.data = answer.data.filter((event: { action: string; requestId: string }) => event.action !== 'audit.read' || event.requestId !== MEANT_READ);
    }
    answers.push(answer);
  }
  return answers;
}

const NOT_UUIDS = ['not-a-uuid', '12345', '0190a8c2-7f8e-7b3a-9c1d-2e4f5a6b7c8', `${'a'.repeat(8)}-zzzz-7b3a-9c1d-2e4f5a6b7c8d`];

describeEachStore('bad input on every management route', (env) => {
  it('names only routes that exist', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    for (const route of ROUTES) {
      const res = await ws.call(route.method, route.path(f), { body: route.body?.(f) });
      const error = res.statusCode === 404 ? res.json().error : '';
      expect(error, `${route.method} ${route.path(f)}`).not.toMatch(/^no route/);
    }
  });

  it('answers 400 naming the field for wrong types, missing, unknown and huge fields; writes nothing', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    const before = await stateOf(ws, f);
    for (const route of BODY_ROUTES) {
      const url = route.path(f);
      const valid = route.valid(f);
      const send = (body: unknown) => ws.call(route.method, url, { body });

      const [wrong, wrongField] = route.wrongType;
      expectError(await send({ ...valid, ...wrong }), 400, 'invalid_request', wrongField);
      expectError(await send({ ...valid, unexpectedField: 1 }), 400, 'invalid_request', '"unexpectedField"');
      const [huge, hugeField] = route.huge;
      expectError(await send({ ...valid, ...huge }), 400, 'invalid_request', hugeField);
      if (route.required) {
        const { [route.required]: _dropped, ...missing } = valid;
        expectError(await send(missing), 400, 'invalid_request', `body.${route.required} is required`);
      }
      for (const notAnObject of [[valid], 'text', 42, true]) {
        expectError(await send(notAnObject), 400, 'invalid_request', 'body');
      }
    }
    expect(await stateOf(ws, f)).toEqual(before);
  });

  it('refuses any field on the actions that take none (run actions, evaluate); no body or {} is the call', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    const search = await ws.call('POST', '/v1/triggers', { body: { name: 'Cohort', sourceId: f.blueprintId, type: 'search', queryId: f.queryId } });
    const actions = [...RUN_ACTIONS.map((action) => `/v1/runs/${f.runId}/${action}`), `/v1/triggers/${search.json().triggerId}/evaluate`];
    const before = await stateOf(ws, f);
    for (const url of actions) {
      expectError(await ws.call('POST', url, { body: { reason: 'no longer needed' } }), 400, 'invalid_request', '"reason"');
      for (const notAnObject of [['x'], 'text', 7]) expectError(await ws.call('POST', url, { body: notAnObject }), 400, 'invalid_request', 'body');
    }
    expect(await stateOf(ws, f)).toEqual(before);
    // The calls themselves, with {} and with no body at all.
    expect((await ws.call('POST', `/v1/runs/${f.runId}/pause`, { body: {} })).json().automationStatus).toBe('paused');
    expect((await ws.call('POST', `/v1/runs/${f.runId}/cancel`)).json().automationStatus).toBe('canceled');
    expect((await ws.call('POST', actions[actions.length - 1])).statusCode).toBe(200);
  });

  it('answers 400 for malformed JSON, 415 for other content types, 413 for bodies over 1 MiB; writes nothing', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    const before = await stateOf(ws, f);
    for (const route of BODY_ROUTES) {
      const url = route.path(f);
      const valid = JSON.stringify(route.valid(f));
      const raw = (payload: string, contentType: string) =>
        ws.call(route.method, url, { payload, headers: { 'content-type': contentType } });

      for (const broken of [valid.slice(0, -1), `${valid},`, "{'name': 'single quotes'}", '{"name": "x" "type": "web"}']) {
        expectError(await raw(broken, 'application/json'), 400, 'invalid_request', 'not valid JSON');
      }
      for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml', 'multipart/form-data; boundary=x']) {
        expectError(await raw(valid, contentType), 415, 'unsupported_media_type');
      }
      // JSON is UTF-8: another charset is 415, bytes that are not UTF-8 are 400 (both were read
      // as UTF-8 and stored with replacement characters).
      for (const contentType of ['application/json; charset=latin1', 'application/json; charset="ISO-8859-1"', 'application/json;charset=utf-16']) {
        expectError(await raw(valid, contentType), 415, 'unsupported_media_type', 'UTF-8');
      }
      const latin1 = Buffer.concat([Buffer.from(valid.slice(0, -1)), Buffer.from(', "x": "Jos'), Buffer.from([0xe9]), Buffer.from('"}')]);
      expectError(await ws.call(route.method, url, { payload: latin1, headers: { 'content-type': 'application/json' } }), 400, 'invalid_request', 'not valid UTF-8');
      // One byte over the limit: 413 (the padding is whitespace, so only the size is wrong).
      expectError(await raw(valid + ' '.repeat(ONE_MIB + 1 - Buffer.byteLength(valid)), 'application/json'), 413, 'payload_too_large', 'request body is too large: at most 1 MiB (1048576 bytes) here');
      if (!route.emptyBodyIsValid) {
        expectError(await raw('', 'application/json'), 400, 'invalid_request', 'body');
        expectError(await raw('null', 'application/json'), 400, 'invalid_request', 'body');
      }
    }
    expect(await stateOf(ws, f)).toEqual(before);
    // A body of exactly the limit is taken.
    const rename = JSON.stringify({ name: 'At the limit' });
    const atLimit = await ws.call('PATCH', `/v1/queries/${f.queryId}`, { payload: rename + ' '.repeat(ONE_MIB - Buffer.byteLength(rename)), headers: { 'content-type': 'application/json' } });
    expect(atLimit.statusCode, atLimit.body).toBe(200);
    // UTF-8 said in any of its spellings, and text beyond Latin-1, is taken as sent.
    for (const [contentType, name] of [['application/json; charset=UTF-8', 'José Müller'], ['application/json; charset=utf8', '患者 🩺']]) {
      const res = await ws.call('PATCH', `/v1/queries/${f.queryId}`, { payload: Buffer.from(JSON.stringify({ name })), headers: { 'content-type': contentType } });
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().name).toBe(name);
    }
  });

  it('refuses bodies nested deeper than 100 levels with 400 (they overflowed the stack: 500); writes nothing', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    const before = await stateOf(ws, f);
    const nested = (depth: number) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`;
    for (const route of BODY_ROUTES) {
      const valid = JSON.stringify(route.valid(f)).slice(1, -1);
      for (const deep of [nested(4_300), `[${nested(150)}]`]) {
        const res = await ws.call(route.method, route.path(f), { payload: `{${valid}, "deep": ${deep}}`, headers: { 'content-type': 'application/json' } });
        expectError(res, 400, 'invalid_request', 'nests objects and arrays deeper than 100 levels');
      }
    }
    // The fire's payload is free JSON: there the depth reached JSON.stringify (and the key's
    // fingerprint), which overflowed.
    for (const headers of [{ 'content-type': 'application/json' }, { 'content-type': 'application/json', 'idempotency-key': 'deep-1' }] as Record<string, string>[]) {
      const res = await ws.call('POST', `/v1/triggers/${f.triggerId}`, { payload: `{"payload": ${nested(4_300)}}`, headers });
      expectError(res, 400, 'invalid_request', 'deeper than 100 levels');
    }
    expect(await stateOf(ws, f)).toEqual(before);
    // A payload as deep as a FHIR resource ever is fires as usual.
    const fired = await ws.call('POST', `/v1/triggers/${f.triggerId}`, { payload: `{"payload": ${nested(98)}}`, headers: { 'content-type': 'application/json' } });
    expect(fired.statusCode, fired.body).toBe(201);
  });

  it('refuses __proto__ and constructor.prototype bodies without touching any prototype; writes nothing', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    const before = await stateOf(ws, f);
    for (const route of BODY_ROUTES) {
      const valid = JSON.stringify(route.valid(f)).slice(1, -1);
      for (const payload of [
        `{"__proto__": {"polluted": true}, ${valid}}`,
        `{${valid}, "__proto__": {"isAdmin": true}}`,
        `{"constructor": {"prototype": {"polluted": true}}, ${valid}}`,
        `{${valid}, "nested": {"__proto__": {"polluted": true}}}`,
      ]) {
        const res = await ws.call(route.method, route.path(f), { payload, headers: { 'content-type': 'application/json' } });
        expectError(res, 400, 'invalid_request');
      }
      // A plain "constructor" field is just an unknown field.
      expectError(await ws.call(route.method, route.path(f), { body: { ...route.valid(f), constructor: 'x' } }), 400, 'invalid_request');
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
    expect(await stateOf(ws, f)).toEqual(before);
  });

  it('refuses out-of-range limits, unknown parameters, bad enum values and bad cursors on every list', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    const before = await stateOf(ws, f);
    for (const { path, badEnum, nameSearch } of LIST_ROUTES) {
      // Not decimal digits: Number() read them as 16, 10, 1 and 2.
      for (const limit of ['0x10', '1e1', '01', '+2', ' 2']) {
        expectError(await ws.call('GET', `${path}?limit=${encodeURIComponent(limit)}`), 400, 'invalid_request', 'querystring.limit must be a whole number in decimal digits');
      }
      for (const limit of ['0', '101', '-1', '1.5', 'ten', '']) {
        expectError(await ws.call('GET', `${path}?limit=${limit}`), 400, 'invalid_request', 'querystring.limit');
      }
      expectError(await ws.call('GET', `${path}?sortBy=name`), 400, 'invalid_request', '"sortBy"');
      expectError(await ws.call('GET', `${path}?limit=5&limit=6`), 400, 'invalid_request', 'querystring.limit is given more than once');
      if (badEnum) expectError(await ws.call('GET', `${path}?${badEnum[0]}=${badEnum[1]}`), 400, 'invalid_request', `querystring.${badEnum[0]}`);
      if (nameSearch) expectError(await ws.call('GET', `${path}?q=${HUGE}`), 400, 'invalid_request', 'querystring.q');
      const wrongShape = Buffer.from(JSON.stringify(['a', 'b'])).toString('base64url');
      const wrongType = Buffer.from(JSON.stringify([{ id: 1 }])).toString('base64url');
      // Well-formed, but not an id: "zzz" sorts after every id and would answer the first page again.
      const notAnId = Buffer.from(JSON.stringify(['zzz'])).toString('base64url');
      const aNumber = Buffer.from(JSON.stringify([7])).toString('base64url');
      // Another list's cursor: it answered an empty page, or another list's slice, as its own.
      const ofAnotherList = Buffer.from(JSON.stringify(['0190c0de-0000-7000-8000-000000000001', 'another-list'])).toString('base64url');
      for (const cursor of ['garbage', wrongShape, wrongType, notAnId, aNumber, 'eyJub3QiOiJhbiBhcnJheSJ9', ofAnotherList]) {
        expectError(await ws.call('GET', `${path}?cursor=${cursor}`), 400, 'invalid_cursor');
      }
      // A cursor handed out before cursors named their list (the id alone) still pages.
      const idAlone = Buffer.from(JSON.stringify(['0190c0de-0000-7000-8000-000000000001'])).toString('base64url');
      const meant = { headers: { 'x-request-id': MEANT_READ } };
      expect((await ws.call('GET', `${path}?cursor=${idAlone}`, meant)).statusCode).toBe(200);
      expectError(await ws.call('GET', `${path}?cursor=${'a'.repeat(600)}`), 400, 'invalid_request', 'querystring.cursor');
      for (const limit of ['1', '100']) expect((await ws.call('GET', `${path}?limit=${limit}`, meant)).statusCode).toBe(200);
    }
    expectError(await ws.call('GET', '/v1/triggers?active=maybe'), 400, 'invalid_request', 'querystring.active');
    expectError(await ws.call('GET', '/v1/triggers?sourceId=nope'), 400, 'invalid_request', 'querystring.sourceId');
    expectError(await ws.call('GET', '/v1/runs?triggerId=nope'), 400, 'invalid_request', 'querystring.triggerId');
    expectError(await ws.call('GET', `/v1/runs?idempotencyKey=${'k'.repeat(256)}`), 400, 'invalid_request', 'querystring.idempotencyKey');
    expect(await stateOf(ws, f)).toEqual(before);
  });

  it('refuses query parameters on every route that takes none, naming the parameter; writes nothing', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    const before = await stateOf(ws, f);
    const lists = new Set(LIST_ROUTES.map((list) => list.path));
    const routes: { method: Method; url: string; body?: unknown }[] = [
      ...ROUTES.filter((route) => !(route.method === 'GET' && lists.has(route.path(f)))).map((route) => ({ method: route.method, url: route.path(f), body: route.body?.(f) })),
      { method: 'GET', url: '/v1/me' },
      { method: 'GET', url: `/v1/diagrams/${f.runId}/graph` },
      { method: 'GET', url: '/v1/events/catalog' },
    ];
    for (const { method, url, body } of routes) {
      // Answered as if the parameter were not there: a typo, or another API's parameter, passed silently.
      expectError(await ws.call(method, `${url}?expand=steps`, { body }), 400, 'invalid_request', '"expand"');
    }
    expect(await stateOf(ws, f)).toEqual(before);
    // The routes still answer without one.
    expect((await ws.call('GET', `/v1/runs/${f.runId}`)).statusCode).toBe(200);
  });

  it('refuses text no store keeps (U+0000, unpaired surrogates) in bodies, query strings and paths, naming where; writes nothing', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    const before = await stateOf(ws, f);
    for (const route of BODY_ROUTES) {
      const valid = JSON.stringify(route.valid(f)).slice(1, -1);
      // As JSON escapes: PostgreSQL refused both (a 500), SQLite kept them.
      for (const text of ['a\\u0000b', 'a\\ud800b', '\\udc00']) {
        const res = await ws.call(route.method, route.path(f), { payload: `{${valid}, "extra": "${text}"}`, headers: { 'content-type': 'application/json' } });
        expectError(res, 400, 'invalid_request', 'body.extra holds the character U+0000 or an unpaired UTF-16 surrogate');
      }
    }
    expectError(await ws.call('PATCH', `/v1/queries/${f.queryId}`, { body: { name: 'a\u0000b' } }), 400, 'invalid_request', 'body.name holds');
    expectError(await ws.call('POST', '/v1/webhooks', { body: { name: 'x\ud800' } }), 400, 'invalid_request', 'body.name holds');
    expectError(await ws.call('POST', `/v1/triggers/${f.triggerId}`, { body: { payload: { notes: ['ok', 'nul \u0000'] } } }), 400, 'invalid_request', 'body.payload.notes[1] holds');
    expectError(await ws.call('POST', `/v1/triggers/${f.triggerId}`, { body: { payload: { ['k\u0000']: 1 } } }), 400, 'invalid_request', 'body.payload (a field name) holds');
    for (const url of ['/v1/queries?q=%00', '/v1/diagrams?q=a%00', '/v1/runs?idempotencyKey=%00', '/v1/audit-events?action=%00']) {
      // Named as the schema's own messages name query parameters (`querystring.limit …`).
      expectError(await ws.call('GET', url), 400, 'invalid_request', `querystring.${url.split('?')[1].split('=')[0]} holds the character U+0000`);
    }
    expect(await stateOf(ws, f)).toEqual(before);
    // A surrogate pair (an emoji, escaped as many JSON writers do) is ordinary text.
    const named = await ws.call('PATCH', `/v1/queries/${f.queryId}`, { payload: '{"name": "Cohort \\ud83d\\ude00"}', headers: { 'content-type': 'application/json' } });
    expect(named.statusCode, named.body).toBe(200);
    expect(named.json().name).toBe('Cohort \u{1F600}');
    expect((await ws.call('GET', `/v1/queries/${f.queryId}`)).json().name).toBe('Cohort \u{1F600}');
  });

  it('says what an Idempotency-Key may hold in a body as in the header', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    const before = await stateOf(ws, f);
    const rule = 'must be 1–255 printable ASCII characters';
    expectError(await ws.call('POST', `/v1/triggers/${f.triggerId}`, { body: { idempotencyKey: 'clé-1' } }), 400, 'invalid_request', `body.idempotencyKey ${rule}`);
    expectError(await ws.call('POST', `/v1/triggers/${f.triggerId}`, { body: {}, headers: { 'idempotency-key': 'line\tbreak' } }), 400, 'invalid_request', `Idempotency-Key ${rule}`);
    expect(await stateOf(ws, f)).toEqual(before);
  });

  it('refuses numbers beyond a double (1e400) anywhere in a body, naming where; a keyed fire is no 500, an unkeyed one no null', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    const before = await stateOf(ws, f);
    const json = { 'content-type': 'application/json' };
    for (const [payload, where] of [
      ['{"payload": {"n": 1e400}}', 'body.payload.n'],
      ['{"payload": {"resource": {"valueQuantity": {"value": -1E+400}}}}', 'body.payload.resource.valueQuantity.value'],
      [`{"payload": {"values": [1, ${'9'.repeat(320)}]}}`, 'body.payload.values[1]'],
    ]) {
      for (const headers of [json, { ...json, 'idempotency-key': `big-${where}` }]) {
        const res = await ws.call('POST', `/v1/triggers/${f.triggerId}`, { payload, headers });
        expectError(res, 400, 'invalid_request', `${where} is a number beyond what a double holds (±1.8e308)`);
      }
    }
    for (const route of BODY_ROUTES) {
      const valid = JSON.stringify(route.valid(f)).slice(1, -1);
      const res = await ws.call(route.method, route.path(f), { payload: `{${valid}, "extra": 2e999}`, headers: json });
      expectError(res, 400, 'invalid_request', 'body.extra is a number beyond what a double holds');
    }
    expect(await stateOf(ws, f)).toEqual(before);
    // The largest double, a tiny one and an exponent written with three digits are numbers like any other.
    const fired = await ws.call('POST', `/v1/triggers/${f.triggerId}`, { payload: '{"payload": {"max": 1.7976931348623157e308, "tiny": 1e-400, "e": 1e100}}', headers: { ...json, 'idempotency-key': 'big-ok' } });
    expect(fired.statusCode, fired.body).toBe(201);
    const stored = await env.db.selectFrom('runs').select('payload').where('id', '=', fired.json().runId).executeTakeFirstOrThrow();
    expect(JSON.parse(stored.payload!)).toEqual({ max: 1.7976931348623157e308, tiny: 0, e: 1e100 });
  });

  it('answers malformed URLs, leap seconds, doubled Idempotency-Keys and cursors with junk in the catalogue\'s words', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    const before = await stateOf(ws, f);
    // The router's own refusals (a parameter longer than any id, a broken % escape) had Fastify's
    // body: no requestId, codes outside the catalogue, the path echoed back.
    expectError(await ws.call('GET', `/v1/triggers/${'x'.repeat(150)}`), 404, 'not_found');
    const badEscape = await ws.call('GET', '/v1/triggers/%ZZ');
    expectError(badEscape, 400, 'invalid_request', 'the URL is not valid');
    expect(badEscape.body).not.toContain('%ZZ');
    // RFC 3339 allows 23:59:60; a Date cannot hold it (it was a 500).
    expectError(await ws.call('GET', '/v1/audit-events?since=2016-12-31T23:59:60Z'), 400, 'invalid_request', 'querystring.since');
    // The year 10000 in UTC is written +010000-…, which sorted before every stored time: all events came back.
    expectError(await ws.call('GET', `/v1/audit-events?since=${encodeURIComponent('9999-12-31T23:59:59-00:01')}`), 400, 'invalid_request', 'querystring.since');
    expect((await ws.call('GET', '/v1/audit-events?since=9999-12-31T23:59:59Z')).json().data).toEqual([]);
    // Node joins a doubled header into "a, b": a key neither copy named.
    const doubled = await env.app.inject({
      method: 'POST',
      url: `/v1/triggers/${f.triggerId}`,
      headers: { authorization: `Bearer ${ws.key}`, 'content-type': 'application/json', 'idempotency-key': ['dup-1', 'dup-2'] },
      payload: '{}',
    });
    expectError(doubled, 400, 'invalid_request', 'one Idempotency-Key header');
    // Node's base64 decoder skips what is not base64url: a cursor with junk after it was taken.
    const page = (await ws.call('GET', '/v1/runs?limit=1')).json();
    const second = await ws.call('POST', `/v1/triggers/${f.triggerId}`, { body: { autoStart: false } });
    expect(second.statusCode).toBe(201);
    const cursor = (await ws.call('GET', '/v1/runs?limit=1')).json().nextCursor as string;
    expect(page.data).toHaveLength(1);
    expect((await ws.call('GET', `/v1/runs?limit=1&cursor=${cursor}`)).statusCode).toBe(200);
    for (const junk of [`${cursor}.`, `${cursor}!!`, `${cursor}=`, ` ${cursor}`]) {
      expectError(await ws.call('GET', `/v1/runs?limit=1&cursor=${encodeURIComponent(junk)}`), 400, 'invalid_cursor');
    }
    await ws.call('POST', `/v1/runs/${second.json().runId}/cancel`);
    expect((await stateOf(ws, f)) as unknown[]).toHaveLength((before as unknown[]).length);
  });

  it('takes an empty body without Content-Type however it is framed; a compressed body is 415 after the key is checked', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    // Chunked with no chunks: an HTTP client's usual POST without a body (it was 415).
    const paused = await env.app.inject({
      method: 'POST',
      url: `/v1/runs/${f.runId}/pause`,
      headers: { authorization: `Bearer ${ws.key}`, 'transfer-encoding': 'chunked' },
      payload: '',
    });
    expect(paused.statusCode, paused.body).toBe(200);
    expect(paused.json().automationStatus).toBe('paused');
    // A body of another type is still 415.
    expectError(await ws.call('POST', `/v1/runs/${f.runId}/resume`, { payload: 'resume', headers: { 'content-type': 'text/plain' } }), 415, 'unsupported_media_type');
    // Content-Encoding: who you are comes first (401), then what you sent (415, with the rate limit headers).
    const anonymous = await env.app.inject({ method: 'POST', url: `/v1/triggers/${f.triggerId}`, headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' }, payload: '{}' });
    expectError(anonymous, 401, 'invalid_api_key');
    const keyed = await ws.call('POST', `/v1/triggers/${f.triggerId}`, { payload: '{}', headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' } });
    expectError(keyed, 415, 'unsupported_media_type', 'uncompressed');
    expect(keyed.headers['ratelimit-limit']).toBeDefined();
    // Without a body there is nothing compressed: the label alone is no reason to refuse.
    expect((await ws.call('GET', '/v1/me', { headers: { 'content-encoding': 'gzip' } })).statusCode).toBe(200);
  });

  it('answers 404 for ids in paths that are not UUIDs', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    const before = await stateOf(ws, f);
    for (const bad of NOT_UUIDS) {
      const fake: Fixture = { blueprintId: bad, triggerId: bad, runId: bad, queryId: bad, webhookId: bad };
      for (const route of ROUTES.filter((r) => r.byId)) {
        const res = await ws.call(route.method, route.path(fake), { body: route.body?.(f) });
        expectError(res, 404, 'not_found');
      }
    }
    expect(await stateOf(ws, f)).toEqual(before);
  });

  it('answers 404, never 403, to a key of another workspace or another tenant, for every id route', async () => {
    const tenant = `tenant-${randomBytes(4).toString('hex')}`;
    const owner = await env.workspace(tenant);
    const sameTenant = await env.workspace(tenant);
    const otherTenant = await env.workspace();
    expect(sameTenant.tenantId).toBe(owner.tenantId);
    expect(otherTenant.tenantId).not.toBe(owner.tenantId);
    const f = await fixture(owner);
    const before = await stateOf(owner, f);
    for (const stranger of [sameTenant, otherTenant]) {
      await fixture(stranger);
      for (const route of ROUTES.filter((r) => r.byId)) {
        const res = await stranger.call(route.method, route.path(f), { body: route.body?.(f) });
        expectError(res, 404, 'not_found');
      }
      // A foreign id in a body is not a way in either.
      const foreignSource = await stranger.call('POST', '/v1/triggers', { body: { name: 'T', sourceId: f.blueprintId, type: 'web' } });
      expectError(foreignSource, 400, 'invalid_request', 'body.sourceId');
      const foreignQuery = await stranger.call('GET', `/v1/diagrams?sourceId=${f.blueprintId}`);
      expect(foreignQuery.json().data).toEqual([]);
    }
    expect(await stateOf(owner, f)).toEqual(before);
  });

  it('answers 403 insufficient_scope naming the scope on every route to a key without it; writes nothing', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    const before = await stateOf(ws, f);
    for (const route of ROUTES) {
      const lacking = await ws.keyWith(SCOPES.filter((scope) => scope !== route.scope));
      const res = await ws.call(route.method, route.path(f), { key: lacking.key, body: route.body?.(f) });
      expectError(res, 403, 'insufficient_scope', route.scope);
    }
    expect(await stateOf(ws, f)).toEqual(before);
  });

  it('lets a key with only the needed scope through on every route', async () => {
    for (const route of ROUTES) {
      const ws = await env.workspace();
      const f = await fixture(ws);
      const only = await ws.keyWith([route.scope]);
      const res = await ws.call(route.method, route.path(f), { key: only.key, body: route.body?.(f) });
      // Past the scope check the route answers as usual (resuming a queued run is a 409, not a 403).
      expect([401, 403], `${route.method} ${route.path(f)}: ${res.body.slice(0, 200)}`).not.toContain(res.statusCode);
      expect(res.statusCode).toBeLessThan(500);
    }
  });

  it('says what is wrong with the Authorization header itself, and tells an unknown key from a revoked one not at all', async () => {
    const ws = await env.workspace();
    const revoked = await ws.keyWith([]);
    await ws.revoke(revoked.keyId);
    const messages = new Map<string, string>();
    for (const [name, authorization] of [
      ['none', undefined],
      ['no scheme', ws.key],
      ['basic', `Basic ${Buffer.from(`x:${ws.key}`).toString('base64')}`],
      ['unknown', `Bearer cpk_staging_${'A'.repeat(43)}`],
      ['revoked', `Bearer ${revoked.key}`],
    ] as const) {
      const res = await ws.call('GET', '/v1/me', { key: null, headers: authorization ? { authorization } : {} });
      expectError(res, 401, 'invalid_api_key');
      messages.set(name, res.json().error);
    }
    expect(messages.get('none')).toBe('no API key: send the header Authorization: Bearer <key>');
    expect(messages.get('no scheme')).toBe('the Authorization header must read Bearer <key>');
    expect(messages.get('basic')).toBe('the Authorization header must read Bearer <key>');
    expect(messages.get('unknown')).toBe('invalid or revoked API key');
    expect(messages.get('revoked')).toBe(messages.get('unknown'));
  });

  it('answers 401 without a key, with a malformed key and with a revoked key', async () => {
    const ws = await env.workspace();
    const f = await fixture(ws);
    const revoked = await ws.keyWith([]);
    await ws.revoke(revoked.keyId);
    for (const route of ROUTES) {
      for (const key of [null, 'cpk_staging_not-a-real-key', revoked.key]) {
        const res = await ws.call(route.method, route.path(f), { key, body: route.body?.(f) });
        expectError(res, 401, 'invalid_api_key');
      }
    }
  });
});

describeEachStore('keyset pagination while rows are inserted', (env) => {
  /**
   * Walks a list three at a time, inserting two new rows before each next page. Newest-first
   * keyset paging must yield every row that existed at the start exactly once, in order, and
   * none of the newer ones (they sort before the cursor).
   */
  async function walk(ws: TestWorkspace, list: string, make: () => Promise<string>, idOf: (item: Record<string, string>) => string) {
    const initial: string[] = [];
    for (let i = 0; i < 7; i++) initial.push(await make());
    const seen: string[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const res = await ws.call('GET', `${list}${list.includes('?') ? '&' : '?'}limit=3${cursor ? `&cursor=${cursor}` : ''}`);
      expect(res.statusCode).toBe(200);
      seen.push(...res.json().data.map(idOf));
      cursor = res.json().nextCursor;
      await make();
      await make();
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual([...initial].reverse());
    const everything = await ws.call('GET', `${list}${list.includes('?') ? '&' : '?'}limit=100`);
    const all = everything.json().data.map(idOf);
    expect(all).toHaveLength(initial.length + 2 * pages);
    expect(new Set(all).size).toBe(all.length);
  }

  async function webTrigger(ws: TestWorkspace): Promise<string> {
    const blueprint = await ws.importBlueprint(simpleBlueprint('Paged'));
    const res = await ws.call('POST', '/v1/triggers', { body: { name: 'Paged', sourceId: blueprint.id, type: 'web' } });
    return res.json().triggerId;
  }

  it('walks runs', async () => {
    const ws = await env.workspace();
    const triggerId = await webTrigger(ws);
    const fire = async () => (await ws.call('POST', `/v1/triggers/${triggerId}`, { body: {} })).json().runId;
    await walk(ws, '/v1/runs', fire, (run) => run.runId);
  });

  it('walks triggers', async () => {
    const ws = await env.workspace();
    const blueprint = await ws.importBlueprint(simpleBlueprint('Paged'));
    let n = 0;
    const make = async () =>
      (await ws.call('POST', '/v1/triggers', { body: { name: `T${n++}`, sourceId: blueprint.id, type: 'web' } })).json().triggerId;
    await walk(ws, '/v1/triggers', make, (trigger) => trigger.triggerId);
  });

  it('walks queries', async () => {
    const ws = await env.workspace();
    let n = 0;
    const make = async () => (await ws.call('POST', '/v1/queries', { body: { name: `Q${n++}`, resourceType: 'Patient' } })).json().queryId;
    await walk(ws, '/v1/queries', make, (query) => query.queryId);
  });

  it('walks blueprints', async () => {
    const ws = await env.workspace();
    let n = 0;
    const make = async () => (await ws.importBlueprint(simpleBlueprint(`Blueprint ${n++}`))).id;
    await walk(ws, '/v1/diagrams', make, (diagram) => diagram.id);
  });

  it('walks instances', async () => {
    const ws = await env.workspace();
    const triggerId = await webTrigger(ws);
    const fire = async () => (await ws.call('POST', `/v1/triggers/${triggerId}`, { body: {} })).json().runId;
    await walk(ws, '/v1/diagrams?type=instance', fire, (diagram) => diagram.id);
  });
});
