/**
 * Automation engine throughput and latency (issue: automation engine). Each figure stands next
 * to a raw claim-and-complete loop (bench/raw-queue.ts) on the same store, measured in the same
 * run:
 * - runs completed per second, one-node and five-node `set` pathways: SQLite in one process,
 *   PostgreSQL with 1 and 3 worker processes (against the raw loop with as many processes);
 * - fire-to-running latency p50/p99 at half of the sustained peak (firing and running together):
 *   from the fire call, and from the fire's answer (the run stored), to the run's first step,
 *   whose write is the one that turns it running (ms resolution).
 * The raw loop claims as the engine does on PostgreSQL (an UPDATE … RETURNING per batch, then a
 * fenced UPDATE per job); on SQLite the engine reads its batch instead and each run's first write
 * claims it (src/engine/sql/claim-on-write.ts): the loop stays what the store costs per job.
 * Runs are created before a throughput clock starts; the worker starts with the clock. On SQLite
 * (the worker in this process) an unmeasured round of each pathway and of the raw loop comes
 * first, and the cold round's rate is reported beside the warm figures.
 *
 * For focused A/B runs: BENCH_ENGINE_STORES=sqlite|postgres picks the stores,
 * BENCH_ENGINE_PG_PROCESSES=1 the PostgreSQL worker counts, and BENCH_ENGINE_LATENCY_RATE=300
 * measures only the latencies, at that fixed rate (the defaults give the full report).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { percentile, type BenchSuite, type Reporter } from './reporter.js';
import { alternatingRounds, benchStore, type BenchStore } from './harness.js';
import { createRawTable, fillRawJobs, rawWorkerLoop } from './raw-queue.js';
import type { Container } from '../src/container.js';
import { systemContext, type RequestContext } from '../src/auth/context.js';
import { ensureTenant, createWorkspace } from '../src/modules/tenancy/tenancy.repository.js';
import { importBlueprint } from '../src/modules/diagrams/diagram.repository.js';
import { validateBlueprint } from '../src/modules/blueprints/blueprint.validate.js';
import { createTrigger } from '../src/modules/triggers/trigger.service.js';
import { fireTrigger } from '../src/modules/triggers/fire.service.js';
import { startEngineWorker } from '../src/engine/worker-service.js';
import { startStoreSignals } from '../src/engine/store-signals.js';

const SQLITE_RUNS = Number(process.env.BENCH_ENGINE_SQLITE_RUNS ?? 3000);
const PG_RUNS = Number(process.env.BENCH_ENGINE_PG_RUNS ?? 3000);
const LATENCY_SECONDS = Number(process.env.BENCH_ENGINE_LATENCY_S ?? 4);
/** Unmeasured firing at the latency rate before the latency is measured (0 to measure from a cold start). */
const WARMUP_SECONDS = Number(process.env.BENCH_ENGINE_WARMUP_S ?? 1);
const BATCH = 20;
/** Alternating raw/engine rounds on SQLite (in process, cheap); the median ratio is reported. */
const SQLITE_ROUNDS = Number(process.env.BENCH_ENGINE_SQLITE_ROUNDS ?? 3);
/** Which stores to measure (comma-separated; both by default), for focused A/B runs. */
const STORES = (process.env.BENCH_ENGINE_STORES ?? 'sqlite,postgres').split(',');
/** Focused latency runs: fire at this rate instead of half the measured peak, and skip the throughput figures. */
const LATENCY_RATE = Number(process.env.BENCH_ENGINE_LATENCY_RATE ?? 0);
/** PostgreSQL worker process counts to measure (comma-separated; 1 and 3 by default). */
const PG_PROCESSES = (process.env.BENCH_ENGINE_PG_PROCESSES ?? '1,3').split(',').map(Number);

interface Seeded {
  ctx: RequestContext;
  oneNode: string;
  fiveNode: string;
}

