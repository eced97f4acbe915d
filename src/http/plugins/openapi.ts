import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { ErrorBody } from '../schemas/common.js';
import { documentCommonHeaders } from './openapi-headers.js';

/**
 * The OpenAPI 3.1 document is generated from the very schemas that validate requests and
 * serialize responses, so it cannot drift from the service.
 */
export async function registerOpenApi(app: FastifyInstance, publicUrl: string): Promise<void> {
  app.addSchema(ErrorBody);
  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'carepath',
        version: '1.0.0',
        description:
          'Care Pathway Automation Service. Every call carries `Authorization: Bearer <API key>`; ' +
          'the key scopes it to one workspace of one tenant.',
      },
      servers: [{ url: publicUrl }],
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'cpk_… API key' },
          // A webhook delivery proves the endpoint secret instead (routes/deliveries.ts).
          webhookSignature: {
            type: 'apiKey',
            in: 'header',
            name: 'X-Service-Signature',
            description: '`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, keyed with the endpoint secret (the whole whsec_… string)',
          },
          webhookBearer: { type: 'http', scheme: 'bearer', description: 'the endpoint secret itself, for endpoints created with auth: "bearer"' },
        },
      },
      security: [{ apiKey: [] }],
    },
    // Shared schemas under their own names in components (`Error`), not `def-0`.
    refResolver: { buildLocalReference: (json, _baseUri, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
    // The document is OpenAPI (not Swagger 2), so `openapiObject` is the one given.
    transformObject: (document) => documentCommonHeaders('openapiObject' in document ? document.openapiObject : {}),
  });
  await app.register(swaggerUi, { routePrefix: '/docs' });
  app.get('/v1/openapi.json', { schema: { hide: true } }, async () => app.swagger());
}
