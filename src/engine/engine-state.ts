/**
 * The persisted progress of one run through its frozen graph (`runs.engine_state`, JSON).
 * Plain data only: the executor reads and returns it, the worker stores it with every guarded
 * write, and the graph view reads node states from it.
 */

/** How far a node has come. `pending` nodes are simply absent from `EngineState.nodes`. */
export type NodeState = 'pending' | 'active' | 'waiting' | 'done' | 'skipped' | 'failed';

/**
 * A step that was recorded as started and has not recorded its outcome: a wait in progress, or
 * (after a worker was lost mid-call) an `http`/`start_pathway` call whose outcome is unknown.
 */
export interface OpenStep {
  stepId: string;
  automationId: string;
  attempt: number;
  startedAt: string;
  /** Waits only: when the timer ends or the event wait times out; null = no timeout. */
  dueAt?: string | null;
  /** wait_for_event only: the event awaited. */
  event?: string;
}

export interface NodeProgress {
  state: Exclude<NodeState, 'pending'>;
  /** Index of the node's next automation to run. */
  next: number;
  startedAt?: string;
  finishedAt?: string;
  open?: OpenStep;
}

/** What `steps.<automationId>` holds in the run context. */
export interface StepRecord {
  outcome: string;
  output: unknown;
}

/** How a run ends. */
export type RunEnd =
  | { status: 'completed' }
  | { status: 'stopped'; nodeId: string }
  | { status: 'canceled'; nodeId: string }
  | { status: 'errored'; nodeId: string; message: string };

export interface EngineState {
  v: 1;
  nodes: Record<string, NodeProgress>;
  /** Decided links, by their index in the blueprint's `links`. */
  links: Record<string, 'taken' | 'dead'>;
  steps: Record<string, StepRecord>;
  vars: Record<string, unknown>;
  /** Set once the run's end is decided; the worker then writes the matching status. */
  end?: RunEnd;
}

export function parseEngineState(text: string | null): EngineState | null {
  if (text === null || text === '') return null;
  const parsed = JSON.parse(text) as EngineState;
  return parsed.v === 1 ? parsed : null;
}

/** The node state the graph view shows (absent = pending). */
export function nodeStateOf(state: EngineState | null, nodeId: string): NodeState {
  return state?.nodes[nodeId]?.state ?? 'pending';
}

/** Event waits in progress (the worker reads their received events only when there are some). */
export function hasEventWaits(state: EngineState): boolean {
  return Object.values(state.nodes).some((node) => node.state === 'waiting' && node.open?.event !== undefined);
}
