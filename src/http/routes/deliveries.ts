/**
 * `POST /v1/webhooks/{webhookId}`: signed deliveries (interface spec "Deliver data", DESIGN §7).
 * Public: no API key; the signature (or, for bearer endpoints, the secret) proves the sender.
 *
 * Its own encapsulated context, because the HMAC is over the raw bytes: here `application/json`
 * (or FHIR's `application/fhir+json`) is read as a Buffer (up to 20 MiB) and parsed only after
 * the signature checks out; any other content type is 415. The order of answers:
 *   404 unknown or deleted endpoint (checked first, before the body is read)
 *   413 / 415 body too large / not JSON
 *   401 `invalid_signature` | `signature_expired` (429 once the endpoint's budget for refused
 *       deliveries is spent)
 *   429 the endpoint's rate limit, for deliveries that proved the secret
 *   403 `webhook_inactive` (told only to a sender who proved the secret), unless the request
 *       repeats a delivery stored before the endpoint was switched off: its 202 again
 *   400 not JSON, or not an accepted body shape; bad Idempotency-Key
 *   409 `idempotency_mismatch`
 *   202 `{accepted, idempotencyKey}` once the delivery is stored
 *
 * Two budgets per endpoint (RateLimit-* headers from the one a request drew on): deliveries that
 * prove the secret spend `webhook:<id>`, refused ones `webhook-refused:<id>`. With one budget
 * spent before the signature was checked, anyone who knew an endpoint's URL could keep its real
 * sender at 429 with junk (a security review: 7 of 10 signed deliveries refused during a flood).
 */
import { Type } from '@sinclair/typebox';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Api } from '../types.js';
import type { Container } from '../../container.js';
import { ErrorBody, IdParams, Nullable, named } from '../schemas/common.js';
import { rateLimitedError, setRateLimitHeaders } from '../plugins/authenticate.js';
import { ApiError, notFound } from '../../lib/errors.js';
import { createSecretBox } from '../../lib/secret-box.js';
import { refuseOtherCharsets } from '../../lib/utf8-text.js';
import { SIGNATURE_HEADER } from '../../ingestion/signature.js';
import { checkDeliveryCredentials, findDeliveryEndpoint, type DeliveryEndpoint } from '../../modules/deliveries/delivery-endpoint.js';
import { receiveDelivery, replayedDelivery } from '../../modules/deliveries/delivery-intake.js';
import { idempotencyKeyHeader } from '../idempotency-header.js';

/** DESIGN §2: webhook deliveries up to 20 MiB (413 beyond). */
export const MAX_DELIVERY_BYTES = 20 * 1024 * 1024;

const Accepted = named('DeliveryAccepted', Type.Object({
  accepted: Type.Integer({ description: 'resources and records accepted for processing' }),
  idempotencyKey: Nullable(Type.String()),
}));

export async function registerDeliveryRoutes(app: Api, container: Container): Promise<void> {
  const box = createSecretBox(container.config.secretKey);

  await app.register(async (scope) => {
    // Looked up once in onRequest, read by the handler; per app, never module state.
    const endpoints = new WeakMap<FastifyRequest, DeliveryEndpoint>();

    scope.removeAllContentTypeParsers();
    // FHIR's own media type is JSON too: an EHR's subscription sends `application/fhir+json`
    // (often with `; fhirVersion=4.0`), and the raw bytes are what the signature covers either way.
    for (const type of ['application/json', 'application/fhir+json']) {
      // Its charset and its bytes are looked at once the sender has proved its secret (the handler, the intake).
      scope.addContentTypeParser(type, { parseAs: 'buffer', bodyLimit: MAX_DELIVERY_BYTES }, (_request, body, done) => done(null, body));
    }

    scope.addHook('onRequest', async (request) => {
      const { webhookId } = request.params as { webhookId?: string };
      const endpoint = webhookId === undefined ? undefined : await findDeliveryEndpoint(container.db, webhookId);
      if (!endpoint) throw notFound('webhook endpoint');
      endpoints.set(request, endpoint);
    });

    /** Spends one from a budget of the endpoint; 429 once it is empty. */
    const spend = async (reply: FastifyReply, bucket: string) => {
      const decision = await container.rateLimiter.take(bucket);
      setRateLimitHeaders(reply, decision);
      if (!decision.allowed) throw rateLimitedError(decision);
    };

    scope.post(
      '/v1/webhooks/:webhookId',
      {
        bodyLimit: MAX_DELIVERY_BYTES,
        schema: {
          tags: ['Webhook deliveries'],
          operationId: 'deliverToWebhook',
          summary: 'Deliver data: a FHIR R4 Bundle or resource, or plain records (signed)',
          description:
            'Authenticated by `X-Service-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">` ' +
            '(or, for endpoints created with `auth: "bearer"`, `Authorization: Bearer <endpoint secret>`), not by an ' +
            'API key. `t` must be within 300 s of the service clock. Send `Idempotency-Key`: a replay with the same ' +
            'key and body answers the first 202 again and processes nothing twice. Processing is asynchronous: see ' +
            '`GET /v1/webhooks/{webhookId}/deliveries`.',
          security: [{ webhookSignature: [] }, { webhookBearer: [] }],
          params: IdParams('webhookId'),
          response: { 202: Accepted, 400: ErrorBody, 401: ErrorBody, 403: ErrorBody, 404: ErrorBody, 409: ErrorBody, 413: ErrorBody, 415: ErrorBody, 429: ErrorBody, 503: ErrorBody },
        },
      },
      async (request, reply) => {
        const endpoint = endpoints.get(request);
        if (!endpoint) throw new ApiError('internal', 'webhook endpoint was not resolved');
        const rawBody = Buffer.isBuffer(request.body) ? request.body : Buffer.alloc(0);
        const now = container.clock.now();
        let signedAt: number | null;
        try {
          ({ signedAt } = await checkDeliveryCredentials(
            { db: container.db, box },
            endpoint,
            { signature: request.headers[SIGNATURE_HEADER], authorization: request.headers.authorization },
            rawBody,
            now,
          ));
        } catch (error) {
          if (error instanceof ApiError && error.status === 401) await spend(reply, `webhook-refused:${endpoint.id}`);
          throw error;
        }
        await spend(reply, `webhook:${endpoint.id}`);
        refuseOtherCharsets(request.headers['content-type']);
        const input = { rawBody, idempotencyKey: idempotencyKeyHeader(request), signedAt, requestId: request.id, now };
        const result = endpoint.active
          ? await receiveDelivery(container.db, container.deliveryReader, endpoint, input)
          : await replayedDelivery(container.db, endpoint, input);
        if (!result) throw new ApiError('webhook_inactive', 'this webhook endpoint is inactive; activate it to receive deliveries');
        if (result.replayed) reply.header('Idempotent-Replayed', 'true');
        else container.signals.notify('deliveries');
        return reply.code(202).send({ accepted: result.accepted, idempotencyKey: result.idempotencyKey });
      },
    );
  });
}
