import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, ERROR_STATUS, type ErrorCode } from '../../lib/errors.js';
import { TagSlug } from '../schemas/common.js';
import { EventName, IdempotencyKeyText } from '../../modules/triggers/trigger.schemas.js';
import { isStoreFullError, isTransientStoreError, loggableError } from '../../lib/store-errors.js';
import { ANSWER_HEADERS } from '../answer-headers.js';

interface ValidationIssue {
  instancePath: string;
  keyword: string;
  message?: string;
  params: Record<string, unknown>;
}

/** At most one `the store did not answer` line this often (registerErrorHandling). */
const STORE_WARNING_EVERY_MS = 1_000;

/** What a pattern means, for the fields whose regular expression alone would leave a caller guessing. */
const PATTERN_MEANINGS = new Map<string, string>([
  [TagSlug.pattern!, 'must be a tag: 1–64 lowercase letters, digits, ".", "_", ":" or "-", starting with a letter or digit (such as high-risk)'],
  [EventName.pattern!, 'must be an event name, <ResourceType>.<event>, such as Encounter.finished (GET /v1/events/catalog lists them)'],
  [IdempotencyKeyText.pattern!, 'must be 1–255 printable ASCII characters (letters, digits, punctuation and spaces; no accents, line breaks or emoji), as in the Idempotency-Key header'],
]);

/**
 * What a string format means, in place of the validator's `must match format "date-time"`, which
 * told a caller neither the form wanted nor why theirs failed. In a URL an unescaped `+` reads as
 * a space, so `?since=2026-11-01T00:00:00+01:00` arrives as `…00:00:00 01:00` and fails: the
 * sentence says how to write it.
 */
const FORMAT_MEANINGS = new Map<string, string>([
  ['date-time', 'must be an RFC 3339 time with its offset, such as 2026-11-01T00:00:00Z; in a URL write a + offset as %2B (a bare + reads as a space)'],
  ['uuid', 'must be a UUID, as this service writes its ids (such as 01900000-0000-7000-8000-000000000000)'],
]);

/** Turns the first schema failure into a sentence that names the field: `body.limit must be <= 100`. */
export function describeValidation(part: string, issues: ValidationIssue[]): string {
  const issue = issues[0];
  if (!issue) return `${part} is invalid`;
  const path = part + issue.instancePath.replace(/\//g, '.');
  // A union of literals fails once per literal: name every allowed value, not the first.
  const allowed = issues
    .filter((other) => other.keyword === 'const' && other.instancePath === issue.instancePath)
    .map((other) => JSON.stringify(other.params.allowedValue));
  if (allowed.length > 0) return `${path} must be one of ${allowed.join(', ')}`;
  switch (issue.keyword) {
    case 'additionalProperties':
      return `${path}: unknown field "${String(issue.params.additionalProperty)}"`;
    case 'required':
      return `${path}.${String(issue.params.missingProperty)} is required`;
    case 'enum':
      return `${path} must be one of ${(issue.params.allowedValues as unknown[]).map((v) => JSON.stringify(v)).join(', ')}`;
    case 'pattern':
      return `${path} ${PATTERN_MEANINGS.get(String(issue.params.pattern)) ?? issue.message ?? 'is invalid'}`;
    case 'format':
      return `${path} ${FORMAT_MEANINGS.get(String(issue.params.format)) ?? issue.message ?? 'is invalid'}`;
    default:
      return `${path} ${issue.message ?? 'is invalid'}`;
  }
}

export const NOT_JSON = 'request body must be JSON: application/json (a webhook delivery also application/fhir+json)';

/** A body limit in words: `1 MiB (1048576 bytes)`. */
function sizeInWords(bytes: number): string {
  const mib = bytes / (1024 * 1024);
  return Number.isInteger(mib) ? `${mib} MiB (${bytes} bytes)` : `${bytes} bytes`;
}

function mapFrameworkError(error: FastifyError, bodyLimit?: number): ApiError | null {
  if (error.validation) {
    const part = error.validationContext ?? 'request';
    // Ids in paths that are not UUIDs name nothing in this workspace: 404, like unknown ids.
    if (part === 'params') return new ApiError('not_found', 'resource not found');
    return new ApiError('invalid_request', describeValidation(part, error.validation as ValidationIssue[]));
  }
  switch (error.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError('payload_too_large', bodyLimit ? `request body is too large: at most ${sizeInWords(bodyLimit)} here` : 'request body is too large');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError('unsupported_media_type', NOT_JSON);
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new ApiError('invalid_request', 'request body is empty; send a JSON object');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new ApiError('invalid_request', 'Content-Length does not match the body');
  }
  if (/prototype property|constructor property/i.test(error.message)) {
    return new ApiError('invalid_request', 'request body contains a forbidden property (__proto__ or constructor)');
  }
  if (error instanceof SyntaxError || error.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    return new ApiError('invalid_request', 'request body is not valid JSON');
  }
  if (typeof error.statusCode === 'number' && error.statusCode >= 400 && error.statusCode < 500) {
    const code = (Object.keys(ERROR_STATUS) as ErrorCode[]).find((c) => ERROR_STATUS[c] === error.statusCode);
    return new ApiError(code ?? 'invalid_request', error.message);
  }
  return null;
}

export function sendError(reply: FastifyReply, error: ApiError): FastifyReply {
  for (const [name, value] of Object.entries(error.headers)) reply.header(name, value);
  // For the request's last log line (request-log-lines.ts).
  reply.request.answerCode = error.code;
  return reply.code(error.status).send({ error: error.message, code: error.code, requestId: reply.request.id });
}

/**
 * Fastify's router refuses some URLs before any hook runs: a path parameter longer than
 * `maxParamLength` (100: longer than any id) and a `%` that starts no `%XX` escape. Its own answer
 * had Fastify's codes, no request id, and the path echoed back; this one is the catalogue's,
 * like every other (http/app.ts passes it as `frameworkErrors`).
 */
export function answerFrameworkError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('X-Request-Id', request.id);
  reply.headers(ANSWER_HEADERS);
  const known =
    error.code === 'FST_ERR_MAX_PARAM_LENGTH'
      ? new ApiError('not_found', 'resource not found')
      : error.code === 'FST_ERR_BAD_URL'
        ? new ApiError('invalid_request', 'the URL is not valid: each % must start an escape of two hex digits (%2F), and the escapes must spell UTF-8 text')
        : mapFrameworkError(error) ?? new ApiError('invalid_request', 'the request cannot be routed');
  sendError(reply, known);
}

