/**
 * `carepath admin audit export`: the workspace's audit events as NDJSON, oldest first, read in
 * pages so an export of years of events holds one page in memory at a time (DESIGN §10). The
 * API's filters `since`, `recordId` and `keyId` are `--since`, `--record` and `--key`. Each export
 * is audited (`audit.export`), like each page of the API's list (`audit.read`).
 */
import { DateTime } from 'luxon';
import type { Container } from '../../container.js';
import { listAuditEventsAfter, type AuditEvent } from '../../modules/audit/audit.repository.js';
import { auditReadOf } from '../../modules/audit/audit-read.js';
import { UsageError } from '../errors.js';
import { isUuid } from '../../lib/ids.js';
import { optionalFlag, requireWorkspace, workspaceFlag, type AdminCommand } from './command.js';
import { auditAdminChange } from './admin-audit.js';

const PAGE_SIZE = 500;

export interface AuditExportArgs {
  workspaceId: string;
  /** ISO 8601 UTC; events at or after it. */
  since?: string;
  /** Events that name this search record (as the API's `recordId`). */
  recordId?: string;
  /** Events made with this key (as the API's `keyId`). */
  keyId?: string;
}

/** `2024-05-01`, `2024-05-01T08:00:00+02:00` … → the stored form, ISO UTC with milliseconds. */
export function parseSince(text: string): string {
  const time = DateTime.fromISO(text, { zone: 'utc' });
  if (!time.isValid) throw new UsageError(`--since must be an ISO 8601 time such as 2024-05-01T00:00:00Z, got "${text}"`);
  return new Date(time.toMillis()).toISOString();
}

/** A record or key id given on the command line: a UUID, taken in either case. */
function uuidFlag(flag: string, what: string, text: string): string {
  if (!isUuid(text)) throw new UsageError(`--${flag} must be ${what} (a UUID), got "${text}"`);
  return text.toLowerCase();
}

/**
 * Yields every matching event, oldest first: in id order, the API's order reversed. Ids are
 * UUID v7 made as each event is written, so id order is write order and the keyset query rides
 * an index however large the table: (workspace_id, id), or with `--record` the record's index
 * rows, with `--key` (workspace_id, key_id, id).
 *
 * The export is audited (`audit.export`, as `carepath admin`: the filters, how many events) once
 * the last page is read and before the last event is handed out. Not before the first page: the
 * count is not known yet, and an export that fails midway would be recorded as done. Not after
 * the last line either: were the event then not written, a whole export would have left without
 * a trace. So an export that completes is always recorded (the last line waits for its event,
 * and a failure to write it fails the command), and its event is after every event it read, never
 * in its own output. One that stops before its end after handing events out (a failed store, a
 * closed pipe: `| head`) is recorded as it stops, outcome `failure` and the count handed out,
 * as far as the store still takes it: it claims no complete export.
 */
export async function* auditExport(container: Container, args: AuditExportArgs): AsyncGenerator<AuditEvent> {
  const workspace = await requireWorkspace(container, args.workspaceId);
  const { since, recordId, keyId } = args;
  const record = (outcome: 'success' | 'failure', count: number) =>
    auditAdminChange(container.db, workspace, container.config.environment, container.clock.now().toISOString(),
      auditReadOf('audit.export', { since, recordId, keyId }, count, { outcome }));
  let handedOut = 0;
  let recorded = false;
  try {
    // The last event read: handed out once the next one is read, or once the export is recorded.
    let held: AuditEvent | undefined;
    let afterId: string | undefined;
    for (;;) {
      const page = await listAuditEventsAfter(container.db, args.workspaceId, { since, recordId, keyId, afterId, limit: PAGE_SIZE });
      for (const event of page) {
        if (held !== undefined) {
          // Counted as it is handed out: one whose printing then fails may have left in part.
          handedOut += 1;
          yield held;
        }
        held = event;
      }
      if (page.length < PAGE_SIZE) break;
      afterId = page[page.length - 1].id;
    }
    await record('success', handedOut + (held === undefined ? 0 : 1));
    recorded = true;
    if (held !== undefined) yield held;
  } finally {
    if (!recorded && handedOut > 0) {
      // The error that stopped the export is the one to report; this event is the best left to do.
      await record('failure', handedOut).catch(() => undefined);
    }
  }
}

const exportCommand: AdminCommand<AuditExportArgs> = {
  noun: 'audit',
  verb: 'export',
  synopsis: '--workspace <workspaceId> [--since <ISO time>] [--record <recordId>] [--key <keyId>]',
  flags: ['workspace', 'since', 'record', 'key'],
  positionals: [],
  parse(input) {
    const since = optionalFlag(input, 'since');
    const record = optionalFlag(input, 'record');
    const key = optionalFlag(input, 'key');
    return {
      workspaceId: workspaceFlag(input),
      ...(since === undefined ? {} : { since: parseSince(since) }),
      ...(record === undefined ? {} : { recordId: uuidFlag('record', 'a record id', record) }),
      ...(key === undefined ? {} : { keyId: uuidFlag('key', 'a key id', key) }),
    };
  },
  // One event per line is already the machine form, and many values are not the one --json promises.
  refusesJson: 'it prints NDJSON already, one event per line (read each line as JSON)',
  async execute(container, args, out) {
    for await (const event of auditExport(container, args)) await out.write(`${JSON.stringify(event)}\n`);
  },
};

export const auditCommands: AdminCommand[] = [exportCommand];
