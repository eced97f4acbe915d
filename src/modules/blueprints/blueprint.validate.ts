/**
 * `validateBlueprint` turns untrusted input (a parsed file, a request body) into a `Blueprint`,
 * or throws a `BlueprintError` listing every problem at once, each prefixed with its place:
 * `node "flag": automation "tag-it": …`, `link 3 (risk → nowhere): …`. Nodes, links, swimlanes
 * and automations without a usable id are numbered from 1 in file order.
 */
import {
  AUTOMATION_TYPES,
  NODE_KINDS,
  TAG_SLUG,
  type Automation,
  type AutomationType,
  type Blueprint,
  type BlueprintNode,
  type Link,
  type NodeKind,
  type Swimlane,
} from './blueprint.js';
import { checkAutomationWith, type Report } from './automation.validate.js';
import { graphProblems, kindPhrase, type GraphLink, type GraphNode } from './blueprint.graph.js';
import { conditionProblem } from './expression.check.js';
import { unstorableTextProblem } from '../../lib/storable-text.js';
import { MAX_JSON_DEPTH, valueNestsDeeperThan } from '../../lib/json-depth.js';

export class BlueprintError extends Error {
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
    this.name = 'BlueprintError';
  }
}

type Fields = Record<string, unknown>;

const BLUEPRINT_FIELDS = ['name', 'tags', 'swimlanes', 'nodes', 'links'];
const SWIMLANE_FIELDS = ['id', 'name'];
const NODE_FIELDS = ['id', 'kind', 'name', 'swimlaneId', 'automations'];
const AUTOMATION_FIELDS = ['id', 'type', 'with'];
const LINK_FIELDS = ['from', 'to', 'when'];
const MAX_ID_LENGTH = 100;
const MAX_NAME_LENGTH = 200;
/**
 * How large a blueprint may be. Care pathways have tens of nodes; a run's state is rewritten at
 * each step and grows with the graph, so a 10,000-node blueprint ran at 17 steps a second and
 * held the worker for minutes (a resource review). Refused at import, with the count named.
 */
export const BLUEPRINT_LIMITS = { nodes: 500, links: 2000, swimlanes: 100, automationsPerNode: 25 } as const;
/** Kinds that only route: their work is choosing or ending, never running automations. */
const NO_AUTOMATIONS: readonly NodeKind[] = ['start', 'decision', 'end', 'stop'];

export function validateBlueprint(input: unknown): Blueprint {
  if (!isObject(input)) throw new BlueprintError(['a blueprint must be an object']);
  const problems: string[] = [];
  const at =
    (place: string): Report =>
    (problem) =>
      problems.push(`${place}: ${problem}`);

  for (const key of Object.keys(input)) {
    if (!BLUEPRINT_FIELDS.includes(key)) problems.push(`unknown top-level field "${key}"`);
  }
  // Before anything is checked item by item: a blueprint past the limits is refused at once,
  // and so is one nested deeper than JSON bodies may be (5,000 levels in a `with` overflowed
  // the stack of the checks below: "Maximum call stack size exceeded", naming nothing).
  const tooLarge = sizeProblems(input);
  if (valueNestsDeeperThan(input, MAX_JSON_DEPTH)) tooLarge.push(`the blueprint nests objects and lists deeper than ${MAX_JSON_DEPTH} levels`);
  if (tooLarge.length > 0) throw new BlueprintError(tooLarge);
  if (!isName(input.name)) problems.push(`name must be 1 to ${MAX_NAME_LENGTH} characters of text`);
  // PostgreSQL keeps no U+0000 (an import failed with the driver's words, naming no field) and
  // SQLite kept it: refused on both, naming the place (lib/storable-text.ts).
  const unstorable = unstorableTextProblem(input, 'blueprint');
  if (unstorable !== null) problems.push(unstorable);
  checkTags(input.tags, (problem) => problems.push(problem));

  const swimlaneIds = checkSwimlanes(input.swimlanes, at, problems);
  const graphNodes = checkNodes(input.nodes, swimlaneIds, at, problems);
  const graphLinks = checkLinks(input.links, graphNodes, at, problems);
  if (Array.isArray(input.nodes) && Array.isArray(input.links)) {
    problems.push(...graphProblems(graphNodes, graphLinks));
  }

  if (problems.length > 0) throw new BlueprintError(problems);
  return toBlueprint(input);
}

function sizeProblems(input: Fields): string[] {
  const problems: string[] = [];
  const count = (value: unknown) => (Array.isArray(value) ? value.length : 0);
  const over = (what: string, found: number, most: number) => {
    if (found > most) problems.push(`${what}: ${found}, at most ${most}`);
  };
  over('nodes', count(input.nodes), BLUEPRINT_LIMITS.nodes);
  over('links', count(input.links), BLUEPRINT_LIMITS.links);
  over('swimlanes', count(input.swimlanes), BLUEPRINT_LIMITS.swimlanes);
  if (Array.isArray(input.nodes)) {
    input.nodes.forEach((node: unknown, index) => {
      if (!isObject(node)) return;
      const name = isId(node.id) ? `node "${node.id}"` : `node ${index + 1}`;
      over(`${name}: automations`, count(node.automations), BLUEPRINT_LIMITS.automationsPerNode);
    });
  }
  return problems;
}

