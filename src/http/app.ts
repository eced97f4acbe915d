/**
 * Builds the Fastify app; never listens (server.ts does). Public routes (health, metrics,
 * OpenAPI, webhook deliveries) sit at the top level; every other /v1 route is registered inside
 * one context whose hook demands an API key, so a new route cannot be public by accident.
 */
import Fastify, { type FastifyBaseLogger } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Registry } from 'prom-client';
import type { Container } from '../container.js';
import type { Api } from './types.js';
import { requestIdFrom } from './plugins/request-id.js';
import { lazyRequestLoggerFactory } from './plugins/request-logger.js';
import { RequestLogLines } from './plugins/request-log-lines.js';
import { answerFrameworkError, registerErrorHandling } from './plugins/errors.js';
import { acceptJsonOnly } from './plugins/json-body.js';
import { refuseUnknownQueryParameters, useStrictValidation } from './plugins/validation.js';
import { registerOpenApi } from './plugins/openapi.js';
import { registerMetrics } from './plugins/metrics.js';
import { registerStoreGauges } from './plugins/store-metrics.js';
import { requireApiKey } from './plugins/authenticate.js';
import { registerHealthRoutes } from './routes/health.js';
import { registerMeRoutes } from './routes/me.js';
import { apiRouteModules, publicRouteModules } from './routes/index.js';
import { answerClientError } from './plugins/client-errors.js';
import { ANSWER_HEADERS } from './answer-headers.js';
import { answerWritesOnceDurable } from './plugins/durable-answers.js';

export const API_BODY_LIMIT = 1024 * 1024;

/**
 * A whole request, headers and body, must arrive within this; a slower one is answered 408 and
 * its connection closed. Fastify's default is no limit at all (it even turns off Node's own 300
 * s), which lets a client that trickles a body (a byte a minute, slowloris) hold a connection
 * and its buffered body for ever. Two minutes carries a 20 MiB delivery over a 2 Mbit/s link.
 */
export const REQUEST_TIMEOUT_MS = 120_000;

export interface AppOptions {
  /** Request logging (off in tests). */
  logRequests?: boolean;
  /** Tests shorten the request deadline (REQUEST_TIMEOUT_MS) to see it act. */
  requestTimeoutMs?: number;
}

export async function buildApp(container: Container, options: AppOptions = {}): Promise<Api> {
  const requestTimeout = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  const app = Fastify({
    loggerInstance: container.logger as FastifyBaseLogger,
    logController: new RequestLogLines({ disableRequestLogging: !options.logRequests, requestIdLogLabel: 'requestId' }),
    childLoggerFactory: lazyRequestLoggerFactory,
    bodyLimit: API_BODY_LIMIT,
    genReqId: requestIdFrom,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    requestTimeout,
    clientErrorHandler: answerClientError,
    frameworkErrors: answerFrameworkError,
    http: {
      headersTimeout: Math.min(60_000, requestTimeout),
      // Node looks for late requests this often (30 s by default, so a 60 s limit answered at
      // 77 s: a docs review): every 5 s, a scan of open connections, or sooner for short limits.
      connectionsCheckingInterval: Math.min(5_000, Math.ceil(requestTimeout / 4)),
    },
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.addHook('onRequest', async (request, reply) => {
    reply.header('X-Request-Id', request.id);
    reply.headers(ANSWER_HEADERS);
  });
  answerWritesOnceDurable(app, container.store);
  registerErrorHandling(app);
  acceptJsonOnly(app);
  useStrictValidation(app);
  await registerOpenApi(app, container.config.publicUrl);

  const registry = new Registry();
  app.decorate('metricsRegistry', registry);
  registerMetrics(app, registry);
  registerStoreGauges(registry, container.db, container.clock);
  registerHealthRoutes(app, container);
  for (const register of publicRouteModules) await register(app, container);

  await app.register(async (api) => {
    requireApiKey(api, container);
    refuseUnknownQueryParameters(api);
    registerMeRoutes(api as Api);
    for (const register of apiRouteModules) await register(api as Api, container);
  });

  return app;
}
