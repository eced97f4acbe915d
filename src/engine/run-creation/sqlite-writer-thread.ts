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
 * The thread starts with the first batch (or `warm()`, which `carepath serve` and `api` call at
 * start-up) and ends with the store. Should it die, the batches in
 * flight are rejected (their callers answer 500 and retry; nothing half-written: each batch is
 * one transaction) and the next batch starts a new thread.
 */
import { Worker } from 'node:worker_threads';
import type { CreateOutcome } from '../run-creator.js';
import type { RunRow } from './sqlite-run-rows.js';

/**
 * Messages carry JSON text, not objects: the structured clone of fifty row objects cost the
 * serving thread more than writing them cost SQLite (about 30 µs a run, --cpu-prof), while
 * copying one string is a memcpy and JSON.parse runs on the writer's thread.
 */
export interface WriterRequest {
  id: number;
  /** JSON of RunRow[] */
  rows: string;
}
export type WriterReply =
  | { id: number; /** JSON of CreateOutcome[] */ outcomes: string }
  | { id: number; error: { message: string; code?: string } };

// Plain CommonJS run with `eval` (as storage/sqlite-checkpointer.ts): it loads tsx in the thread,
// then the TypeScript entry, the same way under `carepath`, vitest and the benchmarks.
const BOOTSTRAP = `
const { workerData } = require('node:worker_threads');
import(workerData.tsx).then(({ register }) => {
  register();
  return import(workerData.entry);
});
`;

export class SqliteWriterThread {
  private worker: Worker | null = null;
  private nextId = 1;
  private readonly pending = new Map<number, { resolve: (outcomes: CreateOutcome[]) => void; reject: (error: Error) => void }>();

  constructor(private readonly file: string) {}

  write(rows: RunRow[]): Promise<CreateOutcome[]> {
    const worker = this.worker ?? this.start();
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      // While a batch waits, the thread keeps the process alive (a promise alone would not).
      if (this.pending.size === 1) worker.ref();
      const request: WriterRequest = { id, rows: JSON.stringify(rows) };
      worker.postMessage(request);
    });
  }

  warm(): void {
    this.worker ??= this.start();
  }

  async close(): Promise<void> {
    const worker = this.worker;
    this.worker = null;
    if (worker) await worker.terminate();
    this.failPending(new Error('the run writer thread was closed'));
  }

  private start(): Worker {
    const worker = new Worker(BOOTSTRAP, {
      eval: true,
      workerData: {
        file: this.file,
        // tsx's ESM entry: its CommonJS one cannot register hooks from an eval'd thread.
        tsx: import.meta.resolve('tsx/esm/api'),
        entry: new URL('./sqlite-writer-thread.worker.ts', import.meta.url).href,
      },
    });
    worker.on('message', (reply: WriterReply) => {
      const waiter = this.pending.get(reply.id);
      if (!waiter) return;
      this.pending.delete(reply.id);
      if (this.pending.size === 0) worker.unref();
      if ('outcomes' in reply) waiter.resolve(JSON.parse(reply.outcomes) as CreateOutcome[]);
      else waiter.reject(Object.assign(new Error(reply.error.message), { code: reply.error.code }));
    });
    const lost = (error: Error) => {
      if (this.worker !== worker) return;
      this.worker = null;
      this.failPending(error);
    };
    worker.on('error', lost);
    worker.on('exit', (code) => lost(new Error(`the run writer thread stopped (exit code ${code})`)));
    // Idle, it must not keep the process alive.
    worker.unref();
    this.worker = worker;
    return worker;
  }

  private failPending(error: Error): void {
    for (const waiter of this.pending.values()) waiter.reject(error);
    this.pending.clear();
  }
}
