/**
 * Answers for requests that never became requests: the HTTP parser refused them, or they did not
 * arrive within the deadline (`requestTimeout`, http/app.ts). No route, no hook and no request id
 * exist yet, so the answer is written to the socket here, then the connection is closed; it has
 * the same `{error, code, requestId}` body as every other error (Fastify's own default was
 * `{"error":"Request Timeout","message":"Client Timeout","statusCode":408}`), with a request id
 * made for it. Nothing of such a request was read by the service.
 */
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { randomUUID } from 'node:crypto';
import { ANSWER_HEADERS } from '../answer-headers.js';

/** The code of a request that did not arrive whole in time (documented on every operation: openapi-headers.ts). */
export const REQUEST_TIMEOUT_CODE = 'request_timeout';

interface ClientErrorAnswer {
  status: number;
  code: string;
  error: string;
}

function answerFor(error: NodeJS.ErrnoException): ClientErrorAnswer {
  if (error.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    return { status: 408, code: REQUEST_TIMEOUT_CODE, error: 'the request did not arrive in time; send it again at a steady pace' };
  }
  if (error.code === 'HPE_HEADER_OVERFLOW') return { status: 431, code: 'invalid_request', error: 'the request headers are too large' };
  return { status: 400, code: 'invalid_request', error: 'the request is not valid HTTP/1.1' };
}

export function answerClientError(error: NodeJS.ErrnoException, socket: Socket): void {
  // A connection reset by the client, or already gone: there is no one to answer.
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const { status, code, error: message } = answerFor(error);
  const requestId = randomUUID();
  const body = JSON.stringify({ error: message, code, requestId });
  if (socket.writable) {
    socket.write(
      [
        `HTTP/1.1 ${status} ${STATUS_CODES[status]}`,
        'Content-Type: application/json; charset=utf-8',
        `Content-Length: ${Buffer.byteLength(body)}`,
        `X-Request-Id: ${requestId}`,
        ...Object.entries(ANSWER_HEADERS).map(([name, value]) => `${name}: ${value}`),
        'Connection: close',
        '',
        body,
      ].join('\r\n'),
    );
  }
  socket.destroy(error);
}
