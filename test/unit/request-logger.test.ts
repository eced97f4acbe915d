import Fastify, { LogController, type FastifyBaseLogger } from 'fastify';
import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Logger } from '../../src/lib/logger.js';
import { capturedLogger } from '../helpers/log-capture.js';
import { lazyRequestLoggerFactory } from '../../src/http/plugins/request-logger.js';

/** An app wired as http/app.ts wires its logger: request ids under `requestId`, the lazy factory. */
function appWith(logger: Logger, logRequests: boolean) {
  const app = Fastify({
    loggerInstance: logger as FastifyBaseLogger,
    logController: new LogController({ disableRequestLogging: !logRequests, requestIdLogLabel: 'requestId' }),
    childLoggerFactory: lazyRequestLoggerFactory,
    genReqId: () => 'req-fixed-1',
  });
  app.get('/quiet', async (request) => {
    request.log.info({ secret: 'whsec_never_logged' }, 'an info line');
    return { ok: true };
  });
  app.get('/loud', async (request) => {
    request.log.error({ secret: 'whsec_never_logged', resource: { resourceType: 'Patient' } }, 'an error line');
    return { ok: true };
  });
  app.get('/debugging', { logLevel: 'debug' }, async (request) => {
    request.log.debug('a debug line');
    return { ok: true };
  });
  return app;
}

describe('request logger (made only when it writes)', () => {
  const apps: ReturnType<typeof appWith>[] = [];
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
  });

  it('makes no child logger for a request that writes nothing at an enabled level', async () => {
    const { logger, lines } = capturedLogger('error');
    const app = appWith(logger, false);
    apps.push(app);
    await app.ready();
    const child = vi.spyOn(app.log, 'child');
    const res = await app.inject({ method: 'GET', url: '/quiet' });
    expect(res.statusCode).toBe(200);
    expect(child).not.toHaveBeenCalled();
    expect(lines).toEqual([]);
  });

  it('writes enabled lines through a real child: request id bound, secrets and resources redacted', async () => {
    const { logger, lines } = capturedLogger('error');
    const app = appWith(logger, false);
    apps.push(app);
    await app.ready();
    const child = vi.spyOn(app.log, 'child');
    await app.inject({ method: 'GET', url: '/loud' });
    expect(child).toHaveBeenCalledTimes(1);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 50, msg: 'an error line', requestId: 'req-fixed-1', secret: '[redacted]', resource: '[redacted]' });
    expect(JSON.stringify(lines)).not.toContain('whsec_never_logged');
  });

  it("honours a route's own log level", async () => {
    const { logger, lines } = capturedLogger('error');
    const app = appWith(logger, false);
    apps.push(app);
    await app.inject({ method: 'GET', url: '/debugging' });
    expect(lines.map((line) => line.msg)).toEqual(['a debug line']);
    expect(lines[0].requestId).toBe('req-fixed-1');
  });

  it('keeps request logging as it was: method, path without query, status, request id; no headers', async () => {
    const { logger, lines } = capturedLogger('info');
    const app = appWith(logger, true);
    apps.push(app);
    await app.inject({ method: 'GET', url: '/quiet?q=diabetes', headers: { authorization: 'Bearer cp_test_secret' } });
    const messages = lines.map((line) => line.msg);
    expect(messages).toEqual(['incoming request', 'an info line', 'request completed']);
    expect(lines.every((line) => line.requestId === 'req-fixed-1')).toBe(true);
    expect(lines[0].req).toEqual({ method: 'GET', url: '/quiet', id: 'req-fixed-1' });
    expect(lines[2].res).toEqual({ statusCode: 200 });
    const text = JSON.stringify(lines);
    expect(text).not.toContain('cp_test_secret');
    expect(text).not.toContain('diabetes');
    expect(text).not.toContain('whsec_never_logged');
  });
});