function checkTags(tags: unknown, report: Report): void {
  if (tags === undefined) return;
  if (!Array.isArray(tags)) {
    report('tags must be a list of tag slugs');
    return;
  }
  const seen = new Set<unknown>();
  tags.forEach((tag, index) => {
    if (typeof tag !== 'string' || !TAG_SLUG.test(tag)) {
      report(`tags[${index}] must be a tag slug (lower-case letters, digits, . _ : -), got ${JSON.stringify(tag)}`);
    } else if (seen.has(tag)) report(`tags: "${tag}" is listed twice`);
    seen.add(tag);
  });
}

function checkSwimlanes(swimlanes: unknown, at: (place: string) => Report, problems: string[]): Set<string> {
  const ids = new Set<string>();
  if (swimlanes === undefined) return ids;
  if (!Array.isArray(swimlanes)) {
    problems.push('swimlanes must be a list');
    return ids;
  }
  swimlanes.forEach((lane: unknown, index) => {
    const place = isObject(lane) && isId(lane.id) ? `swimlane "${lane.id}"` : `swimlane ${index + 1}`;
    const report = at(place);
    if (!isObject(lane)) return report('must be an object with id and name');
    rejectUnknownFields(lane, SWIMLANE_FIELDS, report);
    if (!isId(lane.id)) report(`id must be text of 1 to ${MAX_ID_LENGTH} characters`);
    else if (ids.has(lane.id)) report('duplicate id');
    else ids.add(lane.id);
    if (!isName(lane.name)) report(`name must be 1 to ${MAX_NAME_LENGTH} characters of text`);
  });
  return ids;
}

/** Checks each node and its automations; returns the nodes the graph rules can work on. */
function checkNodes(
  nodes: unknown,
  swimlaneIds: Set<string>,
  at: (place: string) => Report,
  problems: string[],
): GraphNode[] {
  if (!Array.isArray(nodes)) {
    problems.push('nodes must be a list');
    return [];
  }
  const graphNodes: GraphNode[] = [];
  const nodeIds = new Set<string>();
  const automationOwners = new Map<string, string>();
  nodes.forEach((node: unknown, index) => {
    const place = isObject(node) && isId(node.id) ? `node "${node.id}"` : `node ${index + 1}`;
    const report = at(place);
    if (!isObject(node)) return report('must be an object');
    rejectUnknownFields(node, NODE_FIELDS, report);
    const kind = isNodeKind(node.kind) ? node.kind : undefined;
    if (!kind) report(`kind must be one of ${NODE_KINDS.join(', ')}, got ${JSON.stringify(node.kind)}`);
    if (node.name !== undefined && !isName(node.name)) {
      report(`name must be 1 to ${MAX_NAME_LENGTH} characters of text`);
    }
    if (node.swimlaneId !== undefined && !(typeof node.swimlaneId === 'string' && swimlaneIds.has(node.swimlaneId))) {
      report(`swimlaneId ${JSON.stringify(node.swimlaneId)} is not one of the blueprint's swimlanes`);
    }
    if (!isId(node.id)) report(`id must be text of 1 to ${MAX_ID_LENGTH} characters`);
    else if (nodeIds.has(node.id)) report('duplicate id');
    else {
      nodeIds.add(node.id);
      graphNodes.push({ id: node.id, kind });
    }
    if (node.automations === undefined) return;
    if (!Array.isArray(node.automations)) return report('automations must be a list');
    if (kind && NO_AUTOMATIONS.includes(kind) && node.automations.length > 0) {
      report(`${kindPhrase(kind)} carries no automations`);
    }
    node.automations.forEach((automation: unknown, position) =>
      checkAutomation(automation, position, place, at, automationOwners),
    );
  });
  return graphNodes;
}

function checkAutomation(
  automation: unknown,
  position: number,
  nodePlace: string,
  at: (place: string) => Report,
  owners: Map<string, string>,
): void {
  const id = isObject(automation) && isId(automation.id) ? automation.id : undefined;
  const report = at(`${nodePlace}: automation ${id === undefined ? position + 1 : `"${id}"`}`);
  if (!isObject(automation)) return report('must be an object with id, type and with');
  rejectUnknownFields(automation, AUTOMATION_FIELDS, report);
  if (id === undefined) report(`id must be text of 1 to ${MAX_ID_LENGTH} characters`);
  else if (owners.has(id)) {
    // Ids are unique across the blueprint because results are kept as steps.<automationId>.
    report(`duplicate id (already used in ${owners.get(id)})`);
  } else owners.set(id, nodePlace);
  if (!isAutomationType(automation.type)) {
    return report(`type must be one of ${AUTOMATION_TYPES.join(', ')}, got ${JSON.stringify(automation.type)}`);
  }
  checkAutomationWith(automation.type, automation.with, report);
}

