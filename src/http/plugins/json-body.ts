import type { FastifyInstance } from 'fastify';
import secureJson from 'secure-json-parse';

/**
 * JSON is the only body the API takes (415 otherwise). An empty body reads as "no body", so
 * `POST /v1/runs/{id}/cancel` works with or without `Content-Type`; a body that tries
 * `__proto__` or `constructor.prototype` is refused (400), never merged into an object.
 */
export function acceptJsonOnly(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (_request, text, done) => {
    const body = text as string;
    if (body.trim() === '') return done(null, undefined);
    try {
      done(null, secureJson.parse(body, undefined, { protoAction: 'error', constructorAction: 'error' }));
    } catch (error) {
      const failure = error as Error & { statusCode?: number };
      failure.statusCode = 400;
      done(failure, undefined);
    }
  });
}
