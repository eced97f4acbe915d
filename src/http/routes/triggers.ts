import { Type } from '@sinclair/typebox';
import type { Api } from '../types.js';
import type { Container } from '../../container.js';
import { IdParams, ListEnvelope, commonErrors, ErrorBody, Uuid, Timestamp, Nullable, AutomationStatus, BODY_OPTIONAL, named } from '../schemas/common.js';
import {
  CreateTriggerBody,
  FireBody,
  ListTriggersQuery,
  TriggerView,
  UpdateTriggerBody,
} from '../../modules/triggers/trigger.schemas.js';
import { findTrigger, listTriggers, toTriggerView } from '../../modules/triggers/trigger.repository.js';
import { changeTrigger, createTrigger, deleteTrigger } from '../../modules/triggers/trigger.service.js';
import { fireTrigger } from '../../modules/triggers/fire.service.js';
import { triggerRunStatus } from '../../modules/runs/run.repository.js';
import { toCreatedRun } from '../../modules/runs/run.view.js';
import { notFound } from '../../lib/errors.js';
import { RUN_STATUSES } from '../../engine/run-status.js';
import { answerCreate, CREATE_KEY_DESCRIPTION, IdempotencyKeyHeaders, idempotencyKeyHeader } from '../idempotency-header.js';

const TriggerParams = IdParams('triggerId');

const CreatedRun = named('CreatedRun', Type.Object({
  runId: Uuid,
  sourceId: Uuid,
  triggerId: Uuid,
  idempotencyKey: Nullable(Type.String()),
  automationStatus: AutomationStatus,
  createdAt: Timestamp,
}));

const TriggerStatus = Type.Object({
  ...Object.fromEntries(RUN_STATUSES.map((status) => [status, Type.Integer()])),
  recentRuns: Type.Array(
    Type.Object({ runId: Uuid, name: Type.String(), automationStatus: AutomationStatus, createdAt: Timestamp }),
  ),
});

export function registerTriggerRoutes(api: Api, container: Container): void {
  const now = () => container.clock.now();
  const tags = ['Triggers'];
  /** The trigger as it is now (a GET, and the replay of a keyed create); 404 when it is gone. */
  const currentTrigger = async (workspaceId: string, triggerId: string) => {
    const row = await findTrigger(container.db, workspaceId, triggerId);
    if (!row) throw notFound('trigger');
    return toTriggerView(row);
  };

  api.post(
    '/v1/triggers',
    {
      config: { scope: 'triggers:write' },
      schema: {
        tags,
        operationId: 'createTrigger',
        summary: 'Create a trigger',
        description: CREATE_KEY_DESCRIPTION,
        body: CreateTriggerBody,
        headers: IdempotencyKeyHeaders,
        response: { 200: TriggerView, 201: TriggerView, ...commonErrors, 409: ErrorBody },
      },
    },
    async (request, reply) =>
      answerCreate(
        request,
        reply,
        container.db,
        'trigger',
        (createKey) => createTrigger(container.db, request.ctx, request.body, now(), createKey),
        (triggerId) => currentTrigger(request.ctx.workspaceId, triggerId),
      ),
  );

  api.get(
    '/v1/triggers',
    {
      config: { scope: 'triggers:read' },
      schema: { tags, operationId: 'listTriggers', summary: 'List triggers', querystring: ListTriggersQuery, response: { 200: ListEnvelope(TriggerView), ...commonErrors } },
    },
    async (request) => listTriggers(container.db, request.ctx.workspaceId, { ...request.query, limit: request.query.limit ?? 25 }),
  );

  api.get(
    '/v1/triggers/:triggerId',
    {
      config: { scope: 'triggers:read' },
      schema: { tags, operationId: 'getTrigger', summary: 'Get a trigger', params: TriggerParams, response: { 200: TriggerView, ...commonErrors } },
    },
    async (request) => currentTrigger(request.ctx.workspaceId, request.params.triggerId),
  );

  api.patch(
    '/v1/triggers/:triggerId',
    {
      config: { scope: 'triggers:write' },
      schema: {
        tags,
        operationId: 'updateTrigger',
        summary: 'Update a trigger (partial; type cannot change)',
        params: TriggerParams,
        body: UpdateTriggerBody,
        response: { 200: TriggerView, ...commonErrors },
      },
    },
    async (request) => changeTrigger(container.db, request.ctx, request.params.triggerId, request.body, now()),
  );

  api.delete(
    '/v1/triggers/:triggerId',
    {
      config: { scope: 'triggers:write' },
      schema: { tags, operationId: 'deleteTrigger', summary: 'Delete a trigger (its runs are kept)', params: TriggerParams, response: { 204: Type.Null(), ...commonErrors } },
    },
    async (request, reply) => {
      await deleteTrigger(container.db, request.ctx, request.params.triggerId, now());
      return reply.code(204).send(null);
    },
  );

  api.post(
    '/v1/triggers/:triggerId',
    {
      config: { scope: 'runs:write' },
      schema: {
        tags,
        operationId: 'fireTrigger',
        summary: 'Fire a web trigger: copy its blueprint into a new run',
        description:
          'Send `Idempotency-Key` (header, or `idempotencyKey` in the body; the header wins). The same key and ' +
          'body answer the original run with 200 and `Idempotent-Replayed: true`; the same key with another body is 409.',
        params: TriggerParams,
        body: FireBody,
        [BODY_OPTIONAL]: true,
        headers: IdempotencyKeyHeaders,
        response: { 200: CreatedRun, 201: CreatedRun, ...commonErrors, 409: ErrorBody },
      },
      // No body at all is a fire without payload.
      preValidation: async (request) => {
        if (request.body === undefined) request.body = {};
      },
    },
    async (request, reply) => {
      const result = await fireTrigger(
        { db: container.db, runCreator: container.runCreator, triggers: container.triggersForFire, now },
        request.ctx,
        request.params.triggerId,
        {
          payload: request.body.payload,
          autoStart: request.body.autoStart,
          bodyKey: request.body.idempotencyKey,
          headerKey: idempotencyKeyHeader(request),
        },
      );
      if (result.replayed) reply.header('Idempotent-Replayed', 'true');
      return reply.code(result.replayed ? 200 : 201).send(toCreatedRun(result.run));
    },
  );

  api.get(
    '/v1/triggers/:triggerId/status',
    {
      config: { scope: 'runs:read' },
      schema: { tags, operationId: 'getTriggerStatus', summary: 'Aggregate run status of a trigger', params: TriggerParams, response: { 200: TriggerStatus, ...commonErrors } },
    },
    async (request) => {
      const { workspaceId } = request.ctx;
      // Deleted triggers keep their runs, so their status stays readable.
      const exists = await container.db
        .selectFrom('triggers')
        .select('id')
        .where('workspace_id', '=', workspaceId)
        .where('id', '=', request.params.triggerId)
        .executeTakeFirst();
      if (!exists) throw notFound('trigger');
      const status = await triggerRunStatus(container.db, workspaceId, request.params.triggerId);
      return { ...status.counts, recentRuns: status.recentRuns };
    },
  );
}
