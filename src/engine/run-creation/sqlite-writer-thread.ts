/**
 * Writes new runs on SQLite from a thread of their own, with a second connection to the store's
 * file (sqlite-writer-thread.worker.ts). The serving thread only hands over a batch of plain
 * rows and waits for the commit.
 *
 * Why: on the fire path, SQLite's own work (the B-trees of six tables and the commit) took more
 * than half of the serving thread's CPU, and each batch's transaction held the event loop for
 * milliseconds. On its own thread that work runs on the second core while the serving thread
 * parses, authenticates and answers the next requests (docs/benchmarks.md, docs/decisions.md
 * "New runs are written on their own thread on SQLite"). SQLite still has one writer at a time:
 * the two connections take the write lock in turn (busy_timeout), and every transaction of the
 * serving connection begins IMMEDIATE (storage/immediate-sqlite-dialect.ts) so that none fails on
 * a snapshot made stale by this thread's commits.
 *
 * The thread (lib/thread-calls.ts) starts with the first batch, or at start-up of `carepath
 * serve` and `api` (`warm`), and ends with the container. Should it die, the batches in flight
 * are rejected (nothing half-written: each batch is one transaction) and the next batch starts a
 * new thread.
 */
import { ThreadCalls } from '../../lib/thread-calls.js';
import type { CreateOutcome } from '../run-creator.js';
import type { RunRow } from './sqlite-run-rows.js';

/**
 * Batches cross as JSON text, not objects: the structured clone of fifty row objects cost the
 * serving thread more than writing them cost SQLite (about 30 µs a run, --cpu-prof), while
 * copying one string is a memcpy and JSON.parse runs on the writer's thread.
 */
export class SqliteWriterThread {
  private readonly thread: ThreadCalls<string, string>;

  constructor(file: string) {
    this.thread = new ThreadCalls(new URL('./sqlite-writer-thread.worker.ts', import.meta.url), 'run writer', { file });
  }

  async write(rows: RunRow[]): Promise<CreateOutcome[]> {
    return JSON.parse(await this.thread.call(JSON.stringify(rows))) as CreateOutcome[];
  }

  warm(): void {
    this.thread.warm();
  }

  close(): Promise<void> {
    return this.thread.close();
  }
}
