import type { FastifyInstance } from 'fastify';
import { Counter, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/**
 * Prometheus metrics on `/metrics`, with a registry per app (no global state): request counts and
 * latencies by route pattern (never by raw URL, which holds ids), plus Node's process metrics.
 * Other parts add their own gauges to `registry`.
 */
export function registerMetrics(app: FastifyInstance, registry: Registry): void {
  collectDefaultMetrics({ register: registry });
  const requests = new Counter({
    name: 'carepath_http_requests_total',
    help: 'HTTP requests answered',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'carepath_http_request_duration_seconds',
    help: 'Time to answer HTTP requests',
    labelNames: ['method', 'route'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });

  // The labelled series of each (method, route, status), looked up once: prom-client hashes a
  // label object on every inc and observe otherwise. Routes are patterns, so the map stays small.
  const series = new Map<string, { answered: Counter.Internal; took: Histogram.Internal<string> }>();
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    const name = `${request.method} ${reply.statusCode} ${route}`;
    let found = series.get(name);
    if (!found) {
      found = {
        answered: requests.labels({ method: request.method, route, status: String(reply.statusCode) }),
        took: latency.labels({ method: request.method, route }),
      };
      series.set(name, found);
    }
    found.answered.inc();
    found.took.observe(reply.elapsedTime / 1000);
    done();
  });

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    reply.header('Content-Type', registry.contentType);
    return registry.metrics();
  });
}