/**
 * One place maps every failure to `{error, code, requestId}`. A store that did not answer (a
 * cut connection, none to be had, SQLite busy) is 503 `store_unavailable` with Retry-After: 1;
 * a store with no room to write (a full disk) is the same 503 with Retry-After: 30.
 * Unexpected errors are logged with their type, code and stack frames, never their words (a
 * driver's or parser's message may quote the data it choked on); the client sees only `internal`.
 */
export function registerErrorHandling(app: FastifyInstance): void {
  // One `the store did not answer` line a second at most, saying how many went unlogged since the
  // last: in an outage every request meets it (550 lines a process in 75 s, an outage review),
  // and each request's own line already says 503 `store_unavailable`.
  let lastStoreWarning = 0;
  let unlogged = 0;
  // The outage's last requests, not logged yet, are counted once a request gets through.
  // A callback hook, not an async one: it runs on every response, and does nothing on almost all.
  app.addHook('onResponse', (request, reply, done) => {
    if (unlogged > 0 && reply.statusCode < 500) {
      request.log.info({ unloggedSinceLast: unlogged }, 'the store answers again');
      unlogged = 0;
      lastStoreWarning = 0;
    }
    done();
  });
  app.setErrorHandler((error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const known = error instanceof ApiError ? error : mapFrameworkError(error, request.routeOptions.bodyLimit);
    if (known) return sendError(reply, known);
    if (isTransientStoreError(error)) {
      const now = Date.now();
      if (now - lastStoreWarning >= STORE_WARNING_EVERY_MS) {
        request.log.warn({ err: loggableError(error), ...(unlogged > 0 ? { unloggedSinceLast: unlogged } : {}) }, 'the store did not answer');
        lastStoreWarning = now;
        unlogged = 0;
      } else unlogged++;
      return sendError(reply, new ApiError('store_unavailable', 'the database did not answer; retry shortly', { 'retry-after': '1' }));
    }
    if (isStoreFullError(error)) {
      // An operator has to make room: said at error level, and callers told to wait longer.
      request.log.error({ err: loggableError(error) }, 'the store is full: nothing can be written until there is room');
      return sendError(reply, new ApiError('store_unavailable', 'the database has no room to write; retry later', { 'retry-after': '30' }));
    }
    request.log.error({ err: loggableError(error, { frames: true }) }, 'unexpected error');
    return sendError(reply, new ApiError('internal', 'internal server error'));
  });
  app.setNotFoundHandler((request, reply) =>
    sendError(reply, new ApiError('not_found', `no route ${request.method} ${request.url.split('?')[0].slice(0, 200)}`)),
  );
}
