/**
 * A validated blueprint with the lookups the executor needs: nodes by id, and each node's
 * outgoing and incoming links as indices into `links` (link order matters: a decision follows
 * the first link that holds). Built once per blueprint version and shared, read-only.
 */
import type { Blueprint, BlueprintNode, Link } from '../modules/blueprints/blueprint.js';

export interface GraphIndex {
  blueprint: Blueprint;
  links: Link[];
  /** Node ids in file order: the executor's deterministic order of work. */
  order: string[];
  node(id: string): BlueprintNode;
  outgoing(id: string): number[];
  incoming(id: string): number[];
  startId: string;
}

export function indexGraph(blueprint: Blueprint): GraphIndex {
  const byId = new Map(blueprint.nodes.map((node) => [node.id, node]));
  const outgoing = new Map<string, number[]>(blueprint.nodes.map((node) => [node.id, []]));
  const incoming = new Map<string, number[]>(blueprint.nodes.map((node) => [node.id, []]));
  blueprint.links.forEach((link, index) => {
    outgoing.get(link.from)?.push(index);
    incoming.get(link.to)?.push(index);
  });
  const start = blueprint.nodes.find((node) => node.kind === 'start');
  if (!start) throw new Error('a blueprint without a start node cannot run');
  return {
    blueprint,
    links: blueprint.links,
    order: blueprint.nodes.map((node) => node.id),
    node: (id) => {
      const node = byId.get(id);
      if (!node) throw new Error(`node "${id}" is not in the blueprint`);
      return node;
    },
    outgoing: (id) => outgoing.get(id) ?? [],
    incoming: (id) => incoming.get(id) ?? [],
    startId: start.id,
  };
}
