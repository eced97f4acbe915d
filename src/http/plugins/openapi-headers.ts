/**
 * What the route schemas cannot say, added to the generated OpenAPI document: the headers every
 * answer carries (DESIGN §2: the request id, the rate limit), the ones some carry (Retry-After,
 * Idempotent-Replayed), the 408 of every request, the 413 and 415 of every JSON body, the error
 * codes each error status may carry, and the signed delivery's request (its headers and body are
 * read raw, so no body schema validates them).
 *
 * Written once here rather than on each route: these follow from plugins (request-id.ts,
 * authenticate.ts, json-body.ts) that apply to every route alike. A generated client then knows
 * them, and test/integration/openapi.test.ts checks the document against real answers.
 */
import { BODY_OPTIONAL, ErrorBody } from '../schemas/common.js';
import { ERROR_STATUS, type ErrorCode } from '../../lib/errors.js';
import { REQUEST_TIMEOUT_CODE } from './client-errors.js';

type Json = Record<string, unknown>;
interface Operation {
  operationId?: string;
  security?: unknown[];
  parameters?: Json[];
  requestBody?: Json;
  [BODY_OPTIONAL]?: boolean;
  responses?: Record<string, Json & { headers?: Json }>;
}
interface Document {
  paths?: Record<string, Record<string, Operation>>;
  components?: Json & { headers?: Json; parameters?: Json };
}

const ref = (kind: 'headers' | 'parameters', name: string) => ({ $ref: `#/components/${kind}/${name}` });
/**
 * The error body's schema as plain JSON (as the generated answers inline it), without its `$id`
 * (one `$id` on many copies would name many schemas, which JSON Schema tools refuse). Its title
 * then makes every copy one reference to `components/schemas/Error` (nameSharedSchemas).
 */
const { $id: _errorId, ...ERROR_SCHEMA }: Json = JSON.parse(JSON.stringify(ErrorBody));
const errorResponse = (description: string) => ({ description, content: { 'application/json': { schema: { ...ERROR_SCHEMA } } } });

/** The error codes each status may carry (lib/errors.ts), for the descriptions of error answers. */
const CODES_BY_STATUS = new Map<string, string[]>();
for (const [code, status] of Object.entries(ERROR_STATUS) as [ErrorCode, number][]) {
  CODES_BY_STATUS.set(String(status), [...(CODES_BY_STATUS.get(String(status)) ?? []), code]);
}

/** What a success answer is, where a route's schema gives no description (the generator's "Default Response"). */
const SUCCESS = { '200': 'OK', '201': 'Created', '202': 'Accepted: stored, processed after the answer', '204': 'No content' } as Record<string, string>;

const HEADERS: Json = {
  RequestId: { description: 'The request id: the one sent when it was 1–128 printable ASCII characters, else a new UUID.', schema: { type: 'string' } },
  RateLimitLimit: { description: 'Requests the key may make per window.', schema: { type: 'integer' } },
  RateLimitRemaining: { description: 'Requests left in this window.', schema: { type: 'integer' } },
  RateLimitReset: { description: 'Seconds until the budget is full again.', schema: { type: 'integer' } },
  RetryAfter: { description: 'Seconds to wait before trying again.', schema: { type: 'integer' } },
  Link: { description: 'With `limit`, when more webhook endpoints follow: `<…/v1/webhooks?limit=…&cursor=…>; rel="next"` (RFC 8288).', schema: { type: 'string' } },
  IdempotentReplayed: { description: '`true` when the answer is the stored one of an earlier request with this Idempotency-Key.', schema: { type: 'string', enum: ['true'] } },
};

const PARAMETERS: Json = {
  RequestId: {
    name: 'X-Request-Id',
    in: 'header',
    required: false,
    description: 'Your id for the call (1–128 printable ASCII characters), answered back and kept in the audit trail.',
    schema: { type: 'string', maxLength: 128 },
  },
};

const DELIVERY_PARAMETERS: Json[] = [
  {
    name: 'X-Service-Signature',
    in: 'header',
    required: false,
    description: '`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">` (one or more v1); required unless the endpoint was created with `auth: "bearer"`.',
    schema: { type: 'string' },
  },
  {
    name: 'Idempotency-Key',
    in: 'header',
    required: false,
    description: 'A replay with the same key and body answers the first 202 and processes nothing again; another body is 409.',
    schema: { type: 'string', maxLength: 255 },
  },
];

const DELIVERY_BODY = {
  required: true,
  description: 'A FHIR R4 Bundle of any type, a single resource, `{resourceType, bundle}`, or plain records; at most 20 MiB.',
  content: Object.fromEntries(
    ['application/json', 'application/fhir+json'].map((type) => [type, { schema: { type: 'object', additionalProperties: true } }]),
  ),
};

/**
 * Fastify validates headers by their lower-case names, so a route's header schema documents
 * `idempotency-key`; the document spells it as the interface spec and the delivery route do,
 * or a generated client has two names for one header.
 */
function headerAsSpelled(parameter: Json): Json {
  if (parameter.in !== 'header' || parameter.name !== 'idempotency-key') return parameter;
  return {
    ...parameter,
    name: 'Idempotency-Key',
    description: 'A retry with the same key and body answers the first result (200, `Idempotent-Replayed: true`) and creates nothing again; another body is 409.',
  };
}