function pathway(name: string, actions: number) {
  const nodes = [
    { id: 'start', kind: 'start' },
    ...Array.from({ length: actions }, (_, i) => ({
      id: `step-${i + 1}`,
      kind: 'action',
      automations: [{ id: `set-${i + 1}`, type: 'set', with: { vars: { [`v${i + 1}`]: `payload.n + ${i}` } } }],
    })),
    { id: 'done', kind: 'end' },
  ];
  return validateBlueprint({ name, nodes, links: nodes.slice(1).map((node, i) => ({ from: nodes[i].id, to: node.id })) });
}

async function seed(container: Container): Promise<Seeded> {
  const at = new Date().toISOString();
  const tenantId = await ensureTenant(container.db, 'bench-engine', at);
  const workspaceId = await createWorkspace(container.db, tenantId, `engine-${Date.now()}`, at);
  const ctx = systemContext(tenantId, workspaceId, 'bench-engine');
  const triggerFor = async (actions: number) => {
    const blueprint = await importBlueprint(container.db, workspaceId, pathway(`Bench ${actions}-node`, actions), at);
    const trigger = await createTrigger(container.db, ctx, { name: `bench ${actions}`, sourceId: blueprint.id, type: 'web' }, new Date());
    return trigger.triggerId;
  };
  return { ctx, oneNode: await triggerFor(1), fiveNode: await triggerFor(5) };
}

function fire(container: Container, seeded: Seeded, triggerId: string, n: number) {
  return fireTrigger(
    { db: container.db, runCreator: container.runCreator, triggers: container.triggersForFire, now: () => new Date() },
    seeded.ctx,
    triggerId,
    { payload: { n } },
  );
}

/** Creates `count` scheduled runs (group-committed, 200 in flight at a time). */
async function createRuns(container: Container, seeded: Seeded, triggerId: string, count: number): Promise<void> {
  for (let start = 0; start < count; start += 200) {
    await Promise.all(Array.from({ length: Math.min(200, count - start) }, (_, i) => fire(container, seeded, triggerId, start + i)));
  }
}

async function completed(container: Container, seeded: Seeded, triggerId: string): Promise<number> {
  const row = await container.db
    .selectFrom('runs')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('workspace_id', '=', seeded.ctx.workspaceId)
    .where('trigger_id', '=', triggerId)
    .where('automation_status', '=', 'completed')
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

/**
 * Waits until every run of the trigger has left `scheduled` and `running`, then checks that
 * `count` completed. Every caller has stored its runs before it waits. The poll asks whether
 * any run is left (one step into the (workspace_id, trigger_id, automation_status) index) instead
 * of counting the completed ones: it shares the worker's thread and connection on SQLite, and a
 * count that walks every completed run, every 20 ms, was 2–5 µs of each measured run's CPU
 * (--cpu-prof). Both name the workspace: without it SQLite scanned that whole index (migration
 * 0012 put workspace_id first), 1–2 ms a poll once 10,000–24,000 runs were in the table, 5–10% of
 * the worker's thread in the measured rounds (timed per statement, 2026-11-28).
 */
async function untilCompleted(container: Container, seeded: Seeded, triggerId: string, count: number): Promise<void> {
  while (await anyLeft(container, seeded, triggerId)) await sleep(20);
  const done = await completed(container, seeded, triggerId);
  if (done < count) throw new Error(`${count - done} runs of the benchmark did not complete`);
}

async function anyLeft(container: Container, seeded: Seeded, triggerId: string): Promise<boolean> {
  const row = await container.db
    .selectFrom('runs')
    .select('id')
    .where('workspace_id', '=', seeded.ctx.workspaceId)
    .where('trigger_id', '=', triggerId)
    .where('automation_status', 'in', ['scheduled', 'running'])
    .limit(1)
    .executeTakeFirst();
  return row !== undefined;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

// ---------------------------------------------------------------------------------------------
// Worker processes (PostgreSQL scale-out)

interface Child {
  process: ChildProcess;
  lines: AsyncIterator<string>;
}

async function spawnChildren(store: BenchStore, mode: 'raw' | 'engine', count: number): Promise<Child[]> {
  const children = Array.from({ length: count }, () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'bench/engine-child.ts'], {
      env: { ...process.env, ...store.env, BENCH_MODE: mode, BENCH_BATCH: String(BATCH) },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    return { process: child, lines: createInterface({ input: child.stdout! })[Symbol.asyncIterator]() };
  });
  for (const child of children) {
    const line = await child.lines.next();
    if (line.value !== 'ready') throw new Error(`bench worker did not start: ${String(line.value)}`);
  }
  return children;
}

function go(children: Child[]): void {
  for (const child of children) child.process.stdin!.write('go\n');
}

async function stopChildren(children: Child[]): Promise<void> {
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.process.exitCode !== null) return resolve();
          child.process.once('exit', () => resolve());
          child.process.kill('SIGTERM');
          setTimeout(() => child.process.kill('SIGKILL'), 5_000).unref();
        }),
    ),
  );
}

