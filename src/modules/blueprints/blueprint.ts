/**
 * A blueprint: the graph a pathway follows (DESIGN §6, file format in §11). These are the types
 * of a blueprint that has passed `validateBlueprint`; anything read from a file or a request is
 * `unknown` until then.
 */

export const NODE_KINDS = ['start', 'action', 'decision', 'end', 'stop'] as const;
export type NodeKind = (typeof NODE_KINDS)[number];

export const AUTOMATION_TYPES = [
  'wait',
  'wait_for_event',
  'tag',
  'set',
  'http',
  'start_pathway',
  'fail',
  'stop',
  'cancel',
] as const;
export type AutomationType = (typeof AUTOMATION_TYPES)[number];

export const HTTP_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE'] as const;
export type HttpMethod = (typeof HTTP_METHODS)[number];

/** Tag slugs, shared with records and search (DESIGN §8). */
export const TAG_SLUG = /^[a-z0-9][a-z0-9._:-]{0,63}$/;

export interface Blueprint {
  name: string;
  tags: string[];
  swimlanes: Swimlane[];
  nodes: BlueprintNode[];
  links: Link[];
}

export interface Swimlane {
  id: string;
  name: string;
}

export interface BlueprintNode {
  id: string;
  kind: NodeKind;
  name?: string;
  swimlaneId?: string;
  /** Run in order when the node is reached; always present, `[]` when the file has none. */
  automations: Automation[];
}

/** A link without `when` always holds. */
export interface Link {
  from: string;
  to: string;
  /** FHIRPath over the run context `{payload, subject, steps, vars}`. */
  when?: string;
}

/** `{duration}` (ISO 8601) or `{until, timezone}` (local `HH:MM[:SS]` in an IANA zone). */
export type WaitWith = { duration: string } | { until: string; timezone: string };

/** `event` like `Encounter.finished`; `timeout` an ISO 8601 duration. */
export interface WaitForEventWith {
  event: string;
  timeout?: string;
}

export interface TagWith {
  target: 'subject' | 'pathway';
  add?: string[];
  remove?: string[];
}

/** Variable name → FHIRPath expression; results land in `vars.<name>`. */
export interface SetWith {
  vars: Record<string, string>;
}

/** `url`, header values and string values in `body` may hold `{{ }}` placeholders. */
export interface HttpWith {
  method: HttpMethod;
  url: string;
  headers?: Record<string, string>;
  body?: unknown;
  timeoutMs?: number;
}

export interface StartPathwayWith {
  triggerId: string;
  payload?: unknown;
}

export interface FailWith {
  message: string;
}

export type EmptyWith = Record<string, never>;

interface AutomationOf<T extends AutomationType, W> {
  /** Unique across the blueprint: the run context keeps its result as `steps.<id>`. */
  id: string;
  type: T;
  with: W;
}

export type Automation =
  | AutomationOf<'wait', WaitWith>
  | AutomationOf<'wait_for_event', WaitForEventWith>
  | AutomationOf<'tag', TagWith>
  | AutomationOf<'set', SetWith>
  | AutomationOf<'http', HttpWith>
  | AutomationOf<'start_pathway', StartPathwayWith>
  | AutomationOf<'fail', FailWith>
  | AutomationOf<'stop', EmptyWith>
  | AutomationOf<'cancel', EmptyWith>;
