import { describe, expect, it } from 'vitest';
import { validateBlueprint } from '../../src/modules/blueprints/blueprint.validate.js';
import { indexGraph, type GraphIndex } from '../../src/engine/graph-index.js';
import { beginStep, finishStep, NEVER, plan, startState, type Move } from '../../src/engine/executor.js';
import type { EngineState } from '../../src/engine/engine-state.js';

const T0 = '2030-01-01T00:00:00.000Z';
const T1 = '2030-01-01T01:00:00.000Z';

function graphOf(nodes: unknown[], links: unknown[]): GraphIndex {
  return indexGraph(validateBlueprint({ name: 'g', nodes, links }));
}

const set = (id: string) => ({ id, type: 'set', with: { vars: { [id]: 'true' } } });

/** Conditions by their text: tests say which hold. */
const holding = (truths: Record<string, boolean | Error>) => (when: string) => {
  const value = truths[when];
  if (value instanceof Error) throw value;
  return value ?? false;
};

/** Plays a run to its end, finishing every automation with `ok`, and lists the moves. */
function play(graph: GraphIndex, truths: Record<string, boolean | Error> = {}) {
  let state: EngineState = startState(graph, T0);
  const moves: Move[] = [];
  for (let i = 0; i < 100; i++) {
    const next = plan(graph, state, { now: T0, holds: holding(truths) });
    moves.push(next.move);
    state = next.state;
    if (next.move.kind !== 'run') break;
    state = finishStep(state, next.move.nodeId, next.move.automation.id, { outcome: 'ok', output: null }, T0);
  }
  return { state, moves, ran: moves.flatMap((m) => (m.kind === 'run' ? [m.automation.id] : [])), last: moves[moves.length - 1] };
}

