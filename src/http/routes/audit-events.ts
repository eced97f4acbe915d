import { Type } from '@sinclair/typebox';
import type { Api } from '../types.js';
import type { Container } from '../../container.js';
import { ListEnvelope, commonErrors, Uuid, Timestamp, Nullable, PageLimit, CursorParam, named } from '../schemas/common.js';
import { listAuditEvents, recordAudit } from '../../modules/audit/audit.repository.js';
import { auditReadOf } from '../../modules/audit/audit-read.js';

const AuditEventSchema = named('AuditEvent', Type.Object({
  id: Uuid,
  at: Timestamp,
  action: Type.String(),
  requestId: Nullable(Type.String()),
  keyId: Nullable(Type.String()),
  keyName: Nullable(Type.String()),
  workspaceId: Uuid,
  resourceType: Nullable(Type.String()),
  resourceId: Nullable(Type.String()),
  outcome: Type.String(),
  details: Type.Record(Type.String(), Type.Unknown()),
}));

const ListAuditQuery = Type.Object(
  {
    action: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    since: Type.Optional(Type.String({ format: 'date-time' })),
    recordId: Type.Optional({
      ...Uuid,
      description:
        'Events that touched this search record (a Patient, Practitioner or Pathway record; a run\'s Pathway record has the run\'s id): ' +
        'the events of runs about it or of its own run (run.create, run.start, run.cancel, run.pause, run.resume, run.steps.read, ' +
        'run.graph.read, run.error.read, http.send, record.tags.change), the searches that returned it or one of its runs (search.execute), the ' +
        'deliveries that held its patient\'s data (delivery.process) and the reads of this report (audit.read, audit.export). Read from an index. ' +
        'A record of another workspace: an empty list.',
    }),
    keyId: Type.Optional({ ...Uuid, description: 'Events made with this API key. A key of another workspace: an empty list.' }),
    limit: Type.Optional(PageLimit),
    cursor: Type.Optional(CursorParam),
  },
  { additionalProperties: false },
);

export function registerAuditRoutes(api: Api, container: Container): void {
  api.get(
    '/v1/audit-events',
    {
      config: { scope: 'audit:read' },
      schema: {
        tags: ['Audit'],
        operationId: 'listAuditEvents',
        summary: 'Audit events of this workspace, newest first',
        description:
          'Filters combine: `action`, `since` (events at or after it), `recordId` (who touched a record), `keyId` (what a key did). ' +
          'Paged newest first by `limit` and `cursor` (the `nextCursor` of the page before, sent with the same filters). ' +
          'Each page answered is audited as audit.read (the filters asked, the number of events; with `recordId`, naming that record), ' +
          'written after the page is read, so it is on the next read, not on its own page.',
        querystring: ListAuditQuery,
        response: { 200: ListEnvelope(AuditEventSchema), ...commonErrors },
      },
    },
    async (request) => {
      const { action, recordId, keyId, cursor } = request.query;
      const since = request.query.since ? new Date(request.query.since).toISOString() : undefined;
      const page = await listAuditEvents(container.db, request.ctx.workspaceId, { ...request.query, since, limit: request.query.limit ?? 25 });
      // The trail says which patients' records were touched and by whom: who read it is recorded
      // too, after the page is read (it never lists its own event) and before it is handed out
      // (a read whose event cannot be written is not answered, as for a run's step timeline).
      await recordAudit(container.db, request.ctx, container.clock.now().toISOString(), [
        auditReadOf('audit.read', { action, since, recordId, keyId }, page.data.length, { cursor: cursor !== undefined }),
      ]);
      return page;
    },
  );
}
