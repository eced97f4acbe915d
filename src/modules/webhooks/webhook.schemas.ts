import { Type, type Static } from '@sinclair/typebox';
import { Timestamp, Uuid, named } from '../../http/schemas/common.js';

/** How deliveries prove who sent them (DESIGN §7): an HMAC signature, or the secret as a bearer token. */
export const WEBHOOK_AUTHS = ['signature', 'bearer'] as const;
export type WebhookAuth = (typeof WEBHOOK_AUTHS)[number];
export const WebhookAuthSchema = Type.Union(WEBHOOK_AUTHS.map((auth) => Type.Literal(auth)));

export const WebhookView = named('Webhook', Type.Object({
  webhookId: Uuid,
  name: Type.String(),
  url: Type.String({ description: 'where the sending system POSTs its deliveries' }),
  active: Type.Boolean(),
  auth: WebhookAuthSchema,
  createdAt: Timestamp,
  updatedAt: Timestamp,
}));
export type WebhookView = Static<typeof WebhookView>;

export const CreatedWebhook = named('CreatedWebhook', Type.Composite([
  WebhookView,
  Type.Object({ secret: Type.String({ description: 'shown only in this answer; store it now' }) }),
]));
export type CreatedWebhook = Static<typeof CreatedWebhook>;

const Name = Type.String({ minLength: 1, maxLength: 200 });

export const CreateWebhookBody = named('CreateWebhook', Type.Object(
  {
    name: Name,
    active: Type.Optional(Type.Boolean()),
    auth: Type.Optional(WebhookAuthSchema),
  },
  { additionalProperties: false },
));
export type CreateWebhookBody = Static<typeof CreateWebhookBody>;

export const UpdateWebhookBody = named('UpdateWebhook', Type.Object(
  {
    name: Type.Optional(Name),
    active: Type.Optional(Type.Boolean()),
    // Present only to answer a clear "auth cannot be changed" rather than "unknown field".
    auth: Type.Optional(Type.Unknown()),
    // Likewise `secret`: refused with how a secret is rotated (spec: not through the API).
    secret: Type.Optional(Type.Unknown({ description: 'Not settable here: the answer says how to rotate the secret (carepath admin webhook rotate-secret)' })),
  },
  { additionalProperties: false },
));
export type UpdateWebhookBody = Static<typeof UpdateWebhookBody>;
