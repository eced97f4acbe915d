/**
 * What the HTTP error mapper writes to the log when something nobody expected fails: where it
 * failed (type, code, stack frames), never the error's words, which may quote health data.
 */
import Fastify, { LogController, type FastifyBaseLogger } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { registerErrorHandling } from '../../src/http/plugins/errors.js';
import { loggableError } from '../../src/lib/store-errors.js';
import { capturedLogger } from '../helpers/log-capture.js';

/** A message as a driver or a parser might write it, quoting what it choked on, over two lines. */
const QUOTING = 'invalid input syntax for type date: "Jane Doe 1970-01-01"\n    at Patient/4711 (Jane Doe)';

function failingRoute(): never {
  throw Object.assign(new Error(QUOTING), { code: '22007' });
}

describe('unexpected errors in the log', () => {
  const apps: ReturnType<typeof Fastify>[] = [];
  afterEach(async () => {
    for (const app of apps.splice(0)) await app.close();
  });

  it('answers 500 internal, and logs type, code and frames but not the words', async () => {
    const { logger, lines } = capturedLogger('info');
    const app = Fastify({ loggerInstance: logger as FastifyBaseLogger, logController: new LogController({ disableRequestLogging: true }), genReqId: () => 'req-err-1' });
    apps.push(app);
    registerErrorHandling(app);
    app.get('/fails', async () => failingRoute());
    const res = await app.inject({ method: 'GET', url: '/fails' });
    expect(res.statusCode).toBe(500);
    expect(res.json()).toEqual({ error: 'internal server error', code: 'internal', requestId: 'req-err-1' });
    const logged = lines.find((line) => line.msg === 'unexpected error') as { err: { type: string; code: string; frames: string[]; message?: string } };
    expect(logged.err.type).toBe('Error');
    expect(logged.err.code).toBe('22007');
    expect(logged.err.message).toBeUndefined();
    // The first frame is the function that threw, in this file: enough to find the bug.
    expect(logged.err.frames[0]).toMatch(/^failingRoute \(.*error-logging\.test\.ts:\d+:\d+\)$/);
    expect(JSON.stringify(lines)).not.toMatch(/Jane|4711|1970/);
  });

  it('keeps the words of a store that did not answer (they name a host, not data)', async () => {
    const { logger, lines } = capturedLogger('info');
    const app = Fastify({ loggerInstance: logger as FastifyBaseLogger, logController: new LogController({ disableRequestLogging: true }) });
    apps.push(app);
    registerErrorHandling(app);
    app.get('/down', async () => {
      throw Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:5432'), { code: 'ECONNREFUSED' });
    });
    app.get('/up', async () => ({ ok: true }));
    const res = await app.inject({ method: 'GET', url: '/down' });
    expect(res.statusCode).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(res.json()).toMatchObject({ code: 'store_unavailable' });
    const logged = lines.find((line) => line.msg === 'the store did not answer');
    // The error's own type, not "Object", and no empty stack (pino's serializer took the logged
    // fields for an error and rewrote them).
    expect(logged?.err).toEqual({ type: 'Error', code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:5432' });

    // In an outage every request meets it: one line a second at most, each request still 503.
    for (let i = 0; i < 20; i++) expect((await app.inject({ method: 'GET', url: '/down' })).statusCode).toBe(503);
    expect(lines.filter((line) => line.msg === 'the store did not answer')).toHaveLength(1);
    // The first request that gets through counts the ones not logged.
    expect((await app.inject({ method: 'GET', url: '/up' })).statusCode).toBe(200);
    expect(lines.filter((line) => line.msg === 'the store answers again').map((line) => line.unloggedSinceLast)).toEqual([20]);
    expect((await app.inject({ method: 'GET', url: '/up' })).statusCode).toBe(200);
    expect(lines.filter((line) => line.msg === 'the store answers again')).toHaveLength(1);
  });
});

describe('err in a log line', () => {
  it('keeps what loggableError gave as it is, and treats an Error logged as it is the same way', () => {
    const { logger, lines } = capturedLogger('info');
    logger.warn({ err: loggableError(Object.assign(new TypeError('timeout exceeded when trying to connect'), { code: 'X1' })) }, 'given');
    logger.warn({ err: Object.assign(new Error(QUOTING), { code: '22007' }) }, 'raw');
    expect(lines[0].err).toEqual({ type: 'TypeError', code: 'X1', message: 'timeout exceeded when trying to connect' });
    expect(lines[1].err).toMatchObject({ type: 'Error', code: '22007', frames: expect.any(Array) });
    expect(JSON.stringify(lines)).not.toMatch(/Jane|4711|1970/);
  });
});

describe('loggableError frames', () => {
  it('keeps at most 10 frames, none of them a line of the message', () => {
    const deep = (n: number): never => (n === 0 ? failingRoute() : deep(n - 1));
    let caught: unknown;
    try {
      deep(30);
    } catch (error) {
      caught = error;
    }
    const { frames } = loggableError(caught, { frames: true });
    expect(frames).toHaveLength(10);
    expect(frames![0]).toMatch(/^failingRoute /);
    expect(frames!.join('\n')).not.toMatch(/Jane|4711/);
  });

  it('gives no frames unless asked, and none for what is not an Error', () => {
    expect(loggableError(new Error('x'))).not.toHaveProperty('frames');
    expect(loggableError({ stack: '    at secret (data)' }, { frames: true })).toEqual({ type: 'object' });
  });
});

describe('errors that say no data', () => {
  it('keep their words: a secret that does not open says so in the log', async () => {
    const { createSecretBox, SecretBoxError } = await import('../../src/lib/secret-box.js');
    let failure: unknown;
    try {
      createSecretBox('e'.repeat(64)).open(createSecretBox('f'.repeat(64)).seal('whsec_x'));
    } catch (error) {
      failure = error;
    }
    expect(failure).toBeInstanceOf(SecretBoxError);
    expect(loggableError(failure)).toEqual({ type: 'SecretBoxError', message: 'sealed secret does not open with the configured key (wrong key, or the row is damaged)' });
    expect(loggableError(new Error('invalid input syntax for type date: "1961-02-30"'))).toEqual({ type: 'Error' });
  });
});
