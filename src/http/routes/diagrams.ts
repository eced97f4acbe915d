import { Type } from '@sinclair/typebox';
import type { Api } from '../types.js';
import type { Container } from '../../container.js';
import { IdParams, ListEnvelope, commonErrors, Uuid, Timestamp, PageLimit, CursorParam, named } from '../schemas/common.js';
import { findDiagram, listDiagrams } from '../../modules/diagrams/diagram.repository.js';
import { invalidRequest, notFound } from '../../lib/errors.js';

const DiagramType = Type.Union([Type.Literal('blueprint'), Type.Literal('instance')]);

/** The spec's metadata (id, type, name, sourceId for instances); version, tags and times are additive. */
const DiagramSchema = named('Diagram', Type.Object({
  id: Uuid,
  type: DiagramType,
  name: Type.String(),
  sourceId: Type.Optional(Uuid),
  version: Type.Integer({ description: 'blueprint: current version; instance: the version it was copied from' }),
  tags: Type.Array(Type.String()),
  createdAt: Timestamp,
  updatedAt: Timestamp,
}));

const ListDiagramsQuery = Type.Object(
  {
    // No schema default: a bare `sourceId` means instances, so the route picks the default itself.
    type: Type.Optional(DiagramType),
    sourceId: Type.Optional(Uuid),
    q: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'part of the name, any case' })),
    limit: Type.Optional(PageLimit),
    cursor: Type.Optional(CursorParam),
  },
  { additionalProperties: false },
);

const DiagramParams = IdParams('id');

export function registerDiagramRoutes(api: Api, container: Container): void {
  const tags = ['Diagrams'];

  api.get(
    '/v1/diagrams',
    {
      config: { scope: 'diagrams:read' },
      schema: {
        tags,
        operationId: 'listDiagrams',
        summary: 'List blueprints or instances, newest first',
        description:
          '`type` defaults to `blueprint`, or to `instance` when `sourceId` (instances copied from that blueprint) is given; ' +
          '`sourceId` with `type=blueprint` is refused.',
        querystring: ListDiagramsQuery,
        response: { 200: ListEnvelope(DiagramSchema), ...commonErrors },
      },
    },
    async (request) => {
      const { sourceId } = request.query;
      const type = request.query.type ?? (sourceId ? 'instance' : 'blueprint');
      if (sourceId && type === 'blueprint') {
        throw invalidRequest('querystring.sourceId applies to instances only; use type=instance');
      }
      return listDiagrams(container.db, request.ctx.workspaceId, { ...request.query, type, limit: request.query.limit ?? 25 });
    },
  );

  api.get(
    '/v1/diagrams/:id',
    {
      config: { scope: 'diagrams:read' },
      schema: { tags, operationId: 'getDiagram', summary: 'Get the metadata of a diagram', params: DiagramParams, response: { 200: DiagramSchema, ...commonErrors } },
    },
    async (request) => {
      const diagram = await findDiagram(container.db, request.ctx.workspaceId, request.params.id);
      if (!diagram) throw notFound('diagram');
      return diagram;
    },
  );
}
