/**
 * The executor: pure functions from (graph, engine state, now, what holds) to the next state and
 * the next move. No database, no clock, no network: the worker does the I/O around it, and the
 * unit tests drive it alone.
 *
 * Routing (DESIGN §6):
 * - start and action nodes follow EVERY outgoing link whose `when` holds (parallel branches);
 *   a decision node follows the FIRST that holds, in link order; none holding errors the run
 *   at that node.
 * - Each link is decided once: `taken` or `dead`. A node becomes active when all its incoming
 *   links are decided and at least one was taken: a join waits for every branch that can still
 *   reach it. When all are dead the node is skipped and its outgoing links die in turn ("dead
 *   path elimination"), so a join never waits for a branch that was not taken. Graphs are
 *   acyclic (checked at import), so every link is decided at most once and this terminates.
 * - An end node is done when reached; a stop node stops the run. When no node is active or
 *   waiting, every path has reached its end and the run is completed.
 */
import type { Automation } from '../modules/blueprints/blueprint.js';
import type { EngineState, NodeProgress, OpenStep, RunEnd } from './engine-state.js';
import type { GraphIndex } from './graph-index.js';

/** Whether a link's `when` holds. May throw (an expression that fails at run time). */
export type LinkCheck = (when: string) => boolean;

/** An event recorded for a node's wait_for_event. */
export interface ReceivedEvent {
  at: string;
  event: unknown;
}

export type Move =
  /** Run the node's next automation; `redo` is a call whose earlier attempt never recorded its outcome. */
  | { kind: 'run'; nodeId: string; automation: Automation; attempt: number; redo?: OpenStep }
  /** Finish a wait: its timer ended, its event came, or it timed out. */
  | {
      kind: 'wake';
      nodeId: string;
      automation: Automation;
      open: OpenStep;
      reason: 'elapsed' | 'event' | 'timeout';
      received?: ReceivedEvent;
    }
  /** Nothing to do before `until` (every live branch is waiting). */
  | { kind: 'sleep'; until: string }
  | { kind: 'end'; end: RunEnd };

export interface PlanInput {
  now: string;
  holds: LinkCheck;
  /** Events received for waiting nodes, by node id. */
  events?: ReadonlyMap<string, ReceivedEvent>;
}

/** A wait without a timeout sleeps until an event; this is "never" in ISO text order. */
export const NEVER = '9999-12-31T23:59:59.999Z';

/** The state of a run that has not taken a step yet: its start node is active. */
export function startState(graph: GraphIndex, at: string): EngineState {
  return { v: 1, nodes: { [graph.startId]: { state: 'active', next: 0, startedAt: at } }, links: {}, steps: {}, vars: {} };
}

/** Settles routing, then picks the next move. */
export function plan(graph: GraphIndex, state: EngineState, input: PlanInput): { state: EngineState; move: Move } {
  const settled = settle(graph, state, input.now, input.holds);
  return { state: settled, move: nextMove(graph, settled, input.now, input.events ?? new Map()) };
}

/**
 * Routes every active node whose automations are all done, and activates or skips the nodes
 * behind it, until nothing changes. The input is never modified: when there is something to
 * route, the answer is a new state; when there is not (the last write left the state routed,
 * as it does on most turns of a run of several steps), it is the input itself.
 */
function settle(graph: GraphIndex, state: EngineState, now: string, holds: LinkCheck): EngineState {
  if (state.end || !graph.order.some((nodeId) => isRoutable(graph, nodeId, state.nodes[nodeId]))) return state;
  const next = cloneState(state);
  route(graph, next, now, holds);
  return next;
}

/** settle's work on a state the caller owns (a fresh copy), changed in place. */
function route(graph: GraphIndex, state: EngineState, now: string, holds: LinkCheck): void {
  let changed = true;
  while (changed && !state.end) {
    changed = false;
    for (const nodeId of graph.order) {
      const progress = state.nodes[nodeId];
      if (!isRoutable(graph, nodeId, progress)) continue;
      changed = true;
      finishNode(graph, state, nodeId, progress, now, holds);
      if (state.end) break;
    }
  }
}

