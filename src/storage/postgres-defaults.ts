/**
 * What every PostgreSQL connection of the service says and waits: the pool's (connect.ts), and
 * the LISTEN connection of engine/store-signals.ts. The name shows whose connections these are
 * (`pg_stat_activity`); the wait bounds a connection attempt, or a busy pool's queue, which
 * node-postgres would otherwise wait out for ever. A file of its own, without the drivers, so
 * that the start-up error messages (store-unavailable.ts) can quote it without loading them.
 */
export const POSTGRES_CONNECTION_DEFAULTS = { application_name: 'carepath', connectionTimeoutMillis: 10_000 } as const;