// ---------------------------------------------------------------------------------------------
// Measurements

/** Raw loop in this process (SQLite) or in `processes` children (PostgreSQL): jobs per second. */
async function rawRate(store: BenchStore, container: Container, count: number, processes: number): Promise<number> {
  await createRawTable(container.db);
  await fillRawJobs(container.db, count);
  if (store.kind === 'sqlite') {
    const started = performance.now();
    await rawWorkerLoop(container.db, 'sqlite', 'raw', BATCH);
    return count / ((performance.now() - started) / 1000);
  }
  const children = await spawnChildren(store, 'raw', processes);
  const started = performance.now();
  go(children);
  await Promise.all(children.map((child) => child.lines.next()));
  const rate = count / ((performance.now() - started) / 1000);
  await stopChildren(children);
  return rate;
}

/** Engine in this process (SQLite) or in `processes` children (PostgreSQL): runs completed per second. */
async function engineRate(store: BenchStore, container: Container, seeded: Seeded, triggerId: string, count: number, processes: number): Promise<number> {
  const before = await completed(container, seeded, triggerId);
  await createRuns(container, seeded, triggerId, count);
  if (store.kind === 'sqlite') {
    const started = performance.now();
    const worker = await startEngineWorker(container);
    await untilCompleted(container, seeded, triggerId, before + count);
    const rate = count / ((performance.now() - started) / 1000);
    await worker.stop();
    return rate;
  }
  const children = await spawnChildren(store, 'engine', processes);
  const started = performance.now();
  go(children);
  await untilCompleted(container, seeded, triggerId, before + count);
  const rate = count / ((performance.now() - started) / 1000);
  await stopChildren(children);
  return rate;
}

/** Starts workers: in this process (SQLite) or `processes` children (PostgreSQL). */
async function startWorkers(store: BenchStore, container: Container, processes: number) {
  const worker = store.kind === 'sqlite' ? await startEngineWorker(container) : null;
  const children = store.kind === 'postgres' ? await spawnChildren(store, 'engine', processes) : [];
  go(children);
  // Worker processes hear of the runs fired here through NOTIFY (store-signals.ts).
  const signals = await startStoreSignals(container);
  return {
    async stop() {
      await signals.close();
      await worker?.stop();
      await stopChildren(children);
    },
  };
}

/**
 * The sustained peak of the whole path: runs fired as fast as they can be (200 in flight) while
 * the workers run, until all completed. Runs per second.
 */
async function sustainedPeak(store: BenchStore, container: Container, seeded: Seeded, count: number, processes: number): Promise<number> {
  const workers = await startWorkers(store, container, processes);
  await sleep(300);
  const before = await completed(container, seeded, seeded.oneNode);
  const started = performance.now();
  await createRuns(container, seeded, seeded.oneNode, count);
  await untilCompleted(container, seeded, seeded.oneNode, before + count);
  const rate = count / ((performance.now() - started) / 1000);
  await workers.stop();
  return rate;
}

