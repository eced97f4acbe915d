/**
 * `carepath admin audit export`: the workspace's audit events as NDJSON, oldest first, read in
 * pages so an export of years of events holds one page in memory at a time (DESIGN §10).
 */
import { DateTime } from 'luxon';
import type { Container } from '../../container.js';
import { listAuditEventsAfter, type AuditEvent } from '../../modules/audit/audit.repository.js';
import { UsageError } from '../errors.js';
import { optionalFlag, requireWorkspace, workspaceFlag, type AdminCommand } from './command.js';

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
 * Yields every matching event, oldest first: in id order, the API's order reversed. Ids are
 * UUID v7 made as each event is written, so id order is write order and the keyset query rides
 * the (workspace_id, id) index however large the table.
 */
export async function* auditExport(container: Container, args: AuditExportArgs): AsyncGenerator<AuditEvent> {
  await requireWorkspace(container, args.workspaceId);
  let afterId: string | undefined;
  for (;;) {
    const page = await listAuditEventsAfter(container.db, args.workspaceId, { since: args.since, afterId, limit: PAGE_SIZE });
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
      workspaceId: workspaceFlag(input),
      ...(since === undefined ? {} : { since: parseSince(since) }),
    };
  },
  // One event per line is already the machine form, and many values are not the one --json promises.
  refusesJson: 'it prints NDJSON already, one event per line (read each line as JSON)',
  async execute(container, args, out) {
    for await (const event of auditExport(container, args)) await out.write(`${JSON.stringify(event)}\n`);
  },
};

export const auditCommands: AdminCommand[] = [exportCommand];
