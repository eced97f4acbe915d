import { Type, type Static } from '@sinclair/typebox';
import { CursorParam, PageLimit, Timestamp, Uuid, named } from '../../http/schemas/common.js';
import { ResourceTypeSchema, TagFilter, TagFilters } from '../search/search.schemas.js';

/** A saved query is a saved search: the same resource type and the same tag filters. */
export const QueryView = named('Query', Type.Object({
  queryId: Uuid,
  name: Type.String(),
  resourceType: ResourceTypeSchema,
  filters: Type.Array(TagFilter),
  createdAt: Timestamp,
  updatedAt: Timestamp,
}));
export type QueryView = Static<typeof QueryView>;

const Name = Type.String({ minLength: 1, maxLength: 200 });

export const CreateQueryBody = named('CreateQuery', Type.Object(
  {
    name: Name,
    resourceType: ResourceTypeSchema,
    filters: Type.Optional(TagFilters),
  },
  { additionalProperties: false },
));
export type CreateQueryBody = Static<typeof CreateQueryBody>;

/** Absent = unchanged; `filters: []` removes every filter. */
export const UpdateQueryBody = named('UpdateQuery', Type.Object(
  {
    name: Type.Optional(Name),
    resourceType: Type.Optional(ResourceTypeSchema),
    filters: Type.Optional(TagFilters),
  },
  { additionalProperties: false },
));
export type UpdateQueryBody = Static<typeof UpdateQueryBody>;

export const ListQueriesQuery = Type.Object(
  {
    q: Type.Optional(Type.String({ minLength: 1, maxLength: 200, description: 'part of the name, any case' })),
    resourceType: Type.Optional(ResourceTypeSchema),
    limit: Type.Optional(PageLimit),
    cursor: Type.Optional(CursorParam),
  },
  { additionalProperties: false },
);
export type ListQueriesQuery = Static<typeof ListQueriesQuery>;
