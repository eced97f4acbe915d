import { Type } from '@sinclair/typebox';
import type { Api } from '../types.js';
import type { Container } from '../../container.js';
import { IdParams, ListEnvelope, commonErrors, ErrorBody } from '../schemas/common.js';
import { CreateQueryBody, ListQueriesQuery, QueryView, UpdateQueryBody } from '../../modules/queries/query.schemas.js';
import { findQuery, listQueries, toQueryView } from '../../modules/queries/query.repository.js';
import { changeQuery, createQuery, deleteQuery } from '../../modules/queries/query.service.js';
import { notFound } from '../../lib/errors.js';
import { answerCreate, CREATE_KEY_DESCRIPTION, IdempotencyKeyHeaders } from '../idempotency-header.js';

const QueryParams = IdParams('queryId');

export function registerQueryRoutes(api: Api, container: Container): void {
  const now = () => container.clock.now();
  const tags = ['Queries'];
  /** The query as it is now (a GET, and the replay of a keyed create); 404 when it is gone. */
  const currentQuery = async (workspaceId: string, queryId: string) => {
    const row = await findQuery(container.db, workspaceId, queryId);
    if (!row) throw notFound('query');
    return toQueryView(row);
  };

  api.post(
    '/v1/queries',
    {
      config: { scope: 'queries:write' },
      schema: {
        tags,
        operationId: 'createQuery',
        summary: 'Save a query',
        description: CREATE_KEY_DESCRIPTION,
        body: CreateQueryBody,
        headers: IdempotencyKeyHeaders,
        response: { 200: QueryView, 201: QueryView, ...commonErrors, 409: ErrorBody },
      },
    },
    async (request, reply) =>
      answerCreate(
        request,
        reply,
        container.db,
        'query',
        (createKey) => createQuery(container.db, request.ctx, request.body, now(), createKey),
        (queryId) => currentQuery(request.ctx.workspaceId, queryId),
      ),
  );

  api.get(
    '/v1/queries',
    {
      config: { scope: 'queries:read' },
      schema: {
        tags,
        operationId: 'listQueries',
        summary: 'List saved queries, newest first',
        querystring: ListQueriesQuery,
        response: { 200: ListEnvelope(QueryView), ...commonErrors },
      },
    },
    async (request) => listQueries(container.db, request.ctx.workspaceId, { ...request.query, limit: request.query.limit ?? 25 }),
  );

  api.get(
    '/v1/queries/:queryId',
    {
      config: { scope: 'queries:read' },
      schema: { tags, operationId: 'getQuery', summary: 'Get a saved query', params: QueryParams, response: { 200: QueryView, ...commonErrors } },
    },
    async (request) => currentQuery(request.ctx.workspaceId, request.params.queryId),
  );

  api.patch(
    '/v1/queries/:queryId',
    {
      config: { scope: 'queries:write' },
      schema: {
        tags,
        operationId: 'updateQuery',
        summary: 'Update a saved query (partial)',
        params: QueryParams,
        body: UpdateQueryBody,
        response: { 200: QueryView, ...commonErrors },
      },
    },
    async (request) => changeQuery(container.db, request.ctx, request.params.queryId, request.body, now()),
  );

  api.delete(
    '/v1/queries/:queryId',
    {
      config: { scope: 'queries:write' },
      schema: {
        tags,
        operationId: 'deleteQuery',
        summary: 'Delete a saved query (409 while an active trigger uses it)',
        params: QueryParams,
        response: { 204: Type.Null(), ...commonErrors, 409: ErrorBody },
      },
    },
    async (request, reply) => {
      await deleteQuery(container.db, request.ctx, request.params.queryId, now());
      return reply.code(204).send(null);
    },
  );
}
