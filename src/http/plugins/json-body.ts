import type { FastifyInstance } from 'fastify';
import secureJson from 'secure-json-parse';
import { MAX_JSON_DEPTH, jsonNestsDeeperThan } from '../../lib/json-depth.js';
import { ApiError } from '../../lib/errors.js';
import { NOT_JSON } from './errors.js';
import { mayHoldUnstorableText, unstorableTextProblem } from '../../lib/storable-text.js';
import { refuseOtherCharsets, utf8TextOf } from '../../lib/utf8-text.js';

/**
 * JSON is the only body the API takes (415 otherwise). An empty body reads as "no body", so
 * `POST /v1/runs/{id}/cancel` works with or without `Content-Type`; a body that tries
 * `__proto__` or `constructor.prototype` is refused (400), never merged into an object, and so
 * is one nested deeper than MAX_JSON_DEPTH (lib/json-depth.ts). A compressed body
 * (`Content-Encoding: gzip`) is 415 too, saying so: it used to be read as bytes and refused as
 * "not valid JSON", which sent the sender looking at its JSON. Text no store can keep as sent
 * (U+0000, an unpaired surrogate: lib/storable-text.ts) is refused (400) in bodies, query strings
 * and paths alike; so are bytes that are not UTF-8, and a charset other than UTF-8 is 415
 * (lib/utf8-text.ts).
 */
declare module 'fastify' {
  interface FastifyRequest {
    /** A JSON body's length in bytes, once read, when it came without Content-Length (chunked): the rate limit weighs it by this. */
    undeclaredBodyBytes?: number;
  }
}

export function acceptJsonOnly(app: FastifyInstance): void {
  // After the key is checked (onRequest): a caller without one hears 401 first, whatever it sent.
  app.addHook('preParsing', async (request) => {
    const encoding = request.headers['content-encoding'];
    // A request without a body (a GET a client labels out of habit) has nothing compressed.
    const hasBody = request.headers['transfer-encoding'] !== undefined || Number(request.headers['content-length'] ?? 0) > 0;
    if (hasBody && encoding !== undefined && String(encoding).trim().toLowerCase() !== 'identity') {
      throw new ApiError('unsupported_media_type', 'request bodies are taken uncompressed: send it without Content-Encoding');
    }
  });
  app.removeAllContentTypeParsers();
  // Any other type, or none: an empty body is no body (a chunked POST without Content-Type sends
  // one, and used to be 415 where the same request with Content-Length: 0 went through).
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, text, done) => {
    if (text === '') return done(null, undefined);
    done(new ApiError('unsupported_media_type', NOT_JSON), undefined);
  });
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request, bytes, done) => {
    if (request.headers['content-length'] === undefined) request.undeclaredBodyBytes = bytes.length;
    let body: string;
    try {
      refuseOtherCharsets(request.headers['content-type']);
      body = utf8TextOf(bytes as Buffer);
    } catch (error) {
      return done(error as Error, undefined);
    }
    if (body.trim() === '') return done(null, undefined);
    if (jsonNestsDeeperThan(body)) {
      return done(new ApiError('invalid_request', `request body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels`), undefined);
    }
    let parsed: unknown;
    try {
      parsed = secureJson.parse(body, undefined, { protoAction: 'error', constructorAction: 'error' });
    } catch (error) {
      const failure = error as Error & { statusCode?: number };
      failure.statusCode = 400;
      return done(failure, undefined);
    }
    const unstorable = mayHoldUnstorableText(body) ? unstorableTextProblem(parsed, 'body') : null;
    if (unstorable !== null) return done(new ApiError('invalid_request', unstorable), undefined);
    done(null, parsed);
  });

  // Query strings and path parameters arrive percent-encoded: `%00` is U+0000 once decoded.
  app.addHook('preValidation', async (request) => {
    const unstorable = unstorableTextProblem(request.query, 'querystring') ?? unstorableTextProblem(request.params, 'params');
    if (unstorable !== null) throw new ApiError('invalid_request', unstorable);
  });
}
