/**
 * Additive routes around inbound data (DESIGN §7, §9), all behind an API key:
 * - `GET /v1/webhooks/{webhookId}/deliveries` (webhooks:read): what happened to each delivery;
 * - `GET /v1/events/catalog` (any key): the events deliveries can raise;
 * - `POST /v1/triggers/{triggerId}/evaluate` (runs:write): a search trigger's runs, now.
 */
import { Type } from '@sinclair/typebox';
import type { Api } from '../types.js';
import type { Container } from '../../container.js';
import { CursorParam, EmptyBody, ErrorBody, IdParams, ListEnvelope, Nullable, PageLimit, Timestamp, Uuid, commonErrors, noBodyIsEmpty, BODY_OPTIONAL, named } from '../schemas/common.js';
import { notFound } from '../../lib/errors.js';
import { findWebhook } from '../../modules/webhooks/webhook.repository.js';
import { listDeliveries } from '../../modules/deliveries/delivery.repository.js';
import { DELIVERY_STATUSES } from '../../storage/database.js';
import { eventCatalog } from '../../ingestion/events.js';
import { evaluateSearchTrigger } from '../../modules/scheduling/evaluate.service.js';
import { idempotencyKeyHeader } from '../idempotency-header.js';
import { requireValidIdempotencyKey } from '../../modules/triggers/fire.service.js';

const DeliveryView = named('Delivery', Type.Object({
  deliveryId: Uuid,
  status: Type.Union(DELIVERY_STATUSES.map((status) => Type.Literal(status))),
  idempotencyKey: Nullable(Type.String()),
  receivedAt: Timestamp,
  processedAt: Type.Union([Timestamp, Type.Null()], { description: 'when it was processed, or, for a failed one, given up; null before' }),
  attempts: Type.Integer({ description: 'times a processor took it up' }),
  accepted: Type.Integer({ description: 'resources and records accepted for processing when it was received' }),
  skippedCount: Type.Integer({ description: 'entries skipped while processing (invalid, unknown type, …)' }),
  skipped: Type.Array(Type.Object({ index: Type.Integer(), message: Type.String() }), {
    description: 'the first 1,000 skipped entries: their position in the delivery and what was wrong (never their content)',
  }),
  events: Type.Array(Type.Object({ event: Type.String(), count: Type.Integer() }), { description: 'events raised, with how often' }),
  runsStarted: Type.Integer(),
  error: Nullable(Type.String()),
}));

const ListDeliveriesQuery = Type.Object(
  {
    limit: Type.Optional(PageLimit),
    cursor: Type.Optional(CursorParam),
    status: Type.Optional(Type.Union(DELIVERY_STATUSES.map((status) => Type.Literal(status)), { description: 'only deliveries in this state' })),
  },
  { additionalProperties: false },
);

const CatalogQuery = Type.Object(
  { resourceType: Type.Optional(Type.String({ pattern: '^[A-Z][A-Za-z]{1,63}$' })) },
  { additionalProperties: false },
);

const Catalog = named('EventCatalog', Type.Object({
  data: Type.Array(Type.Object({ event: Type.String(), description: Type.String() })),
}));

const Evaluation = named('Evaluation', Type.Object({
  started: Type.Integer({ description: 'runs started, one per matching record' }),
  skipped: Type.Integer({ description: 'matching records that already have a live run of this trigger (onePerSubject), or that are runs started for another run (a Pathway query)' }),
  idempotencyKey: Type.String({ description: 'carried by every run this evaluation started' }),
}));

export function registerInboundRoutes(api: Api, container: Container): void {
  api.get(
    '/v1/webhooks/:webhookId/deliveries',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        tags: ['Webhook endpoints'],
        operationId: 'listWebhookDeliveries',
        summary: 'Deliveries to an endpoint, newest first: status, counts, skipped entries, events, runs, error',
        params: IdParams('webhookId'),
        querystring: ListDeliveriesQuery,
        response: { 200: ListEnvelope(DeliveryView), ...commonErrors },
      },
    },
    async (request) => {
      const webhook = await findWebhook(container.db, request.ctx.workspaceId, request.params.webhookId);
      if (!webhook) throw notFound('webhook endpoint');
      const { limit, cursor, status } = request.query;
      return listDeliveries(container.db, webhook.id, { limit: limit ?? 25, cursor, ...(status ? { status } : {}) });
    },
  );

  // Computed once per app: the catalogue is fixed for a build of the service.
  const catalog = eventCatalog();
  api.get(
    '/v1/events/catalog',
    {
      config: { scope: null },
      schema: {
        tags: ['Events'],
        operationId: 'getEventCatalog',
        summary: 'The events deliveries can raise, and what raises each',
        description:
          '`<ResourceType>.created|updated|deleted` for every FHIR R4 resource type, and `<ResourceType>.<status>` when a ' +
          'resource arrives with a status it did not have before. Filter with `resourceType`.',
        querystring: CatalogQuery,
        response: { 200: Catalog, ...commonErrors },
      },
    },
    async (request) => {
      const type = request.query.resourceType;
      return { data: type === undefined ? catalog : catalog.filter((entry) => entry.event.startsWith(`${type}.`)) };
    },
  );

  api.post(
    '/v1/triggers/:triggerId/evaluate',
    {
      config: { scope: 'runs:write' },
      schema: {
        tags: ['Triggers'],
        operationId: 'evaluateTrigger',
        summary: "Run a search trigger's saved query now: one run per matching record",
        description:
          'Same semantics as a schedule tick: the subject of each run is the matched record, onePerSubject holds back ' +
          'records with a live run of this trigger, and every run carries the answered `idempotencyKey`. Only search ' +
          'triggers can be evaluated (400 otherwise); an inactive one is 409 `trigger_inactive`. With an ' +
          '`Idempotency-Key` header the runs carry that key, and a call with a key that already started runs of this ' +
          'trigger answers those (`started` = their number, `skipped` 0, `Idempotent-Replayed: true`) and starts nothing: ' +
          'send one with every evaluation that may be retried.',
        params: IdParams('triggerId'),
        body: EmptyBody,
        [BODY_OPTIONAL]: true,
        headers: Type.Object({ 'idempotency-key': Type.Optional(Type.String()) }),
        response: { 200: Evaluation, ...commonErrors, 409: ErrorBody },
      },
      preValidation: noBodyIsEmpty,
    },
    async (request, reply) => {
      const key = idempotencyKeyHeader(request);
      requireValidIdempotencyKey(key);
      const { replayed, ...evaluation } = await evaluateSearchTrigger(
        { db: container.db, dialect: container.store.dialect, runCreator: container.runCreator, now: () => container.clock.now(), logger: request.log },
        request.ctx,
        request.params.triggerId,
        key,
      );
      if (replayed) reply.header('Idempotent-Replayed', 'true');
      return evaluation;
    },
  );
}
