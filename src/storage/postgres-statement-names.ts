/**
 * The names of PostgreSQL statements written once as SQL text, by text, so that a connection
 * prepares a named statement whichever way its text reaches it.
 *
 * Why: on the pool, `runPostgres` sends a name with the text; inside a transaction the text goes
 * through Kysely, which sends bare text, and PostgreSQL then parsed and planned it on every run.
 * For a search's page (run in a REPEATABLE READ transaction so that its matches and page read
 * one snapshot) that was a custom plan per call with the 128 KiB match bitmap copied in: 2.6 ms
 * of a 5.5 ms search at p50 (docs/benchmarks.md, 2026-11-28). `connect.ts` looks each text up
 * as a pooled connection is asked to run it.
 */
const nameByText = new Map<string, string>();

/** Records `name` as the statement name of `text` (the same name for the same text, always). */
export function registerStatementName(name: string, text: string): void {
  if (nameByText.get(text) !== name) nameByText.set(text, name);
}

/** The statement name registered for `text`, if any. */
export function statementNameOf(text: string): string | undefined {
  return nameByText.get(text);
}
