import { Type } from '@sinclair/typebox';
import type { Api } from '../types.js';
import type { Container } from '../../container.js';
import { CursorParam, ErrorBody, IdParams, commonErrors } from '../schemas/common.js';
import { answerCreate, CREATE_KEY_DESCRIPTION, IdempotencyKeyHeaders } from '../idempotency-header.js';
import {
  CreateWebhookBody,
  CreatedWebhook,
  UpdateWebhookBody,
  WebhookView,
} from '../../modules/webhooks/webhook.schemas.js';
import { findWebhook, listWebhooks, toWebhookView } from '../../modules/webhooks/webhook.repository.js';
import { changeWebhook, createWebhook, deleteWebhook } from '../../modules/webhooks/webhook.service.js';
import { createSecretBox } from '../../lib/secret-box.js';
import { notFound } from '../../lib/errors.js';

const WebhookParams = IdParams('webhookId');

/** `limit` has no default here: without it the bare array holds every endpoint, as it always did. */
const ListWebhooksQuery = Type.Object(
  {
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
    cursor: Type.Optional(CursorParam),
  },
  { additionalProperties: false },
);

/**
 * Managing webhook endpoints (API key, webhooks:read / webhooks:write). Deliveries to an
 * endpoint's URL are another route, outside the API-key context: they are signed instead.
 */
export function registerWebhookRoutes(api: Api, container: Container): void {
  const now = () => container.clock.now();
  const { publicUrl } = container.config;
  const deps = { db: container.db, box: createSecretBox(container.config.secretKey), publicUrl };
  const tags = ['Webhook endpoints'];
  /** The webhook endpoint as it is now (a GET, and the replay of a keyed create); 404 when it is gone. */
  const currentWebhook = async (workspaceId: string, webhookId: string) => {
    const row = await findWebhook(container.db, workspaceId, webhookId);
    if (!row) throw notFound('webhook endpoint');
    return toWebhookView(row, publicUrl);
  };

  api.post(
    '/v1/webhooks',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        tags,
        operationId: 'createWebhook',
        summary: 'Create a webhook endpoint; its secret is shown only in this answer',
        description:
          '`auth` is `signature` (default: deliveries carry `X-Service-Signature`) or `bearer` (the secret is sent as ' +
          '`Authorization: Bearer <secret>`, for systems that cannot sign). It cannot be changed later. ' +
          CREATE_KEY_DESCRIPTION +
          ' A replay holds no `secret`: it is shown once, in the first answer (lost with it, rotate it: `carepath admin webhook rotate-secret`).',
        body: CreateWebhookBody,
        headers: IdempotencyKeyHeaders,
        response: { 200: WebhookView, 201: CreatedWebhook, ...commonErrors, 409: ErrorBody },
      },
    },
    async (request, reply) =>
      answerCreate(
        request,
        reply,
        container.db,
        'webhook',
        (createKey) => createWebhook(deps, request.ctx, request.body, now(), createKey),
        (webhookId) => currentWebhook(request.ctx.workspaceId, webhookId),
      ),
  );

  api.get(
    '/v1/webhooks',
    {
      config: { scope: 'webhooks:read' },
      schema: {
        tags,
        operationId: 'listWebhooks',
        summary: 'List webhook endpoints, newest first (no secrets)',
        description:
          'A bare array (the spec says so). Without `limit` it holds every endpoint. With `limit`, a page: when more ' +
          'follow, the answer carries `Link: </v1/webhooks?limit=…&cursor=…>; rel="next"` (RFC 8288), the URL of the next page.',
        querystring: ListWebhooksQuery,
        response: {
          200: Type.Array(WebhookView),
          ...commonErrors,
        },
      },
    },
    async (request, reply) => {
      const { data, nextCursor } = await listWebhooks(container.db, request.ctx.workspaceId, request.query);
      if (nextCursor) reply.header('Link', `<${publicUrl}/v1/webhooks?limit=${request.query.limit}&cursor=${nextCursor}>; rel="next"`);
      return data.map((row) => toWebhookView(row, publicUrl));
    },
  );

  api.get(
    '/v1/webhooks/:webhookId',
    {
      config: { scope: 'webhooks:read' },
      schema: { tags, operationId: 'getWebhook', summary: 'Get a webhook endpoint (no secret)', params: WebhookParams, response: { 200: WebhookView, ...commonErrors } },
    },
    async (request) => currentWebhook(request.ctx.workspaceId, request.params.webhookId),
  );

  api.patch(
    '/v1/webhooks/:webhookId',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        tags,
        operationId: 'updateWebhook',
        summary: 'Rename, activate or deactivate a webhook endpoint',
        params: WebhookParams,
        body: UpdateWebhookBody,
        response: { 200: WebhookView, ...commonErrors },
      },
    },
    async (request) => changeWebhook(deps, request.ctx, request.params.webhookId, request.body, now()),
  );

  api.delete(
    '/v1/webhooks/:webhookId',
    {
      config: { scope: 'webhooks:write' },
      schema: {
        tags,
        operationId: 'deleteWebhook',
        summary: 'Delete a webhook endpoint; deliveries to it are refused from then on',
        params: WebhookParams,
        response: { 204: Type.Null(), ...commonErrors },
      },
    },
    async (request, reply) => {
      await deleteWebhook(container.db, request.ctx, request.params.webhookId, now());
      return reply.code(204).send(null);
    },
  );
}