describe('executor: routing', () => {
  it('runs a chain in order and completes', () => {
    const graph = graphOf(
      [{ id: 's', kind: 'start' }, { id: 'a', kind: 'action', automations: [set('a1'), set('a2')] }, { id: 'e', kind: 'end' }],
      [{ from: 's', to: 'a' }, { from: 'a', to: 'e' }],
    );
    const { ran, last, state } = play(graph);
    expect(ran).toEqual(['a1', 'a2']);
    expect(last).toEqual({ kind: 'end', end: { status: 'completed' } });
    expect(Object.fromEntries(Object.entries(state.nodes).map(([id, n]) => [id, n.state]))).toEqual({ s: 'done', a: 'done', e: 'done' });
  });

  it('follows every holding link of an action (parallel) and joins them', () => {
    const graph = graphOf(
      [
        { id: 's', kind: 'start' },
        { id: 'fork', kind: 'action', automations: [set('f')] },
        { id: 'left', kind: 'action', automations: [set('l')] },
        { id: 'right', kind: 'action', automations: [set('r')] },
        { id: 'join', kind: 'action', automations: [set('j')] },
        { id: 'e', kind: 'end' },
      ],
      [
        { from: 's', to: 'fork' },
        { from: 'fork', to: 'left' },
        { from: 'fork', to: 'right' },
        { from: 'left', to: 'join' },
        { from: 'right', to: 'join' },
        { from: 'join', to: 'e' },
      ],
    );
    const { ran, last } = play(graph);
    expect(ran).toEqual(['f', 'l', 'r', 'j']);
    expect(last.kind === 'end' && last.end.status).toBe('completed');
  });

  it('a join does not wait for a branch whose condition failed (dead path elimination, through several nodes)', () => {
    const graph = graphOf(
      [
        { id: 's', kind: 'start' },
        { id: 'fork', kind: 'action', automations: [set('f')] },
        { id: 'x1', kind: 'action', automations: [set('x1')] },
        { id: 'x2', kind: 'action', automations: [set('x2')] },
        { id: 'y', kind: 'action', automations: [set('y')] },
        { id: 'join', kind: 'action', automations: [set('j')] },
        { id: 'e', kind: 'end' },
      ],
      [
        { from: 's', to: 'fork' },
        { from: 'fork', to: 'x1', when: 'vars.takeX' },
        { from: 'fork', to: 'y' },
        { from: 'x1', to: 'x2' },
        { from: 'x2', to: 'join' },
        { from: 'y', to: 'join' },
        { from: 'join', to: 'e' },
      ],
    );
    const { ran, state, last } = play(graph, { 'vars.takeX': false });
    expect(ran).toEqual(['f', 'y', 'j']);
    expect(state.nodes.x1.state).toBe('skipped');
    expect(state.nodes.x2.state).toBe('skipped');
    expect(last.kind === 'end' && last.end.status).toBe('completed');
  });

  it('a decision follows the first link that holds, in link order', () => {
    const graph = graphOf(
      [
        { id: 's', kind: 'start' },
        { id: 'd', kind: 'decision' },
        { id: 'a', kind: 'action', automations: [set('a')] },
        { id: 'b', kind: 'action', automations: [set('b')] },
        { id: 'c', kind: 'action', automations: [set('c')] },
        { id: 'e', kind: 'end' },
      ],
      [
        { from: 's', to: 'd' },
        { from: 'd', to: 'a', when: 'vars.no' },
        { from: 'd', to: 'b', when: 'vars.yes' },
        { from: 'd', to: 'c' },
        { from: 'a', to: 'e' },
        { from: 'b', to: 'e' },
        { from: 'c', to: 'e' },
      ],
    );
    const { ran, state } = play(graph, { 'vars.yes': true, 'vars.no': false });
    expect(ran).toEqual(['b']);
    expect([state.nodes.a.state, state.nodes.c.state]).toEqual(['skipped', 'skipped']);
  });

  it('errors at a decision when no link holds, naming the node', () => {
    const graph = graphOf(
      [{ id: 's', kind: 'start' }, { id: 'd', kind: 'decision' }, { id: 'e', kind: 'end' }],
      [{ from: 's', to: 'd' }, { from: 'd', to: 'e', when: 'vars.no' }],
    );
    const { last, state } = play(graph, { 'vars.no': false });
    expect(last).toEqual({ kind: 'end', end: { status: 'errored', nodeId: 'd', message: 'decision node "d": no outgoing link holds' } });
    expect(state.nodes.d.state).toBe('failed');
  });

  it('errors at the node whose link condition throws', () => {
    const graph = graphOf(
      [{ id: 's', kind: 'start' }, { id: 'a', kind: 'action', automations: [set('a')] }, { id: 'e', kind: 'end' }],
      [{ from: 's', to: 'a' }, { from: 'a', to: 'e', when: 'vars.broken' }],
    );
    const { last } = play(graph, { 'vars.broken': new Error('boom') });
    expect(last.kind).toBe('end');
    if (last.kind !== 'end' || last.end.status !== 'errored') throw new Error('expected errored');
    expect(last.end.nodeId).toBe('a');
    expect(last.end.message).toContain('"e"');
    expect(last.end.message).toContain('boom');
  });

  it('a stop node stops the run even while another branch is active', () => {
    const graph = graphOf(
      [
        { id: 's', kind: 'start' },
        { id: 'halt', kind: 'stop' },
        { id: 'slow', kind: 'action', automations: [set('x')] },
        { id: 'e', kind: 'end' },
      ],
      [{ from: 's', to: 'halt' }, { from: 's', to: 'slow' }, { from: 'slow', to: 'e' }],
    );
    const { last } = play(graph);
    expect(last).toEqual({ kind: 'end', end: { status: 'stopped', nodeId: 'halt' } });
  });

  it('an automation that ends the run ends it at its node', () => {
    const graph = graphOf(
      [{ id: 's', kind: 'start' }, { id: 'a', kind: 'action', automations: [set('a'), set('b')] }, { id: 'e', kind: 'end' }],
      [{ from: 's', to: 'a' }, { from: 'a', to: 'e' }],
    );
    let { state, move } = plan(graph, startState(graph, T0), { now: T0, holds: () => true });
    if (move.kind !== 'run') throw new Error('expected a step');
    state = finishStep(state, 'a', 'a', { outcome: 'canceled', output: null, end: { status: 'canceled', nodeId: 'a' } }, T0);
    expect(plan(graph, state, { now: T0, holds: () => true }).move).toEqual({ kind: 'end', end: { status: 'canceled', nodeId: 'a' } });
  });
});

