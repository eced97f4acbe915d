/**
 * The rules a blueprint's graph must satisfy, checked over nodes and links whose own shape has
 * already been checked. Pathways are DAGs: the engine joins a node with several incoming links
 * by waiting for every branch that can still reach it, which needs a graph without cycles;
 * repetition is expressed with waits and events instead.
 */
import type { NodeKind } from './blueprint.js';

export interface GraphNode {
  id: string;
  /** Undefined when the node's kind was invalid (already reported). */
  kind: NodeKind | undefined;
}

export interface GraphLink {
  from: string;
  to: string;
  /** How problems name the link, e.g. `link 3 (risk → wait)`. */
  label: string;
}

/** Kinds that must lead somewhere. */
const NEEDS_OUTGOING: ReadonlySet<NodeKind | undefined> = new Set(['start', 'action', 'decision']);

export function graphProblems(nodes: GraphNode[], links: GraphLink[]): string[] {
  const problems: string[] = [];
  const kindOf = new Map(nodes.map((node) => [node.id, node.kind]));
  const next = new Map<string, string[]>(nodes.map((node) => [node.id, []]));
  for (const link of links) next.get(link.from)?.push(link.to);

  const starts = nodes.filter((node) => node.kind === 'start');
  if (starts.length === 0) problems.push('the blueprint needs a start node');
  if (starts.length > 1) {
    const ids = starts.map((node) => `"${node.id}"`).join(', ');
    problems.push(`the blueprint has ${starts.length} start nodes (${ids}); it needs exactly one`);
  }

  for (const link of links) {
    if (kindOf.get(link.to) === 'start') {
      problems.push(`${link.label}: a start node takes no incoming links`);
    }
    const fromKind = kindOf.get(link.from);
    if (fromKind === 'end' || fromKind === 'stop') {
      problems.push(`${link.label}: ${kindPhrase(fromKind)} has no outgoing links`);
    }
  }

  for (const node of nodes) {
    if (NEEDS_OUTGOING.has(node.kind) && next.get(node.id)?.length === 0) {
      problems.push(`node "${node.id}": ${kindPhrase(node.kind)} needs at least one outgoing link`);
    }
  }

  for (const cycle of findCycles(nodes, next)) {
    problems.push(`nodes form a cycle: ${cycle.join(' → ')} (pathways may not loop)`);
  }

  if (starts.length === 1) {
    const reached = reachableFrom(starts[0].id, next);
    for (const node of nodes) {
      if (!reached.has(node.id)) problems.push(`node "${node.id}": not reachable from the start node`);
    }
  }
  return problems;
}

/**
 * Depth-first search with an explicit stack (a long chain of nodes must not exhaust the call
 * stack). Each link that leads back to a node on the current path closes one cycle, reported
 * as the path from that node round to itself.
 */
function findCycles(nodes: GraphNode[], next: Map<string, string[]>): string[][] {
  const state = new Map<string, 'on-path' | 'done'>();
  const cycles: string[][] = [];
  for (const root of nodes) {
    if (state.has(root.id)) continue;
    const path = [root.id];
    const position = [0];
    state.set(root.id, 'on-path');
    while (path.length > 0) {
      const top = path.length - 1;
      const targets = next.get(path[top]) ?? [];
      if (position[top] === targets.length) {
        state.set(path[top], 'done');
        path.pop();
        position.pop();
        continue;
      }
      const target = targets[position[top]++];
      const seen = state.get(target);
      if (seen === 'on-path') cycles.push([...path.slice(path.indexOf(target)), target]);
      if (seen === undefined) {
        state.set(target, 'on-path');
        path.push(target);
        position.push(0);
      }
    }
  }
  return cycles;
}

function reachableFrom(start: string, next: Map<string, string[]>): Set<string> {
  const reached = new Set([start]);
  const queue = [start];
  for (let i = 0; i < queue.length; i++) {
    for (const target of next.get(queue[i]) ?? []) {
      if (!reached.has(target)) {
        reached.add(target);
        queue.push(target);
      }
    }
  }
  return reached;
}

/** "an action node", "a decision node": for problems that speak of a node by its kind. */
export function kindPhrase(kind: NodeKind | undefined): string {
  return `${kind === 'action' || kind === 'end' ? 'an' : 'a'} ${kind} node`;
}
