/**
 * Audit events for changes to a workspace's set-up through the API: triggers, saved queries and
 * webhook endpoints (`trigger.create`, `query.update`, `webhook.delete`, …). DESIGN §5 audits
 * every state change made through the API; these decide which pathways start, for which
 * patients, and which systems may send health data, so a reviewer asks who changed them and when.
 *
 * Details are in the API's own field names, taken from the answer the caller got: on create,
 * every setting; on update, the fields the request set and their values as stored; on delete,
 * the name. Ids, times and derived fields (`url`, `nextRunAt`) are left out; a webhook's
 * secret is never part of its view, so it cannot reach an audit row.
 */
import type { AuditInput } from './audit.repository.js';

export type SetupKind = 'trigger' | 'query' | 'webhook';

/** Fields of a view that are not settings: the id, times, and what the service derives. */
const NOT_SETTINGS = new Set(['createdAt', 'updatedAt', 'nextRunAt', 'url']);
const ID_FIELD: Record<SetupKind, string> = { trigger: 'triggerId', query: 'queryId', webhook: 'webhookId' };

function settingsOf(kind: SetupKind, view: object, only?: readonly string[]): Record<string, unknown> {
  const settings: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(view)) {
    if (field === ID_FIELD[kind] || NOT_SETTINGS.has(field)) continue;
    if (only && !only.includes(field)) continue;
    settings[field] = value;
  }
  return settings;
}

export function setupCreated(kind: SetupKind, id: string, view: object): AuditInput {
  return { action: `${kind}.create`, resourceType: kind, resourceId: id, details: settingsOf(kind, view) };
}

/**
 * A PATCH as applied: `body` is the request's body (the fields it names are the ones set) and
 * `view` the answer. Recorded even when a value was already what it is set to: the request
 * changed the set-up's `updatedAt` and someone sent it.
 */
export function setupUpdated(kind: SetupKind, id: string, body: object, view: object): AuditInput {
  const named = Object.entries(body)
    .filter(([, value]) => value !== undefined)
    .map(([field]) => field);
  return { action: `${kind}.update`, resourceType: kind, resourceId: id, details: { set: settingsOf(kind, view, named) } };
}

export function setupDeleted(kind: SetupKind, id: string, name: string): AuditInput {
  return { action: `${kind}.delete`, resourceType: kind, resourceId: id, details: { name } };
}
