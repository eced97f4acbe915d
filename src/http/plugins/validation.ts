import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import type { FastifyInstance } from 'fastify';

/**
 * Two validators: bodies are checked exactly as sent (no type coercion, unknown fields are
 * errors, nothing removed), while query strings and path parameters, which arrive as text, are
 * coerced to the types their schemas declare (`limit=10` → 10).
 */
export function useStrictValidation(app: FastifyInstance): void {
  const common = { allErrors: false, strict: false, useDefaults: true, removeAdditional: false as const };
  const bodyAjv = addFormats.default(new Ajv.default({ ...common, coerceTypes: false }));
  const textAjv = addFormats.default(new Ajv.default({ ...common, coerceTypes: 'array' as const }));
  for (const ajv of [bodyAjv, textAjv]) ajv.addKeyword({ keyword: 'x-examples' });

  app.setValidatorCompiler(({ schema, httpPart }) =>
    httpPart === 'body' ? bodyAjv.compile(schema) : textAjv.compile(schema),
  );
}
