import { Type } from '@sinclair/typebox';
import type { Api } from '../types.js';
import type { Container } from '../../container.js';
import { ListEnvelope, commonErrors, Uuid, Timestamp, Nullable, PageLimit, CursorParam, named } from '../schemas/common.js';
import { listAuditEvents } from '../../modules/audit/audit.repository.js';

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
        querystring: ListAuditQuery,
        response: { 200: ListEnvelope(AuditEventSchema), ...commonErrors },
      },
    },
    async (request) => {
      const since = request.query.since ? new Date(request.query.since).toISOString() : undefined;
      return listAuditEvents(container.db, request.ctx.workspaceId, { ...request.query, since, limit: request.query.limit ?? 25 });
    },
  );
}
