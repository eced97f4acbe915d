/**
 * The demo a fresh clone gets (DESIGN §1): when `carepath serve` starts on a store without any
 * tenant, it makes a demo tenant, workspace and full-access key, imports the sample blueprints
 * the project ships, and adds a web trigger, so `npm ci && npm start` ends in a working curl.
 * The key is shown once, in the notice; once a tenant exists the seed never runs again. Each of
 * these is audited. Never in production (`run-service.ts`): a full-access key nobody asked for,
 * printed into the process's output, which a log collector keeps.
 */
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Container } from '../container.js';
import { systemContext } from '../auth/context.js';
import { uuidv7 } from '../lib/ids.js';
import type { Blueprint } from '../modules/blueprints/blueprint.js';
import { parseBlueprintFile } from '../modules/blueprints/blueprint.parse.js';
import { validateBlueprint } from '../modules/blueprints/blueprint.validate.js';
import { importBlueprint } from '../modules/diagrams/diagram.repository.js';
import {
  countTenants,
  createWorkspace,
  ensureTenant,
  findWorkspaceByName,
  issueKey,
} from '../modules/tenancy/tenancy.repository.js';
import { createTrigger } from '../modules/triggers/trigger.service.js';
import { insertRecords } from '../modules/records/record.repository.js';
import { recordAudit } from '../modules/audit/audit.repository.js';

/** The package's own `blueprints/`, wherever the command is started from. */
export const PROJECT_BLUEPRINTS = fileURLToPath(new URL('../../blueprints/', import.meta.url));

export const DEMO_NAMES = {
  tenant: 'Demo tenant',
  workspace: 'Demo workspace',
  key: 'demo key',
  trigger: 'Demo web trigger',
} as const;

/** The sample the demo trigger starts, when the project ships it; else the first by file name. */
const DEMO_BLUEPRINT = 'Lab result follow-up';

/**
 * A patient for the demo's runs to be about: the sample's high-value branch tags the run's
 * subject, and a fired run has one only when `payload.subject` names a known record.
 */
export const DEMO_PATIENT = { resourceType: 'Patient', extId: 'demo-patient', name: 'Demo Patient', tags: ['diabetes'] } as const;

/** Fire bodies for the demo trigger's sample, one per branch, as the notice prints them. */
export const DEMO_FIRES = [
  { why: 'a normal HbA1c: the run files it and completes', body: { payload: { resource: { valueQuantity: { value: 6.1 } } } } },
  {
    why: 'an HbA1c of 9% for the demo patient: the run tags the patient abnormal-lab, then waits a minute',
    body: { payload: { subject: { reference: `Patient/${DEMO_PATIENT.extId}` }, resource: { valueQuantity: { value: 9 } } } },
  },
] as const;

export interface DemoSeed {
  tenantId: string;
  workspaceId: string;
  keyId: string;
  /** The only copy of the key outside the caller's terminal: the store keeps its hash. */
  key: string;
  blueprints: { id: string; name: string; version: number }[];
  /** On the first blueprint by file name; null when the project ships none. */
  trigger: { id: string; blueprintName: string } | null;
}

/** Every `*.json` in the folder, by file name, validated before anything is written. */
async function readSampleBlueprints(folder: string): Promise<Blueprint[]> {
  const names = (await readdir(folder).catch(() => [] as string[])).filter((name) => name.endsWith('.json')).sort();
  const blueprints: Blueprint[] = [];
  for (const name of names) {
    blueprints.push(validateBlueprint(parseBlueprintFile(await readFile(join(folder, name), 'utf8'), name)));
  }
  return blueprints;
}

