/**
 * A client that sends its request too slowly (slowloris: headers or a body a byte at a time) is
 * answered 408 and cut off at the request deadline, and nothing it half-sent is stored. Here
 * the deadline is shortened to 400 ms; the service's own is REQUEST_TIMEOUT_MS (two minutes).
 */
import net, { type AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { buildApp, REQUEST_TIMEOUT_MS } from '../../src/http/app.js';
import type { Api } from '../../src/http/types.js';
import { describeEachStore } from '../helpers/test-env.js';
import { createEndpoint, deliver } from '../helpers/deliveries.js';

const DEADLINE_MS = 400;

/** Sends `head` (and nothing more), then reads until the server closes; answers what it said and when. */
async function trickle(port: number, head: string): Promise<{ answer: string; closedAfterMs: number }> {
  const socket = net.connect(port, '127.0.0.1');
  const started = Date.now();
  let answer = '';
  socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
  socket.write(head);
  // Keep the request alive as a slow client does: a byte now and then, never the whole body.
  const drip = setInterval(() => socket.writable && socket.write(' '), 100);
  await new Promise<void>((resolve) => socket.on('close', () => resolve()));
  clearInterval(drip);
  return { answer, closedAfterMs: Date.now() - started };
}

describeEachStore('slow requests', (env) => {
  let app: Api;
  let port: number;
  beforeAll(async () => {
    app = await buildApp(env.container, { requestTimeoutMs: DEADLINE_MS });
    await app.listen({ host: '127.0.0.1', port: 0 });
    port = (app.server.address() as AddressInfo).port;
  });
  afterAll(() => app.close());

  it('the service gives a whole request two minutes', () => {
    expect(REQUEST_TIMEOUT_MS).toBe(120_000);
  });

  it('answers 408 and closes a delivery whose body trickles in, and stores nothing of it', async () => {
    const ws = await env.workspace();
    const endpoint = await createEndpoint(ws);
    const head = [
      `POST /v1/webhooks/${endpoint.webhookId} HTTP/1.1`,
      'Host: 127.0.0.1',
      'Content-Type: application/json',
      'X-Service-Signature: t=1,v1=00',
      'Content-Length: 100000',
      '',
      '{"resourceType":"Patient",',
    ].join('\r\n');
    const { answer, closedAfterMs } = await trickle(port, head);
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    // The same error body as every other answer, with a request id of its own.
    const [headers, body] = answer.split('\r\n\r\n');
    const requestId = /\r\nX-Request-Id: ([0-9a-f-]{36})\r\n/i.exec(headers)?.[1];
    expect(JSON.parse(body)).toEqual({ error: 'the request did not arrive in time; send it again at a steady pace', code: 'request_timeout', requestId });
    expect(headers).toMatch(/\r\nCache-Control: no-store\r\n/);
    // Cut off near the deadline (Node looks every quarter of it), not left open.
    expect(closedAfterMs).toBeGreaterThanOrEqual(DEADLINE_MS - 50);
    expect(closedAfterMs).toBeLessThan(DEADLINE_MS * 4);
    const deliveries = await ws.call('GET', `/v1/webhooks/${endpoint.webhookId}/deliveries`);
    expect(deliveries.json().data).toEqual([]);
    // The endpoint itself is fine: a delivery sent at a normal pace is taken.
    expect((await deliver(env, endpoint, { resourceType: 'Patient', id: 'p-on-time' })).statusCode).toBe(202);
  });

  it('closes a connection whose headers never end', async () => {
    const { answer, closedAfterMs } = await trickle(port, 'GET /v1/me HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ');
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(closedAfterMs).toBeLessThan(DEADLINE_MS * 4);
  });

  it('answers what is not HTTP with 400 and the error body, and closes', async () => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    socket.on('data', (chunk) => (answer += chunk.toString('latin1')));
    socket.write('NOT AN HTTP REQUEST\r\n\r\n');
    await new Promise<void>((resolve) => socket.on('close', () => resolve()));
    expect(answer).toMatch(/^HTTP\/1\.1 400 /);
    expect(JSON.parse(answer.split('\r\n\r\n')[1])).toEqual({ error: 'the request is not valid HTTP/1.1', code: 'invalid_request', requestId: expect.any(String) });
  });
});