interface Latencies {
  /** fire call → running */
  fromFire: number[];
  /** fire answered (the run stored) → running */
  fromStored: number[];
}

/** Fires `total` runs evenly at `rate` per second; answers when each was fired and stored, by run. */
async function fireEvenly(container: Container, seeded: Seeded, rate: number, total: number): Promise<Map<string, { at: number; stored: number }>> {
  const fired = new Map<string, { at: number; stored: number }>();
  const fires: Promise<unknown>[] = [];
  const started = Date.now();
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / rate;
    const wait = due - Date.now();
    if (wait > 1) await sleep(wait);
    const at = Date.now();
    fires.push(fire(container, seeded, seeded.oneNode, i).then((result) => fired.set(result.run.runId, { at, stored: Date.now() })));
  }
  await Promise.all(fires);
  return fired;
}

/**
 * Fires evenly at `rate` per second for LATENCY_SECONDS with the workers running, after a
 * warm-up of WARMUP_SECONDS at the same rate that is not measured: the figure is the steady
 * state, not a new process's first graph load, first expression compiles and first
 * connections (about 100 ms of the first runs' time, and the backlog it leaves behind).
 */
async function latencies(store: BenchStore, container: Container, seeded: Seeded, rate: number, processes: number): Promise<Latencies> {
  const workers = await startWorkers(store, container, processes);
  await sleep(300);
  const warmup = Math.round(rate * WARMUP_SECONDS);
  if (warmup > 0) {
    const before = await completed(container, seeded, seeded.oneNode);
    await fireEvenly(container, seeded, rate, warmup);
    await untilCompleted(container, seeded, seeded.oneNode, before + warmup);
  }
  const before = await completed(container, seeded, seeded.oneNode);
  const total = Math.max(1, Math.round(rate * LATENCY_SECONDS));
  const fired = await fireEvenly(container, seeded, rate, total);
  await untilCompleted(container, seeded, seeded.oneNode, before + total);
  await workers.stop();
  // The run turned running with its first step; both carry that time.
  const steps = await container.db
    .selectFrom('run_steps')
    .select(['run_id', (eb) => eb.fn.min('started_at').as('first')])
    .where('run_id', 'in', [...fired.keys()])
    .groupBy('run_id')
    .execute();
  const running = steps.map((step) => ({ running: Date.parse(String(step.first)), ...fired.get(step.run_id)! }));
  return { fromFire: running.map((r) => r.running - r.at), fromStored: running.map((r) => Math.max(0, r.running - r.stored)) };
}

function reportLatencies(reporter: Reporter, measured: Latencies, rate: number, why: string): void {
  const at = `at ${Math.round(rate)} fires/s (${why})`;
  reporter.figure(`fire-to-running p50 ${at}`, percentile(measured.fromFire, 50), 'ms (target ≤ 5)');
  reporter.figure(`fire-to-running p99 ${at}`, percentile(measured.fromFire, 99), 'ms (target ≤ 25)');
  reporter.figure(`stored-to-running p50 (from the fire's answer) ${at}`, percentile(measured.fromStored, 50), 'ms');
  reporter.figure(`stored-to-running p99 (from the fire's answer) ${at}`, percentile(measured.fromStored, 99), 'ms');
}

