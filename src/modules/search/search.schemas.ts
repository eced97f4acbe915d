import { Type, type Static } from '@sinclair/typebox';
import { TagSlug, Uuid, named } from '../../http/schemas/common.js';

/** The record types search and saved queries work on (interface spec, "Query" and "Search hit"). */
export const RESOURCE_TYPES = ['Patient', 'Pathway', 'Practitioner'] as const;
export type ResourceType = (typeof RESOURCE_TYPES)[number];
export const ResourceTypeSchema = Type.Union(RESOURCE_TYPES.map((type) => Type.Literal(type)));

/** DESIGN §8: filters are ANDed, at most 20 of them. */
export const MAX_FILTERS = 20;

export const TagFilter = Type.Object(
  {
    op: Type.Union([Type.Literal('with'), Type.Literal('without')]),
    tag: TagSlug,
  },
  { additionalProperties: false },
);
export type TagFilter = Static<typeof TagFilter>;

export const TagFilters = Type.Array(TagFilter, { maxItems: MAX_FILTERS, description: `ANDed; at most ${MAX_FILTERS}` });

export const SEARCH_ORDERS = ['name', 'createdAt', 'updatedAt', 'extId'] as const;
export type SearchOrder = (typeof SEARCH_ORDERS)[number];

/**
 * Offset paging reads and throws away `offset` rows on every call, so a deep offset is a slow
 * query. The cap keeps one call bounded; past it, narrow the filters instead.
 */
export const MAX_OFFSET = 100_000;
export const MAX_SEARCH_LIMIT = 500;
export const DEFAULT_SEARCH_LIMIT = 100;

export const SearchBody = named('SearchRequest', Type.Object(
  {
    resourceType: ResourceTypeSchema,
    filters: Type.Optional(TagFilters),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: MAX_SEARCH_LIMIT, default: DEFAULT_SEARCH_LIMIT })),
    offset: Type.Optional(
      Type.Integer({ minimum: 0, maximum: MAX_OFFSET, default: 0, description: `at most ${MAX_OFFSET}; narrow the filters to reach further` }),
    ),
    order: Type.Optional(Type.Union(SEARCH_ORDERS.map((order) => Type.Literal(order)), { default: 'name' })),
    orderDirection: Type.Optional(Type.Union([Type.Literal('asc'), Type.Literal('desc')], { default: 'asc' })),
  },
  { additionalProperties: false },
));
export type SearchBody = Static<typeof SearchBody>;

export const SearchHit = named('SearchHit', Type.Object({
  id: Uuid,
  extId: Type.String(),
  name: Type.String(),
  resourceType: ResourceTypeSchema,
  tags: Type.Array(Type.String()),
}));
export type SearchHit = Static<typeof SearchHit>;

export const SearchResult = named('SearchResult', Type.Object({
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
  results: Type.Array(SearchHit),
}));
export type SearchResult = Static<typeof SearchResult>;

export const CountResult = named('Count', Type.Object({ total: Type.Integer() }));

