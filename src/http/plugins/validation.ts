import Ajv from 'ajv';
import { Type } from '@sinclair/typebox';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';
import { ApiError } from '../../lib/errors.js';
import { LAST_ISO_INSTANT_MS } from '../../lib/clock.js';
import { weakMemo } from '../../lib/weak-memo.js';
import type { DataValidationCxt } from 'ajv/dist/types/index.js';

/**
 * `x-lowercase: true` on a string schema turns the value to lower case as it is validated, in
 * paths, query strings and bodies alike. Ids are UUIDs, made, stored and answered in lower case;
 * the same UUID in upper case is the same id (RFC 9562 §4), and systems that keep ids that way
 * (SQL Server's uniqueidentifier, for one) send them so. Without it such an id was a 404, or an
 * empty list for a filter. See schemas/common.ts `Uuid`.
 */
function lowerCaseKeyword(on: boolean, data: unknown, _schema?: unknown, context?: DataValidationCxt): boolean {
  if (on && typeof data === 'string' && context !== undefined) {
    (context.parentData as Record<string | number, unknown>)[context.parentDataProperty] = data.toLowerCase();
  }
  return true;
}

/**
 * Two validators: bodies are checked exactly as sent (no type coercion, unknown fields are
 * errors, nothing removed), while query strings and path parameters, which arrive as text, are
 * coerced to the types their schemas declare (`limit=10` → 10).
 */
export function useStrictValidation(app: FastifyInstance): void {
  const common = { allErrors: false, strict: false, useDefaults: true, removeAdditional: false as const };
  const bodyAjv = addFormats.default(new Ajv.default({ ...common, coerceTypes: false }));
  const textAjv = addFormats.default(new Ajv.default({ ...common, coerceTypes: 'array' as const }));
  for (const ajv of [bodyAjv, textAjv]) {
    // RFC 3339 allows a leap second (23:59:60), which a JavaScript Date cannot hold: such a value
    // passed the format, then threw where it was read (a 500). It is refused with the format, and
    // so is a time past the year 9999 in UTC (`9999-12-31T23:59:59-00:01`): stored times are
    // compared as text, and `+010000-…` sorts before all of them (`since` answered every event).
    const dateTime = ajv.formats['date-time'] as { validate: (text: string) => boolean };
    ajv.addFormat('date-time', {
      type: 'string',
      validate: (text: string) => dateTime.validate(text) && Date.parse(text) <= LAST_ISO_INSTANT_MS,
    });
    ajv.addKeyword({ keyword: 'x-examples' });
    ajv.addKeyword({ keyword: 'x-lowercase', type: 'string', schemaType: 'boolean', modifying: true, validate: lowerCaseKeyword });
  }

  // No query parameter takes several values: one given twice (`type=web&type=event`) arrives as
  // a list, which the schemas refused with a sentence about its type (`must be one of …`).
  // An integer parameter is whole decimal digits: coerced by Number(), `limit=0x10`, `1e1` and
  // `01` passed as 16, 10 and 1 (a fuzzing review), and a typo could read as another number.
  app.addHook('preValidation', async (request) => {
    const query = request.query as Record<string, unknown> | undefined;
    const repeated = query && Object.keys(query).find((name) => Array.isArray(query[name]));
    if (repeated) throw new ApiError('invalid_request', `querystring.${repeated} is given more than once; give each parameter once`);
    const schema = request.routeOptions.schema?.querystring;
    if (!query || !schema) return;
    for (const name of integerParametersOf(schema)) {
      const value = query[name];
      if (typeof value === 'string' && !/^-?(0|[1-9][0-9]*)$/.test(value)) {
        throw new ApiError('invalid_request', `querystring.${name} must be a whole number in decimal digits`);
      }
    }
  });

  app.setValidatorCompiler(({ schema, httpPart }) =>
    httpPart === 'body' ? bodyAjv.compile(schema) : textAjv.compile(schema),
  );
}

/** The integer parameters of a query string's schema (TypeBox: an object of properties), read once per route. */
const integerParametersOf = weakMemo((schema: object): string[] => {
  const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties;
  if (!properties) return [];
  return Object.keys(properties).filter((name) => properties[name]?.type === 'integer');
});

/**
 * A route of the API that takes no query parameters refuses any, as every list refuses one it
 * does not know: `GET /v1/runs/{runId}?expand=steps` answered the run alone, so a typo or a
 * parameter of another API passed silently. Routes that declare their query string keep it;
 * the public routes (a webhook delivery, whose sender may add its own) are outside this context.
 */
export function refuseUnknownQueryParameters(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    if (route.schema?.querystring) return;
    route.schema = { ...route.schema, querystring: NO_QUERY_PARAMETERS };
  });
}

const NO_QUERY_PARAMETERS = Type.Object({}, { additionalProperties: false });
