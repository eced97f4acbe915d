/**
 * Which failures of a running store are passing (a cut connection, none to be had, SQLite busy),
 * and what of an error may go into a log. Here in `lib`, below every layer, because the HTTP
 * error mapper, the background services and the storage layer all ask.
 */
/**
 * PostgreSQL SQLSTATEs of a connection that failed or was cut (class 08, the server shutting
 * down or restarting, no connection slots), of a transaction chosen to give way (a deadlock, a
 * serialization failure: CONFLICT_CODES), SQLite's busy store, Node's network failures.
 */
// 57014: a statement ended by statement_timeout (a lock held for long; storage/connect.ts).
const TRANSIENT_CODES = new Set(['57014', '57P01', '57P02', '57P03', '53300', '40P01', '40001', 'SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_BUSY_RECOVERY', 'ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT']);

/**
 * PostgreSQL rolled the transaction back so that another could go on (a deadlock, 40P01; a
 * serialization failure, 40001): nothing of it was written, and the same transaction tried again
 * at once will most likely pass.
 */
const CONFLICT_CODES = new Set(['40P01', '40001']);

export function isConflictError(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && CONFLICT_CODES.has(code);
}

/** What node-postgres and its pool say, without a code, when a connection ends or none comes. */
const TRANSIENT_MESSAGES = [/^Connection terminated/, /^timeout exceeded when trying to connect/, /^Client has encountered a connection error and is not queryable/, /^Query read timeout$/, /^Client was closed and is not queryable/];

/**
 * No room to write: SQLite's disk (or its `max_page_count`) is full; PostgreSQL's disk is full
 * (53100) or it is out of memory (53200). Not the request's fault, and not over in a second:
 * an operator has to make room.
 */
const FULL_CODES = new Set(['SQLITE_FULL', '53100', '53200']);

export function isStoreFullError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  return typeof code === 'string' && FULL_CODES.has(code);
}

/**
 * The store did not answer this time, though it may the next: a connection the database closed
 * (a restart, a failover, an administrator), none to be had, or SQLite busy past its timeout.
 * A request that meets one is answered 503 `store_unavailable` with Retry-After, not 500: the
 * caller's request was fine and a retry is the right move (with its Idempotency-Key, a retried
 * fire cannot make a second run). Not for errors of the statement itself (a constraint, a bug).
 */
export function isTransientStoreError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === 'string' && (TRANSIENT_CODES.has(code) || code.startsWith('08'))) return true;
  return TRANSIENT_MESSAGES.some((pattern) => pattern.test(error.message));
}

/**
 * How long work that met a failure of the store itself (no room to write, or no answer) waits
 * before it tries again, without counting the try against the work: the store will be back, and
 * the work was not at fault. Null when the failure is the work's own (a constraint, a bug).
 */
export function storeWaitMs(error: unknown): number | null {
  if (isStoreFullError(error)) return 30_000;
  if (isTransientStoreError(error)) return 5_000;
  return null;
}

/** Stack frames kept in a log line (V8 records 10 by default): where it failed, not a wall of text. */
const MAX_FRAMES = 10;

/**
 * What may be logged of an error met while working on health data: its type and code (a
 * SQLSTATE, `SQLITE_BUSY`, `ECONNREFUSED`: enough to act on at 2 a.m.), and its words only when
 * the store did not answer (they name a host or a connection) or had no room (they name a file).
 * Other messages stay out of the log: a driver's may quote the value it choked on (`invalid input
 * syntax for type uuid: "…"`), a JSON parser's a piece of the body.
 *
 * With `frames`, the stack's frames come too (`at function (file:line:column)`), without its
 * first line, which repeats the message: for a failure nobody expected, where it happened is
 * what a maintainer needs, and a frame names code, never data.
 */
export function loggableError(error: unknown, options: { frames?: boolean } = {}): { type: string; code?: string; message?: string; frames?: string[] } {
  const type = error instanceof Error ? error.name : typeof error;
  const code = (error as { code?: unknown } | null)?.code;
  const frames = options.frames && error instanceof Error ? stackFrames(error) : [];
  return {
    type,
    ...(typeof code === 'string' || typeof code === 'number' ? { code: String(code) } : {}),
    ...(isTransientStoreError(error) || isStoreFullError(error) || saysNoData(error) ? { message: (error as Error).message } : {}),
    ...(frames.length > 0 ? { frames } : {}),
  };
}

/** An error whose messages are fixed sentences of the service's own, never data (`loggable = true`). */
function saysNoData(error: unknown): boolean {
  return error instanceof Error && (error as { loggable?: unknown }).loggable === true;
}

/**
 * The `at …` lines of V8's stack text. A message may span lines of its own, even lines shaped
 * like frames: a line that is also a line of the message is never kept.
 */
function stackFrames(error: Error): string[] {
  const stack = typeof error.stack === 'string' ? error.stack : '';
  const messageLines = new Set(String(error.message).split('\n').map((line) => line.trim()));
  const frames: string[] = [];
  for (const line of stack.split('\n')) {
    const trimmed = line.trim();
    if (!/^\s+at \S/.test(line) || messageLines.has(trimmed)) continue;
    frames.push(trimmed.slice(3));
    if (frames.length === MAX_FRAMES) break;
  }
  return frames;
}
