import type { FastifyInstance } from 'fastify';
import secureJson from 'secure-json-parse';
import { MAX_JSON_DEPTH, jsonNestsDeeperThan } from '../../lib/json-depth.js';
import { ApiError } from '../../lib/errors.js';

/**
 * JSON is the only body the API takes (415 otherwise). An empty body reads as "no body", so
 * `POST /v1/runs/{id}/cancel` works with or without `Content-Type`; a body that tries
 * `__proto__` or `constructor.prototype` is refused (400), never merged into an object, and so
 * is one nested deeper than MAX_JSON_DEPTH (lib/json-depth.ts). A compressed body
 * (`Content-Encoding: gzip`) is 415 too, saying so: it used to be read as bytes and refused as
 * "not valid JSON", which sent the sender looking at its JSON.
 */
export function acceptJsonOnly(app: FastifyInstance): void {
  app.addHook('onRequest', async (request) => {
    const encoding = request.headers['content-encoding'];
    if (encoding !== undefined && String(encoding).trim().toLowerCase() !== 'identity') {
      throw new ApiError('unsupported_media_type', 'request bodies are taken uncompressed: send it without Content-Encoding');
    }
  });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, text, done) => {
    const body = text as string;
    if (body.trim() === '') return done(null, undefined);
    if (jsonNestsDeeperThan(body)) {
      return done(new ApiError('invalid_request', `request body nests objects and arrays deeper than ${MAX_JSON_DEPTH} levels`), undefined);
    }
    try {
      done(null, secureJson.parse(body, undefined, { protoAction: 'error', constructorAction: 'error' }));
    } catch (error) {
      const failure = error as Error & { statusCode?: number };
      failure.statusCode = 400;
      done(failure, undefined);
    }
  });
}
