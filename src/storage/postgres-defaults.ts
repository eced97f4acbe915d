/**
 * What every PostgreSQL connection of the service says and waits: the pool's (connect.ts), and
 * the LISTEN connection of engine/store-signals.ts. The name shows whose connections these are
 * (`pg_stat_activity`); the wait bounds a connection attempt, or a busy pool's queue, which
 * node-postgres would otherwise wait out for ever. A file of its own, without the drivers, so
 * that the start-up error messages (store-unavailable.ts) can quote it without loading them.
 */
export const POSTGRES_CONNECTION_DEFAULTS = { application_name: 'carepath', connectionTimeoutMillis: 10_000 } as const;

/**
 * How long a statement of the service may run (connect.ts: the server's statement_timeout, and a
 * little more for an answer to arrive at all): a lock held for long, or a database gone silent
 * mid-query (a failover that sent no reset), would otherwise hold a request, or a worker's step,
 * until the operating system gave up on the connection, a quarter of an hour later. Migrations
 * have connections without it: an index over millions of rows may take minutes.
 */
export const POSTGRES_QUERY_TIMEOUT_MS = 30_000;
