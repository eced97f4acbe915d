/**
 * Creates runs with group commit. Every way a run starts (a fired web trigger, an event, a
 * schedule tick, a start_pathway automation) hands a prepared run to `create`; runs that arrive
 * while a commit is in progress are written together in the next transaction (SQLite:
 * run-creation/batch-writer-sqlite.ts; PostgreSQL: one statement, batch-writer-postgres.ts).
 *
 * Why: one transaction per fired trigger spends most of its time on per-statement and
 * per-commit overhead. Batching measured 2–4× more fires per second on both stores
 * (docs/benchmarks.md), and costs a caller at most one commit's wait.
 *
 * Idempotency: a run with a claim first inserts its key into idempotency_keys with
 * ON CONFLICT DO NOTHING; only winners write their run. Losers (a concurrent duplicate in
 * another batch or process, or an earlier request) are answered with the stored claim.
 */
import type { Db } from '../storage/database.js';
import type { RequestContext } from '../auth/context.js';
import type { RunStatus } from './run-status.js';
import { sqliteBatchWriter } from './run-creation/batch-writer-sqlite.js';
import { writeBatchOnPostgres } from './run-creation/batch-writer-postgres.js';
import type { WorkSignals } from '../lib/work-signals.js';

export interface PreparedRun {
  ctx: RequestContext;
  runId: string;
  triggerId: string;
  blueprint: { id: string; name: string; version: number };
  status: Extract<RunStatus, 'queued' | 'scheduled'>;
  /** JSON text of the payload, or null when none was given */
  payloadJson: string | null;
  subjectRecordId: string | null;
  /** The key stored on the run (spec: `idempotencyKey`), for fires, deliveries and ticks. */
  idempotencyKey: string | null;
  /** When set, the key is claimed in the workspace: only one run is ever made for it. */
  claim: { key: string; fingerprint: string } | null;
  /** Extra audit details (how the run started). */
  origin: Record<string, unknown>;
  at: string;
}

export type CreateOutcome =
  | { kind: 'created'; runId: string }
  | { kind: 'claimed-before'; runId: string; fingerprint: string; triggerId: string };

interface Pending {
  run: PreparedRun;
  resolve: (outcome: CreateOutcome) => void;
  reject: (error: unknown) => void;
}

export interface RunCreatorOptions {
  /** Most runs in one transaction (bounded by SQLite's 32,766 bound parameters). */
  maxBatch?: number;
  /** Transactions in flight at once: 1 for SQLite (one writer), a few for PostgreSQL. */
  concurrency?: number;
  /** A batch smaller than this waits for company, up to `gatherTurns` turns of the event loop. */
  gatherTo?: number;
  gatherTurns?: number;
  /** PostgreSQL writes a batch in one statement (run-creation/batch-writer-postgres.ts). */
  dialect?: 'sqlite' | 'postgres';
  /** Writes a batch instead of the store's batch writer (tests of the batching itself). */
  write?: (runs: PreparedRun[]) => Promise<CreateOutcome[]>;
}

export class RunCreator {
  private queue: Pending[] = [];
  private inFlight = 0;
  private scheduled = false;
  /** Turns of the event loop a small batch has already waited for company (see `schedule`). */
  private waitedTurns = 0;
  private readonly maxBatch: number;
  private readonly gatherTo: number;
  private readonly gatherTurns: number;
  private readonly concurrency: number;

  constructor(
    private readonly db: Db,
    private readonly signals: WorkSignals,
    options: RunCreatorOptions = {},
  ) {
    this.maxBatch = options.maxBatch ?? 200;
    this.concurrency = options.concurrency ?? 1;
    this.gatherTo = Math.min(options.gatherTo ?? 48, this.maxBatch);
    this.gatherTurns = options.gatherTurns ?? 3;
    if (options.write) {
      this.write = options.write;
    } else if (options.dialect === 'postgres') {
      this.write = (runs) => writeBatchOnPostgres(this.db, runs);
    } else {
      const sqlite = sqliteBatchWriter(this.db);
      if (!sqlite) throw new Error('RunCreator needs a SQLite store opened by storage/connect.ts');
      this.write = sqlite;
    }
  }

  private readonly write: (runs: PreparedRun[]) => Promise<CreateOutcome[]>;
  private idle: (() => void)[] = [];

  /** Waits for the batches in flight and the queue, so nothing is written after the store closes. */
  async close(): Promise<void> {
    while (this.inFlight > 0 || this.queue.length > 0) {
      await new Promise<void>((resolve) => this.idle.push(resolve));
    }
  }

  create(run: PreparedRun): Promise<CreateOutcome> {
    return new Promise((resolve, reject) => {
      this.queue.push({ run, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.scheduled || this.inFlight >= this.concurrency || this.queue.length === 0) return;
    this.scheduled = true;
    // setImmediate lets every request that arrived in this turn of the event loop join the batch.
    // A small batch waits a few turns more for the requests read in the next ones: a request
    // passes the key and trigger lookups (each a turn, coalesced) before it gets here, so under
    // load the runs of several turns are on their way. Idle, a turn takes microseconds, so a
    // lone fire hardly waits; busy, batches of 14 became 23–46 runs, and a run's share of the
    // commit and of the B-tree pages written shrank (docs/decisions.md "Fire path").
    setImmediate(() => {
      this.scheduled = false;
      if (this.queue.length < this.gatherTo && this.waitedTurns < this.gatherTurns) {
        this.waitedTurns++;
        this.schedule();
        return;
      }
      this.waitedTurns = 0;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.inFlight >= this.concurrency || this.queue.length === 0) return;
    const batch = this.queue.splice(0, this.maxBatch);
    this.inFlight++;
    try {
      const outcomes = await this.write(batch.map((p) => p.run));
      batch.forEach((pending, i) => pending.resolve(outcomes[i]));
      if (outcomes.some((o) => o.kind === 'created')) this.signals.notify('runs');
    } catch (error) {
      for (const pending of batch) pending.reject(error);
    } finally {
      this.inFlight--;
      this.schedule();
      if (this.inFlight === 0 && this.queue.length === 0) for (const resolve of this.idle.splice(0)) resolve();
    }
  }
}