/** Adds the headers and answers above to every operation of the document; answers the document. */
export function documentCommonHeaders<T extends object>(generated: T): T {
  const document = generated as Document;
  document.components = { ...document.components };
  document.components.headers = { ...document.components.headers, ...HEADERS };
  document.components.parameters = { ...document.components.parameters, ...PARAMETERS };
  for (const operations of Object.values(document.paths ?? {})) {
    for (const operation of Object.values(operations)) documentOperation(operation);
  }
  nameSharedSchemas(document);
  return generated;
}

/**
 * Every schema with a `title` (schemas/common.ts `named`) moves to `components/schemas/<title>`
 * and each place that used it refers there: the generator inlines a schema at every use, so a
 * Run was six anonymous copies and the error body 319. A title given to two different schemas
 * is a mistake in the routes, and fails the document rather than naming one of them wrongly.
 */
function nameSharedSchemas(document: Document): void {
  const named: Record<string, Json> = {};
  const texts = new Map<string, string>();
  const visit = (value: unknown): unknown => {
    if (Array.isArray(value)) return value.map(visit);
    if (value === null || typeof value !== 'object') return value;
    const node = Object.fromEntries(Object.entries(value).map(([key, item]) => [key, visit(item)])) as Json;
    const title = node.title;
    if (typeof title !== 'string' || !('type' in node || 'anyOf' in node || 'allOf' in node)) return node;
    const { $id: _id, ...schema } = node;
    const text = JSON.stringify(schema);
    const seen = texts.get(title);
    if (seen !== undefined && seen !== text) throw new Error(`two different schemas are named ${title} in the OpenAPI document`);
    texts.set(title, text);
    named[title] = schema;
    return { $ref: `#/components/schemas/${title}` };
  };
  document.paths = visit(document.paths) as Document['paths'];
  document.components = { ...document.components, schemas: { ...(document.components?.schemas as Json | undefined), ...sortedByName(named) } };
}

function sortedByName(schemas: Record<string, Json>): Record<string, Json> {
  return Object.fromEntries(Object.entries(schemas).sort(([a], [b]) => a.localeCompare(b)));
}

function documentOperation(operation: Operation): void {
  const delivery = operation.operationId === 'deliverToWebhook';
  const keyed = !(Array.isArray(operation.security) && operation.security.length === 0);
  operation.parameters = [...(operation.parameters ?? []).map(headerAsSpelled), ref('parameters', 'RequestId')];
  if (delivery) {
    operation.parameters.push(...DELIVERY_PARAMETERS);
    operation.requestBody = DELIVERY_BODY;
  }
  if (operation[BODY_OPTIONAL] && operation.requestBody) operation.requestBody.required = false;
  delete operation[BODY_OPTIONAL];
  const responses = (operation.responses ??= {});
  responses['408'] ??= errorResponse(`The request did not arrive whole in time (code ${REQUEST_TIMEOUT_CODE}): send it again at a steady pace.`);
  responses['500'] ??= errorResponse('An unexpected failure (code internal), logged under the request id. A call that takes an Idempotency-Key may be sent again with the same key.');
  if (operation.requestBody) {
    responses['413'] ??= errorResponse('The body is larger than the route takes.');
    responses['415'] ??= errorResponse('The body is not JSON.');
  }
  for (const [status, response] of Object.entries(responses)) {
    describeResponse(status, response);
    const headers: Json = { ...response.headers, 'X-Request-Id': ref('headers', 'RequestId') };
    // Rate limited per key: every answer once the key is known. Deliveries: once the signature is checked.
    if ((keyed && status !== '401') || (delivery && !['404', '413', '415'].includes(status))) {
      headers['RateLimit-Limit'] = ref('headers', 'RateLimitLimit');
      headers['RateLimit-Remaining'] = ref('headers', 'RateLimitRemaining');
      headers['RateLimit-Reset'] = ref('headers', 'RateLimitReset');
    }
    if (status === '429' || status === '503') headers['Retry-After'] = ref('headers', 'RetryAfter');
    if ((['fireTrigger', 'evaluateTrigger', 'createTrigger', 'createQuery', 'createWebhook'].includes(operation.operationId ?? '') && status === '200') || (delivery && status === '202')) {
      headers['Idempotent-Replayed'] = ref('headers', 'IdempotentReplayed');
    }
    if (operation.operationId === 'listWebhooks' && status === '200') headers.Link = ref('headers', 'Link');
    response.headers = headers;
  }
}

/**
 * A success answer named by its status; an error answer given the codes of its status, so that a
 * client generated from the document, or its reader, knows which `code` values to expect.
 */
function describeResponse(status: string, response: Json): void {
  if (response.description === 'Default Response' && SUCCESS[status]) response.description = SUCCESS[status];
  const codes = CODES_BY_STATUS.get(status);
  if (!codes || typeof response.description !== 'string' || /\bcode\b/.test(response.description)) return;
  const base = response.description === 'Default Response' || response.description === 'Every error response' ? 'An error.' : response.description;
  response.description = `${base} Its \`code\` is ${codes.length === 1 ? codes[0] : `one of ${codes.join(', ')}`}.`;
}
