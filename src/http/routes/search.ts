import type { Api } from '../types.js';
import type { Container } from '../../container.js';
import { commonErrors } from '../schemas/common.js';
import { CountResult, SearchBody, SearchResult } from '../../modules/search/search.schemas.js';
import { countMatching, searchRecords } from '../../modules/search/search.service.js';

export function registerSearchRoutes(api: Api, container: Container): void {
  const now = () => container.clock.now();
  const tags = ['Search'];

  api.post(
    '/v1/search',
    {
      config: { scope: 'search:read' },
      schema: {
        tags,
        operationId: 'searchRecords',
        summary: 'Search patients, pathways or practitioners by tag filters',
        description:
          'Filters are ANDed. `order` is `name` (default), `createdAt`, `updatedAt` or `extId`; ties are broken by id. ' +
          'Patient and Pathway searches are audited as `search.execute` with the ids returned.',
        body: SearchBody,
        response: { 200: SearchResult, ...commonErrors },
      },
    },
    async (request) => searchRecords(container.db, request.ctx, request.body, now()),
  );

  api.post(
    '/v1/search/count',
    {
      config: { scope: 'search:read' },
      schema: {
        tags,
        operationId: 'countRecords',
        summary: 'Count the records a search would find',
        description: 'Same body as search; `limit`, `offset` and the order fields are accepted and ignored.',
        body: SearchBody,
        response: { 200: CountResult, ...commonErrors },
      },
    },
    async (request) => countMatching(container.db, request.ctx, request.body, now()),
  );
}
