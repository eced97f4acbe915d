/**
 * `carepath admin audit export`: the workspace's audit events as NDJSON, oldest first, read in
 * pages so an export of years of events holds one page in memory at a time (DESIGN §10).
 */
import { DateTime } from 'luxon';
import type { Container } from '../../container.js';
import type { AuditEvent } from '../../modules/audit/audit.repository.js';
import { parseJson } from '../../lib/json.js';
import type { DbOrTx } from '../../storage/database.js';
import { UsageError } from '../errors.js';
import { optionalFlag, requireWorkspace, requiredFlag, type AdminCommand } from './command.js';

const PAGE_SIZE = 500;

export interface AuditExportArgs {
  workspaceId: string;
  /** ISO 8601 UTC; events at or after it. */
  since?: string;
}

/** `2024-05-01`, `2024-05-01T08:00:00+02:00` … → the stored form, ISO UTC with milliseconds. */
export function parseSince(text: string): string {
  const time = DateTime.fromISO(text, { zone: 'utc' });
  if (!time.isValid) throw new UsageError(`--since must be an ISO 8601 time such as 2024-05-01T00:00:00Z, got "${text}"`);
  return new Date(time.toMillis()).toISOString();
}

/**
 * One page in id order. The repository's listAuditEvents pages newest first for the API; an
 * export reads forward, so it keeps its own ascending keyset query here.
 */
async function auditPageAfter(
  db: DbOrTx,
  workspaceId: string,
  since: string | undefined,
  afterId: string | undefined,
): Promise<AuditEvent[]> {
  let select = db.selectFrom('audit_events').selectAll().where('workspace_id', '=', workspaceId);
  if (since) select = select.where('at', '>=', since);
  if (afterId) select = select.where('id', '>', afterId);
  const rows = await select.orderBy('id', 'asc').limit(PAGE_SIZE).execute();
  return rows.map((row) => ({
    id: row.id,
    at: row.at,
    action: row.action,
    requestId: row.request_id,
    keyId: row.key_id,
    keyName: row.key_name,
    workspaceId: row.workspace_id,
    resourceType: row.resource_type,
    resourceId: row.resource_id,
    outcome: row.outcome,
    details: parseJson<Record<string, unknown>>(row.details, {}),
  }));
}

/**
 * Yields every matching event, oldest first: in id order, the API's order reversed. Ids are
 * UUID v7 made as each event is written, so id order is write order and the keyset query rides
 * the (workspace_id, id) index however large the table.
 */
export async function* auditExport(container: Container, args: AuditExportArgs): AsyncGenerator<AuditEvent> {
  await requireWorkspace(container, args.workspaceId);
  let afterId: string | undefined;
  for (;;) {
    const page = await auditPageAfter(container.db, args.workspaceId, args.since, afterId);
    yield* page;
    if (page.length < PAGE_SIZE) return;
    afterId = page[page.length - 1].id;
  }
}

const exportCommand: AdminCommand<AuditExportArgs> = {
  noun: 'audit',
  verb: 'export',
  synopsis: '--workspace <workspaceId> [--since <ISO time>]',
  flags: ['workspace', 'since'],
  positionals: [],
  parse(input) {
    const since = optionalFlag(input, 'since');
    return {
      workspaceId: requiredFlag(input, 'workspace', 'workspaceId'),
      ...(since === undefined ? {} : { since: parseSince(since) }),
    };
  },
  async execute(container, args, out) {
    // NDJSON with or without --json: one event per line is already the machine form.
    for await (const event of auditExport(container, args)) await out.write(`${JSON.stringify(event)}\n`);
  },
};

export const auditCommands: AdminCommand[] = [exportCommand];
