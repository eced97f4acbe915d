/**
 * What the API shows of execution (DESIGN §6, additive): a run's step timeline, and a diagram's
 * graph in the blueprint file format, with each node's state and times for an instance.
 */
import type { DbOrTx } from '../storage/database.js';
import { parseJson } from '../lib/json.js';
import { decodeCursor, encodeCursor } from '../lib/cursor.js';
import { findDiagram, loadBlueprintGraph } from '../modules/diagrams/diagram.repository.js';
import { parseEngineState, nodeStateOf, type NodeState } from './engine-state.js';
import { listStepRows } from './sql/step-rows.js';
import { isTerminal } from './run-status.js';

export interface StepView {
  stepId: string;
  nodeId: string;
  automationId: string;
  type: string;
  attempt: number;
  startedAt: string;
  finishedAt: string | null;
  outcome: string | null;
  output: unknown;
  error: string | null;
}

/** The record a run is about, as search shows it (a Patient, a Practitioner, or a run's Pathway). */
export interface SubjectRef {
  recordId: string;
  resourceType: string;
  extId: string;
  name: string;
}

export interface RunTimeline {
  /** The Pathway's patient record, when the run has one: whose data the steps hold. */
  subjectRecordId: string | null;
  /** That record, while it exists (a deleted Patient leaves search, and its runs keep the id only). */
  subject: SubjectRef | null;
  /** One page of its steps, in the order they started. */
  steps: StepView[];
  /** Where the next page starts; null on the last page. */
  nextCursor: string | null;
}

/**
 * The name a run's step cursors carry (lib/cursor.ts): the run's own, so that a cursor of one
 * run's steps is refused on another's (it would answer a slice of that run as if it were the
 * next page), like a cursor of any other list.
 */
const stepsList = (runId: string): string => `run-steps:${runId}`;

/**
 * One page of the steps of a run in the workspace, in the order they started, and the run's
 * subject; null when there is no such run. Oldest first, keyset-paged on the step id (UUID v7,
 * unique): a step recorded while a client pages comes on a later page, and none is skipped or
 * repeated. A cursor that is not one of this run's steps lists is refused (400 invalid_cursor)
 * before anything is read.
 */
export async function runTimeline(
  db: DbOrTx,
  workspaceId: string,
  runId: string,
  page: { limit: number; cursor?: string },
): Promise<RunTimeline | null> {
  const afterId = page.cursor === undefined ? undefined : decodeCursor(page.cursor, stepsList(runId));
  // The subject's record with the run: it may be gone (a deleted Patient leaves search).
  const run = await db
    .selectFrom('runs')
    .leftJoin('records as subject', (join) =>
      join.onRef('subject.id', '=', 'runs.subject_record_id').onRef('subject.workspace_id', '=', 'runs.workspace_id'),
    )
    .select(['runs.subject_record_id', 'subject.id as record_id', 'subject.resource_type', 'subject.ext_id', 'subject.name'])
    .where('runs.workspace_id', '=', workspaceId)
    .where('runs.id', '=', runId)
    .executeTakeFirst();
  if (!run) return null;
  // One row more than the page: whether another page follows.
  const rows = await listStepRows(db, runId, { afterId, limit: page.limit + 1 });
  const more = rows.length > page.limit;
  const steps = rows.slice(0, page.limit).map((row) => ({
    stepId: row.id,
    nodeId: row.node_id,
    automationId: row.automation_id,
    type: row.automation_type,
    attempt: row.attempt,
    startedAt: row.started_at,
    finishedAt: row.finished_at,
    outcome: row.outcome,
    output: parseJson<unknown>(row.output, null),
    error: row.error,
  }));
  const subject =
    run.record_id !== null ? { recordId: run.record_id, resourceType: run.resource_type!, extId: run.ext_id!, name: run.name! } : null;
  const nextCursor = more ? encodeCursor(steps[steps.length - 1].stepId, stepsList(runId)) : null;
  return { subjectRecordId: run.subject_record_id, subject, steps, nextCursor };
}

interface StoredNode {
  id: string;
  [field: string]: unknown;
}

interface StoredGraph {
  name: string;
  tags?: string[];
  swimlanes?: unknown[];
  nodes: StoredNode[];
  links: unknown[];
}

/**
 * A node's state as the graph shows it: the engine's, except that a node still `active` or
 * `waiting` when its run ended (canceled mid-wait or mid-call, or stopped while another branch
 * waited) shows `interrupted`, finished when the run ended. The engine leaves such nodes as they
 * were (the run's end is what closed them), and a graph that kept them `waiting` read as a run
 * still waiting.
 */
export type NodeView = NodeState | 'interrupted';

/** What a waiting node waits for: its automation, when it is due (null: no timeout), the event awaited. */
export interface WaitView {
  automationId: string;
  dueAt: string | null;
  event?: string;
}

export interface GraphView {
  name: string;
  tags: string[];
  swimlanes: unknown[];
  nodes: (StoredNode & { state?: NodeView; startedAt?: string | null; finishedAt?: string | null; wait?: WaitView })[];
  links: unknown[];
}

/** A diagram's graph; for an instance, also whose run it is (the reader audits it: node states tell which branch ran). */
export interface DiagramGraph {
  graph: GraphView;
  /** Set for an instance: the run's patient record, or null when the run has none. */
  instance: { subjectRecordId: string | null } | null;
}

/**
 * A blueprint's current version, or an instance's frozen version with node states. Null when
 * the id is not a diagram of the workspace.
 */
export async function diagramGraph(db: DbOrTx, workspaceId: string, id: string): Promise<DiagramGraph | null> {
  const diagram = await findDiagram(db, workspaceId, id);
  if (!diagram) return null;
  const blueprintId = diagram.type === 'instance' ? diagram.sourceId : diagram.id;
  if (!blueprintId) return null;
  const stored = (await loadBlueprintGraph(db, blueprintId, diagram.version)) as StoredGraph | null;
  if (!stored) return null;
  const graph: GraphView = {
    name: stored.name,
    tags: stored.tags ?? [],
    swimlanes: stored.swimlanes ?? [],
    nodes: stored.nodes,
    links: stored.links,
  };
  if (diagram.type !== 'instance') return { graph, instance: null };
  const run = await db
    .selectFrom('runs')
    .select(['engine_state', 'automation_status', 'updated_at', 'subject_record_id'])
    .where('id', '=', id)
    .executeTakeFirst();
  const state = parseEngineState(run?.engine_state ?? null);
  const endedAt = run && isTerminal(run.automation_status) ? run.updated_at : null;
  const withStates: GraphView = {
    ...graph,
    nodes: stored.nodes.map((node) => {
      const progress = state?.nodes[node.id];
      const engineState = nodeStateOf(state, node.id);
      const cutShort = endedAt !== null && (engineState === 'active' || engineState === 'waiting');
      const open = engineState === 'waiting' && !cutShort ? progress?.open : undefined;
      return {
        ...node,
        state: cutShort ? 'interrupted' : engineState,
        startedAt: progress?.startedAt ?? null,
        finishedAt: cutShort ? endedAt : (progress?.finishedAt ?? null),
        // When a waiting run goes on: otherwise only the store knew (a paused run's timer holds).
        ...(open ? { wait: { automationId: open.automationId, dueAt: open.dueAt ?? null, ...(open.event !== undefined ? { event: open.event } : {}) } } : {}),
      };
    }),
  };
  return { graph: withStates, instance: { subjectRecordId: run?.subject_record_id ?? null } };
}
