import { Type, type TSchema } from '@sinclair/typebox';
import { RUN_STATUSES, type RunStatus } from '../../engine/run-status.js';

/** Shapes every route shares; each route's own schemas live beside its route file. */
export const ErrorBody = Type.Object(
  {
    error: Type.String(),
    code: Type.Union([Type.String(), Type.Null()]),
    requestId: Type.String(),
  },
  { $id: 'Error', title: 'Error', description: 'Every error response' },
);

/**
 * A schema with a name in the OpenAPI document: `title` is an annotation, so validation and
 * serialization are unchanged, and the document lists the schema once under
 * `components/schemas/<title>` and refers to it wherever it is used (plugins/openapi-headers.ts),
 * so a generated client has one `Run` type rather than an anonymous copy per operation.
 */
export const named = <T extends TSchema>(title: string, schema: T): T => ({ ...schema, title });

/** Taken in either case, answered in lower case (plugins/validation.ts `x-lowercase`). */
export const Uuid = Type.String({ format: 'uuid', description: 'UUID', 'x-lowercase': true });
export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC with milliseconds' });
/**
 * A run's automation status (spec: AutomationStatus), one schema wherever a run is shown: one
 * `enum`, which generated clients turn into an enumeration (a union of literals reads as eight
 * one-value schemas).
 */
export const AutomationStatus = Type.Unsafe<RunStatus>({ type: 'string', enum: [...RUN_STATUSES], description: 'AutomationStatus' });
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);

export const IdParams = (name: string) => Type.Object({ [name]: Uuid }, { additionalProperties: false });

/**
 * Marks a route schema whose body may be left out (the route's preValidation fills it in): the
 * OpenAPI document then says `requestBody.required: false` (plugins/openapi-headers.ts), where
 * the generator would say true for every body schema.
 */
export const BODY_OPTIONAL = 'x-body-optional';

/**
 * The body of an action that takes no fields (run actions, evaluate): none at all is the usual
 * call, `{}` is the same, and any field is refused by name like every other unknown field.
 * Use with `noBodyIsEmpty` as the route's preValidation.
 */
export const EmptyBody = Type.Object({}, { additionalProperties: false, description: 'no fields; the body may be left out' });
export async function noBodyIsEmpty(request: { body: unknown }): Promise<void> {
  if (request.body === undefined || request.body === null) request.body = {};
}

export const PageLimit = Type.Integer({ minimum: 1, maximum: 100, default: 25 });
export const CursorParam = Type.String({ minLength: 1, maxLength: 512 });

export const ListEnvelope = <T extends TSchema>(item: T) =>
  Type.Object({ data: Type.Array(item), nextCursor: Nullable(Type.String()) });

/** The errors any key-authenticated route may answer, for the OpenAPI document. */
export const commonErrors = {
  400: ErrorBody,
  401: ErrorBody,
  403: ErrorBody,
  404: ErrorBody,
  429: ErrorBody,
  503: ErrorBody,
};

/** Tag slugs (DESIGN §8). */
export const TagSlug = Type.String({ pattern: '^[a-z0-9][a-z0-9._:-]{0,63}$', description: 'tag slug' });