describe('executor: waits', () => {
  const graph = graphOf(
    [
      { id: 's', kind: 'start' },
      { id: 'w', kind: 'action', automations: [{ id: 'nap', type: 'wait', with: { duration: 'PT1H' } }] },
      { id: 'ev', kind: 'action', automations: [{ id: 'visit', type: 'wait_for_event', with: { event: 'Encounter.finished' } }] },
      { id: 'other', kind: 'action', automations: [set('o')] },
      { id: 'e', kind: 'end' },
    ],
    [
      { from: 's', to: 'w' },
      { from: 's', to: 'ev' },
      { from: 's', to: 'other' },
      { from: 'w', to: 'e' },
      { from: 'ev', to: 'e' },
      { from: 'other', to: 'e' },
    ],
  );

  function waiting(): EngineState {
    let state = plan(graph, startState(graph, T0), { now: T0, holds: () => true }).state;
    state = beginStep(state, 'w', { stepId: 's1', automationId: 'nap', attempt: 1, startedAt: T0, dueAt: T1 });
    state = beginStep(state, 'ev', { stepId: 's2', automationId: 'visit', attempt: 1, startedAt: T0, dueAt: null, event: 'Encounter.finished' });
    return state;
  }

  it('runs other branches while waits are pending, then sleeps until the earliest timer', () => {
    let { state, move } = plan(graph, waiting(), { now: T0, holds: () => true });
    expect(move.kind === 'run' && move.automation.id).toBe('o');
    state = finishStep(state, 'other', 'o', { outcome: 'ok', output: null }, T0);
    ({ move } = plan(graph, state, { now: T0, holds: () => true }));
    expect(move).toEqual({ kind: 'sleep', until: T1 });
  });

  it('wakes a due timer as elapsed, and an event wait when its event came', () => {
    const state = finishStep(waiting(), 'other', 'o', { outcome: 'ok', output: null }, T0);
    const due = plan(graph, state, { now: T1, holds: () => true }).move;
    expect(due.kind === 'wake' && [due.nodeId, due.reason]).toEqual(['w', 'elapsed']);
    const events = new Map([['ev', { at: T0, event: { event: 'Encounter.finished' } }]]);
    const woken = plan(graph, state, { now: T0, holds: () => true, events }).move;
    expect(woken.kind === 'wake' && [woken.nodeId, woken.reason]).toEqual(['ev', 'event']);
  });

  it('sleeps "forever" on an event wait without a timeout', () => {
    let state = finishStep(waiting(), 'other', 'o', { outcome: 'ok', output: null }, T0);
    state = finishStep(state, 'w', 'nap', { outcome: 'elapsed', output: null }, T1);
    expect(plan(graph, state, { now: T1, holds: () => true }).move).toEqual({ kind: 'sleep', until: NEVER });
  });

  it('repeats a call whose outcome was never recorded, as the next attempt', () => {
    const callGraph = graphOf(
      [{ id: 's', kind: 'start' }, { id: 'c', kind: 'action', automations: [{ id: 'post', type: 'http', with: { method: 'POST', url: 'https://example.org/' } }] }, { id: 'e', kind: 'end' }],
      [{ from: 's', to: 'c' }, { from: 'c', to: 'e' }],
    );
    let state = plan(callGraph, startState(callGraph, T0), { now: T0, holds: () => true }).state;
    state = beginStep(state, 'c', { stepId: 'first', automationId: 'post', attempt: 1, startedAt: T0 });
    const move = plan(callGraph, state, { now: T0, holds: () => true }).move;
    expect(move.kind === 'run' && [move.attempt, move.redo?.stepId]).toEqual([2, 'first']);
  });

  it('never changes the state it is given', () => {
    const state = waiting();
    const copy = structuredClone(state);
    plan(graph, state, { now: T1, holds: () => true });
    finishStep(state, 'other', 'o', { outcome: 'ok', output: null }, T0);
    expect(state).toEqual(copy);
  });
});