function checkLinks(
  links: unknown,
  nodes: GraphNode[],
  at: (place: string) => Report,
  problems: string[],
): GraphLink[] {
  if (!Array.isArray(links)) {
    problems.push('links must be a list');
    return [];
  }
  const nodeIds = new Set(nodes.map((node) => node.id));
  const firstLink = new Map<string, string>();
  const graphLinks: GraphLink[] = [];
  links.forEach((link: unknown, index) => {
    const end = (value: unknown) => (typeof value === 'string' ? value : '?');
    const label = isObject(link)
      ? `link ${index + 1} (${end(link.from)} → ${end(link.to)})`
      : `link ${index + 1}`;
    const report = at(label);
    if (!isObject(link)) return report('must be an object with from and to');
    rejectUnknownFields(link, LINK_FIELDS, report);
    let known = true;
    for (const side of ['from', 'to'] as const) {
      const target = link[side];
      if (typeof target !== 'string') report(`${side} must be a node id`);
      else if (!nodeIds.has(target)) report(`unknown node "${target}"`);
      else continue;
      known = false;
    }
    if (link.when !== undefined) {
      if (typeof link.when !== 'string' || link.when.trim() === '') report('when must be a FHIRPath expression');
      else {
        const problem = conditionProblem(link.when);
        if (problem) report(`when ${problem}`);
      }
    }
    if (!known) return;
    const from = link.from as string;
    const to = link.to as string;
    const key = JSON.stringify([from, to]);
    const earlier = firstLink.get(key);
    if (earlier) return report(`duplicates ${earlier}`);
    firstLink.set(key, `link ${index + 1}`);
    graphLinks.push({ from, to, label });
  });
  return graphLinks;
}

/**
 * A blueprint version as stored, for the engine to run. Import validated it, with the rules of
 * the version that imported it, and stored what it returned; it is read as it is and not judged
 * again, so a rule import gained since (a pattern the linear-time engine lacks, a condition that
 * can never hold, an event name) does not stop every run of a blueprint imported before it: such
 * an expression errors its node when a run reaches it, as it did. Only its outline is checked.
 */
export function readStoredBlueprint(stored: unknown): Blueprint {
  if (!isObject(stored) || typeof stored.name !== 'string' || !Array.isArray(stored.nodes) || !Array.isArray(stored.links)) {
    throw new BlueprintError(['the stored graph is not a blueprint']);
  }
  if (!stored.nodes.every((node) => isObject(node) && isId(node.id) && isNodeKind(node.kind))) {
    throw new BlueprintError(['the stored graph holds a node without an id or kind']);
  }
  if (!stored.links.every((link) => isObject(link) && isId(link.from) && isId(link.to))) {
    throw new BlueprintError(['the stored graph holds a link without from or to']);
  }
  return toBlueprint(stored);
}

/**
 * Called once every check has passed (validateBlueprint), or on a version import stored that way
 * (readStoredBlueprint): the input has exactly the shape of a Blueprint.
 */
function toBlueprint(input: Fields): Blueprint {
  return {
    name: input.name as string,
    tags: [...((input.tags as string[] | undefined) ?? [])],
    swimlanes: ((input.swimlanes as Swimlane[] | undefined) ?? []).map(({ id, name }) => ({ id, name })),
    nodes: (input.nodes as Fields[]).map(toNode),
    links: (input.links as Link[]).map(({ from, to, when }) =>
      when === undefined ? { from, to } : { from, to, when },
    ),
  };
}

function toNode(node: Fields): BlueprintNode {
  const automations = ((node.automations as Fields[] | undefined) ?? []).map(
    (automation) =>
      ({
        id: automation.id,
        type: automation.type,
        with: structuredClone(automation.with ?? {}),
      }) as Automation,
  );
  return {
    id: node.id as string,
    kind: node.kind as NodeKind,
    ...(node.name === undefined ? {} : { name: node.name as string }),
    ...(node.swimlaneId === undefined ? {} : { swimlaneId: node.swimlaneId as string }),
    automations,
  };
}

function rejectUnknownFields(value: Fields, known: readonly string[], report: Report): void {
  for (const key of Object.keys(value)) {
    if (!known.includes(key)) report(`unknown field "${key}"`);
  }
}

function isObject(value: unknown): value is Fields {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

function isId(value: unknown): value is string {
  return typeof value === 'string' && value.length > 0 && value.length <= MAX_ID_LENGTH;
}

function isName(value: unknown): value is string {
  return typeof value === 'string' && value.trim() !== '' && value.length <= MAX_NAME_LENGTH;
}

function isNodeKind(value: unknown): value is NodeKind {
  return (NODE_KINDS as readonly unknown[]).includes(value);
}

function isAutomationType(value: unknown): value is AutomationType {
  return (AUTOMATION_TYPES as readonly unknown[]).includes(value);
}