async function measureStore(reporter: Reporter, kind: 'sqlite' | 'postgres'): Promise<void> {
  const store = await benchStore(kind);
  const container = await store.open();
  const seeded = await seed(container);
  const runs = kind === 'sqlite' ? SQLITE_RUNS : PG_RUNS;
  try {
    for (const processes of kind === 'sqlite' ? [1] : PG_PROCESSES) {
      const label = kind === 'sqlite' ? 'SQLite, one process' : `PostgreSQL, ${processes} worker process${processes > 1 ? 'es' : ''}`;
      reporter.section(`Engine: ${label}`);
      if (LATENCY_RATE > 0) {
        reportLatencies(reporter, await latencies(store, container, seeded, LATENCY_RATE, processes), LATENCY_RATE, 'set by BENCH_ENGINE_LATENCY_RATE');
        continue;
      }
      if (kind === 'sqlite') {
        // The worker runs in this process: its first runs are also the first time its code runs
        // (interpreted before V8 compiles it, graphs and expressions loaded on first use). That
        // round is reported as it is, and the throughput figures below are of the warm worker a
        // serving process has after its first seconds. The raw loop gets the same warm-up.
        // Worker processes on PostgreSQL start with each measurement: their figures stay cold.
        const cold = await engineRate(store, container, seeded, seeded.oneNode, runs, processes);
        await engineRate(store, container, seeded, seeded.fiveNode, Math.round(runs / 2), processes);
        await rawRate(store, container, runs, processes);
        reporter.figure(`one-node pathway, a new worker's first ${runs} runs (not warmed up)`, cold, 'runs/s');
      }
      // Rounds alternate raw loop and engine, and each engine round is divided by the mean of
      // the raw rounds either side of it: on a shared machine the speed drifts by half within
      // a minute, and a ratio should not ride on one side of the drift. The median round counts.
      const rounds = kind === 'sqlite' ? SQLITE_ROUNDS : 1;
      const { ratios, result: one, baseline: raw } = await alternatingRounds(
        rounds,
        () => rawRate(store, container, runs, processes),
        () => engineRate(store, container, seeded, seeded.oneNode, runs, processes),
        (rate) => rate,
      );
      if (rounds > 1) reporter.note(`one-node ÷ raw loop in ${rounds} alternating rounds: ${ratios.map((r) => `${r.toFixed(2)}×`).join(', ')} (the median round below)`);
      reporter.figure('raw claim-and-complete loop (baseline, mean of the rounds before and after)', raw, 'jobs/s');
      reporter.figure('one-node pathway', one, 'runs/s');
      reporter.ratio('one-node vs raw loop', one, raw, '≥ 0.5×');
      const five = await engineRate(store, container, seeded, seeded.fiveNode, Math.round(runs / 2), processes);
      reporter.figure('five-node pathway', five, 'runs/s');
      reporter.figure('five-node pathway, steps', five * 5, 'steps/s');
      reporter.ratio('five-node steps vs raw loop', five * 5, raw);
      const peak = await sustainedPeak(store, container, seeded, runs, processes);
      reporter.figure('sustained peak, firing and running one-node runs together', peak, 'runs/s');
      const rate = peak / 2;
      reportLatencies(reporter, await latencies(store, container, seeded, rate, processes), rate, 'half of the sustained peak');
    }
  } finally {
    await container.close();
    await store.drop();
  }
}

const suite: BenchSuite = async (reporter) => {
  reporter.section('Engine: how it is measured');
  reporter.note(`${SQLITE_RUNS} (SQLite) / ${PG_RUNS} (PostgreSQL) one-node runs, half as many five-node runs, created before the clock starts; claim batch ${BATCH}`);
  reporter.note('SQLite (worker in this process): one unmeasured round of each pathway and of the raw loop first, so the figures are of warm code; PostgreSQL worker processes start with each measurement');
  reporter.note(
    "raw loop: the engine's PostgreSQL claim statement and batch on a bare job table, one fenced UPDATE per job, in as many processes as the engine (the engine on SQLite reads its batch and claims each run with the run's first write)",
  );
  reporter.note('sustained peak: runs fired as fast as the fire path takes them (200 in flight) while the workers run them');
  reporter.note(
    `latency: fires spread evenly over ${LATENCY_SECONDS} s at half the sustained peak, after ${WARMUP_SECONDS} s of unmeasured firing at that rate (the workers' first runs); to the run's first step (the running transition carries its time; ms resolution)`,
  );
  if (STORES.includes('sqlite')) await measureStore(reporter, 'sqlite');
  if (STORES.includes('postgres')) await measureStore(reporter, 'postgres');
};

export default suite;
