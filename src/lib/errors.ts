/**
 * The one catalogue of error codes (DESIGN §2) and the status each maps to.
 * Services throw `ApiError`; only the HTTP layer turns it into `{error, code, requestId}`.
 */
export const ERROR_STATUS = {
  invalid_request: 400,
  invalid_cursor: 400,
  invalid_api_key: 401,
  invalid_signature: 401,
  signature_expired: 401,
  insufficient_scope: 403,
  webhook_inactive: 403,
  not_found: 404,
  idempotency_mismatch: 409,
  trigger_not_web: 409,
  trigger_inactive: 409,
  run_not_queued: 409,
  run_not_paused: 409,
  run_terminal: 409,
  query_in_use: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal: 500,
  store_unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
    this.status = ERROR_STATUS[code];
  }
}

export const invalidRequest = (message: string) => new ApiError('invalid_request', message);
export const notFound = (what: string) => new ApiError('not_found', `${what} not found`);
export const conflict = (code: ErrorCode, message: string) => new ApiError(code, message);
