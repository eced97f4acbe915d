/**
 * Creates runs with group commit. Every way a run starts (a fired web trigger, an event, a
 * schedule tick, a start_pathway automation) hands a prepared run to `create`; runs that arrive
 * while a commit is in progress are written together in the next transaction, with one
 * multi-row INSERT per table.
 *
 * Why: one transaction per fired trigger spends most of its time on per-statement and
 * per-commit overhead. Batching measured 2–4× more fires per second on both stores
 * (docs/benchmarks.md), and costs a caller at most one commit's wait.
 *
 * Idempotency: a run with a claim first inserts its key into idempotency_keys with
 * ON CONFLICT DO NOTHING; only winners write their run. Losers (a concurrent duplicate in
 * another batch or process, or an earlier request) are answered with the stored claim.
 */
import type { Db, Database } from '../storage/database.js';
import type { Transaction } from 'kysely';
import type { RequestContext } from '../auth/context.js';
import { auditRow } from '../modules/audit/audit.repository.js';
import type { RunStatus } from './run-status.js';
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
}

export class RunCreator {
  private queue: Pending[] = [];
  private inFlight = 0;
  private scheduled = false;
  private readonly maxBatch: number;
  private readonly concurrency: number;

  constructor(
    private readonly db: Db,
    private readonly signals: WorkSignals,
    options: RunCreatorOptions = {},
  ) {
    this.maxBatch = options.maxBatch ?? 200;
    this.concurrency = options.concurrency ?? 1;
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
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  private async flush(): Promise<void> {
    if (this.inFlight >= this.concurrency || this.queue.length === 0) return;
    const batch = this.queue.splice(0, this.maxBatch);
    this.inFlight++;
    try {
      const outcomes = await this.db.transaction().execute((tx) => writeBatch(tx, batch.map((p) => p.run)));
      batch.forEach((pending, i) => pending.resolve(outcomes[i]));
      if (outcomes.some((o) => o.kind === 'created')) this.signals.notify('runs');
    } catch (error) {
      for (const pending of batch) pending.reject(error);
    } finally {
      this.inFlight--;
      this.schedule();
    }
  }
}

async function writeBatch(tx: Transaction<Database>, runs: PreparedRun[]): Promise<CreateOutcome[]> {
  const outcomes: (CreateOutcome | null)[] = runs.map(() => null);

  // Claims: the first run of each key in this batch tries to claim it; later ones in the same
  // batch will be answered from the claim after the commit.
  const firstOfKey = new Map<string, number>();
  runs.forEach((run, i) => {
    if (!run.claim) return;
    const scopeKey = `${run.ctx.workspaceId}\u0000${run.claim.key}`;
    if (!firstOfKey.has(scopeKey)) firstOfKey.set(scopeKey, i);
  });
  // Sorted so that concurrent batches take key locks in one order and cannot deadlock.
  const claimants = [...firstOfKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, i]) => i);
  const won = new Set<number>();
  if (claimants.length > 0) {
    const inserted = await tx
      .insertInto('idempotency_keys')
      .values(
        claimants.map((i) => ({
          workspace_id: runs[i].ctx.workspaceId,
          key: runs[i].claim!.key,
          fingerprint: runs[i].claim!.fingerprint,
          trigger_id: runs[i].triggerId,
          run_id: runs[i].runId,
          created_at: runs[i].at,
        })),
      )
      .onConflict((oc) => oc.columns(['workspace_id', 'key']).doNothing())
      .returning(['workspace_id', 'key'])
      .execute();
    const insertedKeys = new Set(inserted.map((row) => `${row.workspace_id}\u0000${row.key}`));
    for (const i of claimants) {
      if (insertedKeys.has(`${runs[i].ctx.workspaceId}\u0000${runs[i].claim!.key}`)) won.add(i);
    }
  }

  const writers = runs.map((run, i) => ({ run, i })).filter(({ run, i }) => !run.claim || won.has(i));
  if (writers.length > 0) {
    await tx
      .insertInto('runs')
      .values(
        writers.map(({ run }) => ({
          id: run.runId,
          workspace_id: run.ctx.workspaceId,
          trigger_id: run.triggerId,
          source_id: run.blueprint.id,
          source_version: run.blueprint.version,
          name: run.blueprint.name,
          idempotency_key: run.idempotencyKey,
          automation_status: run.status,
          error: null,
          payload: run.payloadJson,
          subject_record_id: run.subjectRecordId,
          created_at: run.at,
          updated_at: run.at,
        })),
      )
      .execute();
    await tx
      .insertInto('records')
      .values(
        writers.map(({ run }) => ({
          id: run.runId,
          workspace_id: run.ctx.workspaceId,
          resource_type: 'Pathway' as const,
          ext_id: run.runId,
          name: run.blueprint.name,
          created_at: run.at,
          updated_at: run.at,
        })),
      )
      .execute();
    await tx
      .insertInto('record_tags')
      .values(writers.map(({ run }) => ({ record_id: run.runId, workspace_id: run.ctx.workspaceId, tag: run.status })))
      .execute();
    await tx
      .insertInto('audit_events')
      .values(
        writers.map(({ run }) =>
          auditRow(run.ctx, run.at, {
            action: 'run.create',
            resourceType: 'run',
            resourceId: run.runId,
            details: { triggerId: run.triggerId, sourceId: run.blueprint.id, status: run.status, ...run.origin },
          }),
        ),
      )
      .execute();
    for (const { run, i } of writers) outcomes[i] = { kind: 'created', runId: run.runId };
  }

  // Everyone else reads the claim that stands (made earlier, by another batch, or in this one).
  for (let i = 0; i < runs.length; i++) {
    if (outcomes[i]) continue;
    const claim = runs[i].claim!;
    const row = await tx
      .selectFrom('idempotency_keys')
      .select(['run_id', 'fingerprint', 'trigger_id'])
      .where('workspace_id', '=', runs[i].ctx.workspaceId)
      .where('key', '=', claim.key)
      .executeTakeFirstOrThrow();
    outcomes[i] = { kind: 'claimed-before', runId: row.run_id, fingerprint: row.fingerprint, triggerId: row.trigger_id };
  }
  return outcomes as CreateOutcome[];
}