/** An active node whose automations are all done, with no step open: its links are decided next. */
function isRoutable(graph: GraphIndex, nodeId: string, progress: NodeProgress | undefined): progress is NodeProgress {
  return progress !== undefined && progress.state === 'active' && !progress.open && progress.next >= graph.node(nodeId).automations.length;
}

function finishNode(
  graph: GraphIndex,
  state: EngineState,
  nodeId: string,
  progress: NodeProgress,
  now: string,
  holds: LinkCheck,
): void {
  const node = graph.node(nodeId);
  if (node.kind === 'end') {
    Object.assign(progress, { state: 'done', finishedAt: now });
    return;
  }
  if (node.kind === 'stop') {
    Object.assign(progress, { state: 'done', finishedAt: now });
    state.end = { status: 'stopped', nodeId };
    return;
  }
  const outgoing = graph.outgoing(nodeId);
  let taken: number[];
  try {
    taken = chooseLinks(graph, outgoing, node.kind === 'decision', holds);
  } catch (error) {
    failNode(state, progress, nodeId, now, (error as Error).message);
    return;
  }
  if (taken.length === 0) {
    const message =
      outgoing.length === 0
        ? `${node.kind} node "${nodeId}" has no outgoing link`
        : `${node.kind} node "${nodeId}": no outgoing link holds`;
    failNode(state, progress, nodeId, now, message);
    return;
  }
  Object.assign(progress, { state: 'done', finishedAt: now });
  for (const index of outgoing) state.links[index] = taken.includes(index) ? 'taken' : 'dead';
  reach(graph, state, outgoing.map((index) => graph.links[index].to), now);
}

/** Parallel nodes take every link that holds; a decision only the first. */
function chooseLinks(graph: GraphIndex, outgoing: number[], firstOnly: boolean, holds: LinkCheck): number[] {
  const taken: number[] = [];
  for (const index of outgoing) {
    const link = graph.links[index];
    let ok: boolean;
    try {
      ok = link.when === undefined || holds(link.when);
    } catch (error) {
      throw new Error(`the condition of the link to "${link.to}" failed: ${(error as Error).message}`);
    }
    if (!ok) continue;
    taken.push(index);
    if (firstOnly) break;
  }
  return taken;
}

/**
 * Looks at nodes whose incoming links may now all be decided: activates them when one was
 * taken, or skips them and kills their outgoing links when none was (dead path elimination).
 */
function reach(graph: GraphIndex, state: EngineState, targets: string[], now: string): void {
  const stack = [...targets].reverse();
  while (stack.length > 0) {
    const nodeId = stack.pop()!;
    if (state.nodes[nodeId]) continue;
    const incoming = graph.incoming(nodeId).map((index) => state.links[index]);
    if (incoming.some((decided) => decided === undefined)) continue;
    if (incoming.includes('taken')) {
      state.nodes[nodeId] = { state: 'active', next: 0, startedAt: now };
      continue;
    }
    state.nodes[nodeId] = { state: 'skipped', next: 0 };
    const outgoing = graph.outgoing(nodeId);
    for (const index of outgoing) state.links[index] = 'dead';
    for (const index of [...outgoing].reverse()) stack.push(graph.links[index].to);
  }
}

function failNode(state: EngineState, progress: NodeProgress, nodeId: string, now: string, message: string): void {
  Object.assign(progress, { state: 'failed', finishedAt: now });
  state.end = { status: 'errored', nodeId, message };
}

/**
 * The next thing to do, in node order: an automation of an active node, or a wait that is due.
 * With neither, the run sleeps until its earliest wait is due, or is completed when nothing is
 * active or waiting.
 */
