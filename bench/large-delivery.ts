/**
 * A delivery at the size limit (20 MiB) and what it does to everyone else's requests.
 *
 * The service runs in its own process as `carepath serve` does (bench/servers/service-server.ts).
 * A client asks `GET /v1/triggers?limit=1` every 20 ms throughout, the way monitoring or another
 * integration would. Baseline, same run: the same polls for 2 s with nothing else going on.
 * Then one signed delivery of 20 MiB: small Patients (about 144,000: the most items a body can
 * hold, the worst case) and Synthea-shaped resources (about 17,000, when the fixture is present).
 * Figures: the 202's latency, the time until the delivery is processed, and the polls' longest
 * wait and p99 during it against the baseline's.
 *
 * Environment: BENCH_LARGE_STORES (default "sqlite,postgres").
 */
import { createHmac } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { percentile, type BenchSuite, type Reporter } from './reporter.js';
import { benchStore, startServer } from './harness.js';
import { ensureTenant, createWorkspace, issueKey } from '../src/modules/tenancy/tenancy.repository.js';
import { SYNTHEA_FIXTURES } from '../test/helpers/shared-files.js';

const BODY_BYTES = 20 * 1024 * 1024 * 0.97;
const POLL_EVERY_MS = 20;

type Resource = { resourceType: string; id: string; [element: string]: unknown };

/** Entries of about BODY_BYTES of JSON, made from `next(i)`, each with an id of its own. */
function bodyOf(next: (i: number) => Resource): string {
  const entries: string[] = [];
  let bytes = 0;
  for (let i = 0; bytes < BODY_BYTES; i++) {
    const entry = JSON.stringify({ fullUrl: `urn:uuid:${i}`, resource: next(i) });
    entries.push(entry);
    bytes += entry.length + 1;
  }
  return `{"resourceType":"Bundle","type":"collection","entry":[${entries.join(',')}]}`;
}

const smallPatients = () => bodyOf((i) => ({ resourceType: 'Patient', id: `p${i}`, name: [{ family: 'Doe', given: ['Jo'] }], gender: 'female' }));

function syntheaShaped(): string | null {
  if (!existsSync(SYNTHEA_FIXTURES)) return null;
  const all: Resource[] = [];
  for (const file of readdirSync(SYNTHEA_FIXTURES).filter((name) => name.endsWith('.ndjson'))) {
    for (const line of readFileSync(join(SYNTHEA_FIXTURES, file), 'utf8').split('\n')) if (line.trim()) all.push(JSON.parse(line) as Resource);
  }
  return bodyOf((i) => ({ ...all[i % all.length], id: `${all[i % all.length].id}-${Math.floor(i / all.length)}` }));
}

/** Polls until `stop()`, answering each poll's wait (ms). */
function poller(base: string, key: string) {
  const waits: number[] = [];
  let stopped = false;
  const running = (async () => {
    while (!stopped) {
      const started = performance.now();
      await (await fetch(`${base}/v1/triggers?limit=1`, { headers: { authorization: `Bearer ${key}` } })).arrayBuffer();
      waits.push(performance.now() - started);
      await new Promise((resolve) => setTimeout(resolve, POLL_EVERY_MS));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await running;
      return waits;
    },
  };
}

async function deliverAndWatch(reporter: Reporter, base: string, key: string, label: string, body: string) {
  const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
  const webhook = (await (await fetch(`${base}/v1/webhooks`, { method: 'POST', headers: auth, body: JSON.stringify({ name: label }) })).json()) as { webhookId: string; url: string; secret: string };
  const t = Math.floor(Date.now() / 1000);
  const signature = `t=${t},v1=${createHmac('sha256', webhook.secret).update(`${t}.${body}`).digest('hex')}`;
  const polls = poller(base, key);
  await new Promise((resolve) => setTimeout(resolve, 300));
  const started = performance.now();
  const answer = await fetch(`${base}/v1/webhooks/${webhook.webhookId}`, { method: 'POST', headers: { 'content-type': 'application/fhir+json', 'x-service-signature': signature }, body });
  const accepted = ((await answer.json()) as { accepted: number }).accepted;
  const answeredMs = performance.now() - started;
  let status = '';
  while (status !== 'processed' && status !== 'failed') {
    await new Promise((resolve) => setTimeout(resolve, 50));
    const list = (await (await fetch(`${base}/v1/webhooks/${webhook.webhookId}/deliveries?limit=1`, { headers: auth })).json()) as { data: { status: string }[] };
    status = list.data[0]?.status ?? '';
  }
  const processedMs = performance.now() - started;
  const waits = await polls.stop();
  reporter.note(`${label}: ${accepted.toLocaleString('en-US')} resources in ${(body.length / 2 ** 20).toFixed(1)} MiB, ${status}`);
  reporter.figure(`${label}: 202 after`, answeredMs, 'ms');
  reporter.figure(`${label}: processed after`, processedMs, 'ms');
  reporter.figure(`${label}: polls' longest wait meanwhile`, Math.max(...waits), 'ms');
  reporter.figure(`${label}: polls' p99 meanwhile (${waits.length} polls)`, percentile(waits, 99), 'ms');
}

const largeDeliveryBench: BenchSuite = async (reporter) => {
  const bodies: [string, string][] = [['small Patients', smallPatients()]];
  const synthea = syntheaShaped();
  if (synthea) bodies.push(['Synthea-shaped', synthea]);
  for (const kind of (process.env.BENCH_LARGE_STORES ?? 'sqlite,postgres').split(',').filter(Boolean) as ('sqlite' | 'postgres')[]) {
    reporter.section(`A 20 MiB delivery and everyone else's requests, ${kind === 'sqlite' ? 'SQLite' : 'PostgreSQL'} (the service in its own process, a poll every 20 ms)`);
    const store = await benchStore(kind);
    const container = await store.open();
    const at = new Date().toISOString();
    const tenantId = await ensureTenant(container.db, 'bench', at);
    const workspaceId = await createWorkspace(container.db, tenantId, 'large deliveries', at);
    const { key } = await issueKey(container.db, { id: workspaceId, tenant_id: tenantId }, 'bench', [], 'staging', at);
    await container.close();
    const server = await startServer('bench/servers/service-server.ts', store.env);
    try {
      const base = `http://127.0.0.1:${server.port}`;
      // The FHIR validation compiles as the service starts; the baseline begins once it is done.
      await new Promise((resolve) => setTimeout(resolve, 8_000));
      const idle = poller(base, key);
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const baseline = await idle.stop();
      reporter.figure(`baseline, nothing else going on: polls' longest wait (${baseline.length} polls)`, Math.max(...baseline), 'ms');
      reporter.figure('baseline: polls\' p99', percentile(baseline, 99), 'ms');
      for (const [label, body] of bodies) await deliverAndWatch(reporter, base, key, label, body);
    } finally {
      await server.stop();
      await store.drop();
    }
  }
};

export default largeDeliveryBench;