/** Seeds the demo and returns what it made, or null when the store already has a tenant. */
export async function seedDemoIfEmpty(container: Container, blueprintFolder = PROJECT_BLUEPRINTS): Promise<DemoSeed | null> {
  if ((await countTenants(container.db)) > 0) return null;
  const samples = await readSampleBlueprints(blueprintFolder);
  const now = container.clock.now();
  const at = now.toISOString();

  // One transaction: a seed that fails half-way leaves an empty store, so the next start
  // tries again and still prints a key.
  return container.db.transaction().execute(async (tx) => {
    if ((await countTenants(tx)) > 0) return null;
    const tenantId = await ensureTenant(tx, DEMO_NAMES.tenant, at);
    // Two processes starting together on an empty PostgreSQL store: the second one waits on the
    // tenant's unique name until the first commits, then finds its workspace here and stands down.
    if (await findWorkspaceByName(tx, tenantId, DEMO_NAMES.workspace)) return null;
    const workspaceId = await createWorkspace(tx, tenantId, DEMO_NAMES.workspace, at);
    const workspace = { id: workspaceId, tenant_id: tenantId };
    const environment = container.config.environment;
    const { keyId, key } = await issueKey(tx, workspace, DEMO_NAMES.key, [], environment, at);

    const blueprints: DemoSeed['blueprints'] = [];
    for (const sample of samples) blueprints.push(await importBlueprint(tx, workspaceId, sample, at));

    await insertRecords(tx, workspaceId, [{ ...DEMO_PATIENT, tags: [...DEMO_PATIENT.tags] }], at);

    // Audited as the admin commands that do the same are: a full-access key, above all, must
    // not come into being unrecorded. The actor is the service (`carepath`), one request id.
    const ctx = { ...systemContext(tenantId, workspaceId, uuidv7(now.getTime())), environment };
    await recordAudit(tx, ctx, at, [
      { action: 'workspace.create', resourceType: 'workspace', resourceId: workspaceId, details: { tenant: DEMO_NAMES.tenant, name: DEMO_NAMES.workspace, demo: true } },
      { action: 'key.create', resourceType: 'key', resourceId: keyId, details: { name: DEMO_NAMES.key, scopes: [], environment, demo: true } },
      ...blueprints.map((blueprint) => ({
        action: 'blueprint.import' as const,
        resourceType: 'blueprint',
        resourceId: blueprint.id,
        details: { name: blueprint.name, version: blueprint.version, demo: true },
      })),
    ]);

    let trigger: DemoSeed['trigger'] = null;
    const started = blueprints.find((blueprint) => blueprint.name === DEMO_BLUEPRINT) ?? blueprints[0];
    if (started) {
      const view = await createTrigger(tx, ctx, { name: DEMO_NAMES.trigger, sourceId: started.id, type: 'web' }, now);
      trigger = { id: view.triggerId, blueprintName: started.name };
    }
    return { tenantId, workspaceId, keyId, key, blueprints, trigger };
  });
}

/** What `serve` prints once, on stdout (never through the logger: the key must not reach logs). */
export function demoNotice(seed: DemoSeed, baseUrl: string): string {
  const auth = `-H 'Authorization: Bearer ${seed.key}'`;
  const lines = [
    '',
    'Demo workspace created on this empty store. Save the key now: it is shown only this once.',
    '',
    `  key         ${seed.key}`,
    `  workspace   ${DEMO_NAMES.workspace} (${seed.workspaceId}), tenant "${DEMO_NAMES.tenant}"`,
  ];
  if (seed.blueprints.length > 0) lines.push(`  blueprints  ${seed.blueprints.map((blueprint) => blueprint.name).join(', ')}`);
  if (seed.trigger) lines.push(`  trigger     ${DEMO_NAMES.trigger} (${seed.trigger.id}) starts "${seed.trigger.blueprintName}"`);
  lines.push(`  patient     ${DEMO_PATIENT.name} (extId ${DEMO_PATIENT.extId}, tagged ${DEMO_PATIENT.tags.join(', ')})`);
  lines.push('', 'Try it:', `  curl -s ${baseUrl}/v1/me ${auth}`);
  if (seed.trigger) {
    // The sample's own payloads for its two branches; another blueprint gets an empty payload.
    const fires = seed.trigger.blueprintName === DEMO_BLUEPRINT ? DEMO_FIRES : [{ why: 'an empty payload', body: { payload: {} } }];
    for (const { why, body } of fires) {
      lines.push(`  # ${why}`);
      lines.push(`  curl -s -X POST ${baseUrl}/v1/triggers/${seed.trigger.id} ${auth} -H 'Content-Type: application/json' -d '${JSON.stringify(body)}'`);
    }
    lines.push('  # then the run, and its steps, by the runId the fire answered');
    lines.push(`  curl -s ${baseUrl}/v1/runs/<runId> ${auth}`);
    lines.push(`  curl -s ${baseUrl}/v1/runs/<runId>/steps ${auth}`);
  }
  lines.push('  # the demo patient and its tags');
  lines.push(
    `  curl -s -X POST ${baseUrl}/v1/search ${auth} -H 'Content-Type: application/json' -d '{"resourceType":"Patient","filters":[{"op":"with","tag":"diabetes"}]}'`,
  );
  lines.push('');
  return `${lines.join('\n')}\n`;
}
