import { Type } from '@sinclair/typebox';
import type { Api } from '../types.js';
import type { Container } from '../../container.js';
import { IdParams, ListEnvelope, commonErrors, ErrorBody, Uuid, Timestamp, Nullable, PageLimit, CursorParam, EmptyBody, noBodyIsEmpty, AutomationStatus, BODY_OPTIONAL, named } from '../schemas/common.js';
import { findRun, listRuns } from '../../modules/runs/run.repository.js';
import { notFound } from '../../lib/errors.js';
import { applyRunAction, type RunAction } from '../../engine/run-actions.js';
import { auditErrorsShown } from '../../modules/runs/run-error-audit.js';

export const RunSchema = named('Run', Type.Object({
  runId: Uuid,
  sourceId: Uuid,
  triggerId: Uuid,
  idempotencyKey: Nullable(Type.String()),
  automationStatus: AutomationStatus,
  createdAt: Timestamp,
  updatedAt: Timestamp,
  error: Nullable(Type.Object({ message: Type.String(), nodeId: Type.String() })),
}));

const ListRunsQuery = Type.Object(
  {
    triggerId: Type.Optional(Uuid),
    idempotencyKey: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    status: Type.Optional(AutomationStatus),
    limit: Type.Optional(PageLimit),
    cursor: Type.Optional(CursorParam),
  },
  { additionalProperties: false },
);

const RunParams = IdParams('runId');

const ERROR_READ_NOTE =
  "An errored run's `error.message` may hold health data (a fail automation's message with its placeholders filled): each errored run answered is audited as run.error.read.";

const ACTION_SUMMARY: Record<RunAction, string> = {
  start: 'Start a queued run (it becomes scheduled)',
  pause: 'Pause a run between steps',
  resume: 'Resume a paused run where it stopped',
  cancel: 'Cancel a run',
};

export function registerRunRoutes(api: Api, container: Container): void {
  const tags = ['Runs'];

  api.get(
    '/v1/runs',
    {
      config: { scope: 'runs:read' },
      schema: {
        tags,
        operationId: 'listRuns',
        summary: 'List runs, newest first',
        description: ERROR_READ_NOTE,
        querystring: ListRunsQuery,
        response: { 200: ListEnvelope(RunSchema), ...commonErrors },
      },
    },
    async (request) => {
      const page = await listRuns(container.db, request.ctx.workspaceId, { ...request.query, limit: request.query.limit ?? 25 });
      await auditErrorsShown(container.db, request.ctx, container.clock.now().toISOString(), page.data);
      return page;
    },
  );

  api.get(
    '/v1/runs/:runId',
    {
      config: { scope: 'runs:read' },
      schema: { tags, operationId: 'getRun', summary: 'Get a run', description: ERROR_READ_NOTE, params: RunParams, response: { 200: RunSchema, ...commonErrors } },
    },
    async (request) => {
      const run = await findRun(container.db, request.ctx.workspaceId, request.params.runId);
      if (!run) throw notFound('run');
      await auditErrorsShown(container.db, request.ctx, container.clock.now().toISOString(), [run]);
      return run;
    },
  );

  for (const action of ['start', 'pause', 'resume', 'cancel'] as const) {
    api.post(
      `/v1/runs/:runId/${action}`,
      {
        config: { scope: 'runs:write' },
        schema: {
          tags,
          operationId: `${action}Run`,
          summary: ACTION_SUMMARY[action],
          params: RunParams,
          body: EmptyBody,
          [BODY_OPTIONAL]: true,
          response: { 200: RunSchema, ...commonErrors, 409: ErrorBody },
        },
        preValidation: noBodyIsEmpty,
      },
      async (request) => {
        const result = await applyRunAction(
          container.db,
          request.ctx,
          request.params.runId,
          action,
          () => container.clock.now(),
        );
        if (result.changed && (action === 'start' || action === 'resume')) container.signals.notify('runs');
        return result.run;
      },
    );
  }
}
