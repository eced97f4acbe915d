import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { expect, it } from 'vitest';
import { describeEachStore, type TestEnv } from '../helpers/test-env.js';
import { bundle, createEndpoint, eventTrigger, type Endpoint } from '../helpers/deliveries.js';
import { signPayload } from '../../src/ingestion/signature.js';

const LEASE_MS = 1000;
const ENCOUNTERS = 3000;

interface Child {
  port: number;
  process: ChildProcess;
}

async function startChild(env: TestEnv): Promise<Child> {
  const schema = env.schema;
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/helpers/inbound-process.ts'], {
    env: {
      ...process.env,
      CAREPATH_DATABASE_URL: env.container.config.databaseUrl,
      INBOUND_LEASE_MS: String(LEASE_MS),
      ...(schema ? { INBOUND_PG_SCHEMA: schema } : {}),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`service process exited with ${code}`)));
    createInterface({ input: child.stdout! }).once('line', (line) => resolve(JSON.parse(line).port));
  });
  return { port, process: child };
}

async function kill(child: Child, signal: NodeJS.Signals): Promise<void> {
  if (child.process.exitCode !== null || child.process.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    child.process.once('exit', () => resolve());
    child.process.kill(signal);
  });
}

/**
 * Polls until `done` holds and answers the value that made it hold. A condition not reached in
 * time fails the test here, by name: on a loaded machine a scenario takes several times longer,
 * and a wait that gave up quietly used to fail a later assertion that said nothing of why.
 */
async function waitFor<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number, pollMs = 5): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > until) throw new Error(`${what}: not reached within ${timeoutMs / 1000} s (last seen: ${JSON.stringify(value)})`);
    await new Promise((resolve) => setTimeout(resolve, pollMs));
  }
}

describeEachStore('a killed process loses no delivery and applies none twice', (env) => {
  let endpoint: Endpoint;
  let triggerId: string;
  let workspaceId: string;
  // Each scenario delivers its own encounters: the same ones again would be updates, not new finishes.
  const bodyFor = (key: string) =>
    JSON.stringify(
      bundle([
        { resourceType: 'Patient', id: 'crash-patient', name: [{ family: 'Crash' }] },
        ...Array.from({ length: ENCOUNTERS }, (_, i) => ({
          resourceType: 'Encounter',
          id: `${key}-enc-${i}`,
          status: 'finished',
          class: { code: 'AMB' },
          subject: { reference: 'Patient/crash-patient' },
        })),
      ]),
    );

  const runCount = async (key: string) =>
    Number(
      (await env.db.selectFrom('runs').select((eb) => eb.fn.countAll<number>().as('n')).where('workspace_id', '=', workspaceId).where('idempotency_key', '=', key).executeTakeFirstOrThrow()).n,
    );
  const deliveryOf = (key: string) =>
    env.db.selectFrom('deliveries').select(['id', 'status', 'attempts', 'runs_started']).where('webhook_id', '=', endpoint.webhookId).where('idempotency_key', '=', key).executeTakeFirst();

  async function post(child: Child, key: string): Promise<number> {
    const body = bodyFor(key);
    const res = await fetch(`http://127.0.0.1:${child.port}/v1/webhooks/${endpoint.webhookId}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key, 'x-service-signature': signPayload(endpoint.secret, body) },
      body,
    });
    return res.status;
  }

  /** Delivers through one process, kills it at the moment asked, and lets a second one finish. */
  async function crashAndRecover(key: string, killWhen: 'right after the 202' | 'while processing' | 'while creating runs') {
    const first = await startChild(env);
    let atKill: { status?: string; runs: number };
    try {
      expect(await post(first, key)).toBe(202);
      if (killWhen === 'while processing') {
        await waitFor('the delivery taken for processing', () => deliveryOf(key), (d) => d?.status !== 'received', 120_000);
      } else if (killWhen === 'while creating runs') {
        await waitFor('the first of its runs created', () => runCount(key), (n) => n > 0, 120_000, 2);
      }
    } finally {
      await kill(first, 'SIGKILL');
    }
    atKill = { status: (await deliveryOf(key))?.status, runs: await runCount(key) };

    const second = await startChild(env);
    try {
      await waitFor(
        'the delivery processed and every run created by the second process',
        async () => ({ delivery: await deliveryOf(key), runs: await runCount(key) }),
        (s) => s.delivery?.status === 'processed' && s.runs >= ENCOUNTERS,
        180_000,
        50,
      );
      // Longer than any lease: nothing left behind may still turn into a second run.
      await new Promise((resolve) => setTimeout(resolve, 3 * LEASE_MS));
    } finally {
      await kill(second, 'SIGTERM');
    }
    return atKill;
  }

  async function expectOneSetOfRuns(key: string) {
    const delivery = await deliveryOf(key);
    expect(delivery).toMatchObject({ status: 'processed', runs_started: ENCOUNTERS });
    expect(await runCount(key)).toBe(ENCOUNTERS);
    const payloads = await env.db.selectFrom('runs').select('payload').where('idempotency_key', '=', key).where('workspace_id', '=', workspaceId).execute();
    const encounters = new Set(payloads.map((row) => JSON.parse(row.payload!).resource.id));
    expect(encounters.size).toBe(ENCOUNTERS);
    // One run.create audit event per run: a run made twice would have left a second one.
    const audits = await env.db
      .selectFrom('audit_events')
      .select('id')
      .where('workspace_id', '=', workspaceId)
      .where('action', '=', 'run.create')
      .where('details', 'like', `%${delivery!.id}%`)
      .execute();
    expect(audits).toHaveLength(ENCOUNTERS);
    expect(await env.db.selectFrom('planned_runs').select('id').where('workspace_id', '=', workspaceId).execute()).toHaveLength(0);
    const patients = await env.db.selectFrom('records').select('id').where('workspace_id', '=', workspaceId).where('resource_type', '=', 'Patient').execute();
    expect(patients).toHaveLength(1);
  }

  it('sets up a workspace, an endpoint and an event trigger', async () => {
    const ws = await env.workspace();
    workspaceId = ws.workspaceId;
    endpoint = await createEndpoint(ws);
    triggerId = (await eventTrigger(ws, 'Encounter.finished')).triggerId;
    expect(triggerId).toBeDefined();
  });

  it('killed right after the 202: the next process processes it once', async () => {
    await crashAndRecover('crash-1', 'right after the 202');
    await expectOneSetOfRuns('crash-1');
  }, 420_000);

  it('killed while the delivery is processing: its lease runs out and the next process goes on after the last part committed', async () => {
    // 3,001 items: four parts of at most 1,000, each committed with its progress (delivery-parts.ts).
    const atKill = await crashAndRecover('crash-2', 'while processing');
    expect(atKill.status).toBe('processing');
    await expectOneSetOfRuns('crash-2');
    expect((await deliveryOf('crash-2'))!.attempts).toBeGreaterThanOrEqual(2);
  }, 420_000);

  it('killed while its runs are being created: the next process creates the rest, none twice', async () => {
    // The runs of each part are created once it commits: the delivery may still have parts to apply.
    const atKill = await crashAndRecover('crash-3', 'while creating runs');
    expect(['processing', 'processed']).toContain(atKill.status);
    expect(atKill.runs).toBeGreaterThan(0);
    expect(atKill.runs).toBeLessThan(ENCOUNTERS);
    await expectOneSetOfRuns('crash-3');
  }, 420_000);
});
