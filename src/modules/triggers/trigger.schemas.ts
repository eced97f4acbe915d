import { Type, type Static, type TSchema } from '@sinclair/typebox';
import { Nullable, Timestamp, Uuid, PageLimit, CursorParam, named } from '../../http/schemas/common.js';

export const TriggerType = Type.Union([Type.Literal('web'), Type.Literal('search'), Type.Literal('event')]);

/**
 * Event names are `<ResourceType>.<word>`: Encounter.finished, Patient.created (DESIGN §7). The
 * pattern takes the shape only, in either case: which names carepath raises is the service's to
 * say (ingestion/events.ts `eventNameProblem`), with the near miss named (`encounter` →
 * `Encounter`) instead of a pattern's generic refusal.
 */
export const EventName = Type.String({
  pattern: '^[A-Za-z]{1,64}\\.[A-Za-z0-9][A-Za-z0-9._-]{0,63}$',
  description: 'event type to match, such as Encounter.finished',
});

/**
 * An event trigger's condition: FHIRPath over `{payload: {event, resource, deliveryId}}`, as a
 * blueprint link's `when`. Checked when set (it must compile), evaluated per event.
 */
export const TriggerWhen = Type.String({
  minLength: 1,
  maxLength: 2000,
  description: "event triggers: FHIRPath a run must meet to start, over {payload: {event, resource, deliveryId}}, such as payload.resource.code.coding.where(code = '4548-4').exists()",
});

export const ScheduleBody = Type.Object(
  {
    interval: Type.String({ minLength: 1, maxLength: 100, description: 'ISO 8601 duration (PT15M, P1D) or 5-field cron' }),
    timezone: Type.String({ minLength: 1, maxLength: 64, description: 'IANA time zone name' }),
    startAt: Type.Optional(Nullable(Type.String({ maxLength: 40 }))),
  },
  { additionalProperties: false },
);

export const ScheduleView = named('Schedule', Type.Object({
  interval: Type.String(),
  timezone: Type.String(),
  startAt: Type.Optional(Type.String()),
}));

export const TriggerView = named('Trigger', Type.Object({
  triggerId: Uuid,
  name: Type.String(),
  sourceId: Uuid,
  type: TriggerType,
  queryId: Nullable(Uuid),
  event: Nullable(Type.String()),
  when: Nullable(Type.String()),
  schedule: Nullable(ScheduleView),
  nextRunAt: Nullable(Timestamp),
  autoStart: Type.Boolean(),
  active: Type.Boolean(),
  onePerSubject: Nullable(Type.Boolean()),
  createdAt: Timestamp,
  updatedAt: Timestamp,
}));
export type TriggerView = Static<typeof TriggerView>;

const Name = Type.String({ minLength: 1, maxLength: 200 });

/**
 * A type-specific field, described so that the OpenAPI document says what validation does: its
 * null is for a trigger of its own type (a PATCH clears the field with it); sent for another
 * type, null too, it is refused (DESIGN §2). A client generator that writes every unset field
 * as null would otherwise learn it from a 400 (a conformance review).
 */
const OnlyFor = <T extends TSchema>(types: string, schema: T): T =>
  ({ ...schema, description: `${types[0].toUpperCase()}${types.slice(1)} triggers only: sent for a trigger of another type, also as null, it is refused with 400 invalid_request.` }) as T;

export const CreateTriggerBody = named('CreateTrigger', Type.Object(
  {
    name: Name,
    sourceId: Uuid,
    type: TriggerType,
    autoStart: Type.Optional(Type.Boolean()),
    active: Type.Optional(Type.Boolean()),
    queryId: Type.Optional(OnlyFor('search', Nullable(Uuid))),
    schedule: Type.Optional(OnlyFor('search', Nullable(ScheduleBody))),
    event: Type.Optional(OnlyFor('event', Nullable(EventName))),
    when: Type.Optional(OnlyFor('event', Nullable(TriggerWhen))),
    onePerSubject: Type.Optional(OnlyFor('search and event', Nullable(Type.Boolean()))),
  },
  { additionalProperties: false },
));
export type CreateTriggerBody = Static<typeof CreateTriggerBody>;

export const UpdateTriggerBody = named('UpdateTrigger', Type.Object(
  {
    name: Type.Optional(Name),
    sourceId: Type.Optional(Uuid),
    autoStart: Type.Optional(Type.Boolean()),
    active: Type.Optional(Type.Boolean()),
    queryId: Type.Optional(OnlyFor('search', Nullable(Uuid))),
    schedule: Type.Optional(OnlyFor('search', Nullable(ScheduleBody))),
    event: Type.Optional(OnlyFor('event', Nullable(EventName))),
    when: Type.Optional(OnlyFor('event', Nullable(TriggerWhen))),
    onePerSubject: Type.Optional(OnlyFor('search and event', Nullable(Type.Boolean()))),
    // Present only to answer a clear "type cannot be changed" rather than "unknown field".
    type: Type.Optional(Type.Unknown()),
  },
  { additionalProperties: false },
));
export type UpdateTriggerBody = Static<typeof UpdateTriggerBody>;

export const ListTriggersQuery = Type.Object(
  {
    type: Type.Optional(TriggerType),
    active: Type.Optional(Type.Boolean()),
    sourceId: Type.Optional(Uuid),
    limit: Type.Optional(PageLimit),
    cursor: Type.Optional(CursorParam),
  },
  { additionalProperties: false },
);
export type ListTriggersQuery = Static<typeof ListTriggersQuery>;

/** An Idempotency-Key given in a body: the header's rule (1–255 printable ASCII characters). */
export const IdempotencyKeyText = Type.String({ minLength: 1, maxLength: 255, pattern: '^[\\x20-\\x7e]+$' });

export const FireBody = named('FireTrigger', Type.Object(
  {
    payload: Type.Optional(Type.Unknown({ description: 'context for the run (any JSON)' })),
    idempotencyKey: Type.Optional(IdempotencyKeyText),
    autoStart: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
));
export type FireBody = Static<typeof FireBody>;
