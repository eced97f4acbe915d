/**
 * Seeing execution (DESIGN §6, additive): a run's step timeline and a diagram's graph, with node
 * states for an instance. Unknown ids and other workspaces' ids answer 404.
 */
import { Type, type Static } from '@sinclair/typebox';
import type { Api } from '../types.js';
import type { Container } from '../../container.js';
import { IdParams, commonErrors, CursorParam, Nullable, Timestamp, Uuid, named } from '../schemas/common.js';
import { notFound } from '../../lib/errors.js';
import { diagramGraph, runTimeline } from '../../engine/run-views.js';
import { recordAudit } from '../../modules/audit/audit.repository.js';

/** The engine's node states, and `interrupted`: active or waiting when the run ended (run-views.ts). */
const NODE_STATES = ['pending', 'active', 'waiting', 'done', 'skipped', 'failed', 'interrupted'] as const;

const StepSchema = named('Step', Type.Object({
  stepId: Uuid,
  nodeId: Type.String(),
  automationId: Type.String(),
  type: Type.String({ description: 'automation type' }),
  attempt: Type.Integer({ minimum: 1, description: 'more than 1 when an earlier attempt never recorded its outcome' }),
  startedAt: Timestamp,
  finishedAt: Nullable(Timestamp),
  outcome: Nullable(Type.String({ description: 'ok, elapsed, event, timeout, failed, stopped, canceled, interrupted; null while running or waiting' })),
  output: Type.Unknown(),
  error: Nullable(Type.String()),
}));

const SubjectSchema = named('RunSubject', Type.Object(
  {
    recordId: Uuid,
    resourceType: Type.String({ description: 'Patient, Practitioner, or Pathway (a run started for another run)' }),
    extId: Type.String({ description: "the resource's id in the system that sent it" }),
    name: Type.String(),
  },
  { description: 'the record the run is about (its subject); null when it has none, or the record left search' },
));
const TimelineSchema = named('StepTimeline', Type.Object({
  runId: Uuid,
  subject: Nullable(SubjectSchema),
  steps: Type.Array(StepSchema, { description: 'one page of steps, in the order they started' }),
  nextCursor: Nullable(Type.String({ description: 'pass as `cursor` for the next page; null on the last page' })),
}));

/**
 * A run may take ~10,000 steps, each output up to 4 MiB: the timeline is paged (keyset, oldest
 * first), 100 steps by default and at most 500, more than the lists' 25 and 100 since a step is
 * small as a rule and a client reading a timeline wants all of it (docs/decisions.md).
 */
const StepsQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
    cursor: Type.Optional(CursorParam),
  },
  { additionalProperties: false },
);

const AutomationSchema = Type.Object({ id: Type.String(), type: Type.String(), with: Type.Optional(Type.Unknown()) });

const GraphNodeSchema = named('GraphNode', Type.Object({
  id: Type.String(),
  kind: Type.String(),
  name: Type.Optional(Type.String()),
  swimlaneId: Type.Optional(Type.String()),
  automations: Type.Optional(Type.Array(AutomationSchema)),
  state: Type.Optional(Type.Union(NODE_STATES.map((state) => Type.Literal(state)))),
  startedAt: Type.Optional(Nullable(Timestamp)),
  finishedAt: Type.Optional(Nullable(Timestamp)),
  wait: Type.Optional(
    Type.Object(
      {
        automationId: Type.String(),
        dueAt: Nullable(Timestamp),
        event: Type.Optional(Type.String()),
      },
      { description: 'a waiting node: its wait or wait_for_event automation, when it is due (null: no timeout), the event awaited' },
    ),
  ),
}));

const GraphSchema = named('Graph', Type.Object({
  name: Type.String(),
  tags: Type.Array(Type.String()),
  swimlanes: Type.Array(Type.Object({ id: Type.String(), name: Type.String() })),
  nodes: Type.Array(GraphNodeSchema),
  links: Type.Array(Type.Object({ from: Type.String(), to: Type.String(), when: Type.Optional(Type.String()) })),
}));

export function registerEngineRoutes(api: Api, container: Container): void {
  api.get(
    '/v1/runs/:runId/steps',
    {
      config: { scope: 'runs:read' },
      schema: {
        tags: ['Runs'],
        operationId: 'listRunSteps',
        summary: "A run's subject and its step timeline, in the order the steps started, a page at a time",
        description:
          'Which record the run is about (`subject`: the patient of an event or a cohort tick, or the record a fire named) and ' +
          'what its automations read and answered: health data, so each read (each page) is audited as run.steps.read (the run, its patient record, the key). ' +
          'Paged oldest first: `limit` steps (default 100, at most 500) and `nextCursor`, to pass as `cursor` for the next page (null on the last). ' +
          'Steps recorded while a client pages come on later pages; none is skipped or repeated.',
        params: IdParams('runId'),
        querystring: StepsQuery,
        response: { 200: TimelineSchema, ...commonErrors },
      },
    },
    async (request) => {
      const { runId } = request.params;
      const { limit = 100, cursor } = request.query;
      const timeline = await runTimeline(container.db, request.ctx.workspaceId, runId, { limit, ...(cursor !== undefined ? { cursor } : {}) });
      if (!timeline) throw notFound('run');
      // Steps hold what automations read and answered (lab values, a partner's reply): health
      // data, so who read whose is recorded before it is handed out, page by page.
      const { subjectRecordId, subject, steps, nextCursor } = timeline;
      await recordAudit(container.db, request.ctx, container.clock.now().toISOString(), [
        {
          action: 'run.steps.read',
          resourceType: 'run',
          resourceId: runId,
          details: { subjectRecordId, steps: steps.length, cursor: cursor !== undefined },
        },
      ]);
      return { runId, subject, steps, nextCursor };
    },
  );

  api.get(
    '/v1/diagrams/:id/graph',
    {
      config: { scope: 'diagrams:read' },
      schema: {
        tags: ['Diagrams'],
        operationId: 'getDiagramGraph',
        summary: 'The graph of a diagram in the blueprint file format; for an instance, each node with its state and times',
        description:
          "An instance's node states tell which branches its run took (a decision on a lab value): each read of an instance's graph " +
          'is audited as run.graph.read (the run, its patient record, the key), like its step timeline. A blueprint\'s graph is not.',
        params: IdParams('id'),
        response: { 200: GraphSchema, ...commonErrors },
      },
    },
    async (request) => {
      const found = await diagramGraph(container.db, request.ctx.workspaceId, request.params.id);
      if (!found) throw notFound('diagram');
      if (found.instance) {
        // Which nodes ran, were skipped or wait says which way the run's data went (a security
        // review): recorded before it is handed out, as for the step timeline.
        await recordAudit(container.db, request.ctx, container.clock.now().toISOString(), [
          { action: 'run.graph.read', resourceType: 'run', resourceId: request.params.id, details: { subjectRecordId: found.instance.subjectRecordId } },
        ]);
      }
      // The stored file was validated at import; the schema serialises exactly its fields.
      return found.graph as Static<typeof GraphSchema>;
    },
  );
}