function nextMove(graph: GraphIndex, state: EngineState, now: string, events: ReadonlyMap<string, ReceivedEvent>): Move {
  if (state.end) return { kind: 'end', end: state.end };
  let earliest: string | null = null;
  for (const nodeId of graph.order) {
    const progress = state.nodes[nodeId];
    if (!progress) continue;
    const automations = graph.node(nodeId).automations;
    if (progress.state === 'active' && progress.next < automations.length) {
      const automation = automations[progress.next];
      return progress.open
        ? { kind: 'run', nodeId, automation, attempt: progress.open.attempt + 1, redo: progress.open }
        : { kind: 'run', nodeId, automation, attempt: 1 };
    }
    if (progress.state !== 'waiting' || !progress.open) continue;
    const open = progress.open;
    const automation = automations[progress.next];
    const received = events.get(nodeId);
    if (open.event !== undefined && received) return { kind: 'wake', nodeId, automation, open, reason: 'event', received };
    const dueAt = open.dueAt ?? NEVER;
    if (dueAt <= now) {
      return { kind: 'wake', nodeId, automation, open, reason: open.event !== undefined ? 'timeout' : 'elapsed' };
    }
    if (earliest === null || dueAt < earliest) earliest = dueAt;
  }
  if (earliest !== null) return { kind: 'sleep', until: earliest };
  return { kind: 'end', end: { status: 'completed' } };
}

/** Records that a step started: a wait makes its node `waiting`; a call stays `active`. */
export function beginStep(state: EngineState, nodeId: string, open: OpenStep): EngineState {
  const next = cloneState(state);
  const progress = next.nodes[nodeId];
  progress.open = open;
  if (open.dueAt !== undefined) progress.state = 'waiting';
  return next;
}

/** What a finished step leaves behind. */
export interface StepResult {
  outcome: string;
  output: unknown;
  vars?: Record<string, unknown>;
  /** The step ended the run (fail, stop, cancel, or an automation that failed for good). */
  end?: RunEnd;
}

/**
 * `finishStep`, then `plan` over its answer, with one copy of the state instead of two: the
 * copy finishStep makes is routed in place. `holdsOf` builds the link check from the finished
 * state (conditions see the step's result and variables; routing changes neither).
 */
export function planAfterStep(
  graph: GraphIndex,
  state: EngineState,
  step: { nodeId: string; automationId: string; result: StepResult; at: string },
  holdsOf: (finished: EngineState) => LinkCheck,
): { state: EngineState; move: Move } {
  const next = finishStep(state, step.nodeId, step.automationId, step.result, step.at);
  if (!next.end) route(graph, next, step.at, holdsOf(next));
  return { state: next, move: nextMove(graph, next, step.at, new Map()) };
}

/** Records a finished step: its result in `steps`, its variables, and the node moves on. */
export function finishStep(
  state: EngineState,
  nodeId: string,
  automationId: string,
  result: StepResult,
  at: string,
): EngineState {
  const next = cloneState(state);
  const progress = next.nodes[nodeId];
  delete progress.open;
  progress.state = 'active';
  progress.next += 1;
  next.steps[automationId] = { outcome: result.outcome, output: result.output };
  if (result.vars) Object.assign(next.vars, result.vars);
  if (result.end) {
    next.end = result.end;
    Object.assign(progress, { state: result.end.status === 'errored' ? 'failed' : 'done', finishedAt: at });
  }
  return next;
}

/**
 * A copy the executor may change: the maps and node records are copied, step outputs and
 * variable values are shared (nothing ever changes them in place). structuredClone of the
 * whole state showed up at 10% of a one-node run's CPU; object spreads of these maps (keyed by
 * node ids, link indexes and automation ids) took about twice the time of the loops below.
 */
function cloneState(state: EngineState): EngineState {
  const nodes: Record<string, NodeProgress> = {};
  for (const id in state.nodes) nodes[id] = Object.assign({}, state.nodes[id]);
  const next: EngineState = { v: state.v, nodes, links: copyMap(state.links), steps: copyMap(state.steps), vars: copyMap(state.vars) };
  if (state.end !== undefined) next.end = state.end;
  return next;
}

function copyMap<T>(map: Record<string, T>): Record<string, T> {
  const copy: Record<string, T> = {};
  for (const key in map) copy[key] = map[key];
  return copy;
}
