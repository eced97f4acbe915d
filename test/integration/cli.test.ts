import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../../src/config.js';
import { createContainer, type Container } from '../../src/container.js';
import { createLogger } from '../../src/lib/logger.js';
import { ManualClock } from '../../src/lib/clock.js';
import { systemContext } from '../../src/auth/context.js';
import { uuidv7 } from '../../src/lib/ids.js';
import { hashApiKey } from '../../src/auth/api-keys.js';
import { findActiveKey } from '../../src/auth/key.repository.js';
import { recordAudit } from '../../src/modules/audit/audit.repository.js';
import { BlueprintError, validateBlueprint } from '../../src/modules/blueprints/blueprint.validate.js';
import { parseBlueprintFile } from '../../src/modules/blueprints/blueprint.parse.js';
import { createSecretBox } from '../../src/lib/secret-box.js';
import { createWebhook } from '../../src/modules/webhooks/webhook.service.js';
import { activeSecretsOf } from '../../src/modules/webhooks/webhook-secrets.js';
import { findWorkspace } from '../../src/modules/tenancy/tenancy.repository.js';
import { findTrigger } from '../../src/modules/triggers/trigger.repository.js';
import { CommandError, UsageError } from '../../src/cli/errors.js';
import { parseAdminArgv, runAdmin } from '../../src/cli/admin/dispatch.js';
import type { Output } from '../../src/cli/admin/command.js';
import { workspaceCreate } from '../../src/cli/admin/workspace.js';
import { keyCreate, keyList, keyRevoke } from '../../src/cli/admin/key.js';
import { blueprintExport, blueprintImport, blueprintList } from '../../src/cli/admin/blueprint.js';
import { webhookRotateSecret } from '../../src/cli/admin/webhook.js';
import { secretSet } from '../../src/cli/admin/secret.js';
import { auditExport } from '../../src/cli/admin/audit.js';
import { DEMO_FIRES, DEMO_PATIENT, demoNotice, seedDemoIfEmpty } from '../../src/cli/demo-seed.js';
import { findRecordByExtId, tagsOf } from '../../src/modules/records/record.repository.js';
import { freshStore, STORE_KINDS, type FreshStore, type StoreKind } from '../helpers/stores.js';
import { SHARED_EXAMPLE_BLUEPRINTS } from '../helpers/shared-files.js';

const PROJECT_BLUEPRINTS = fileURLToPath(new URL('../../blueprints/', import.meta.url));
const SHARED_EXAMPLES = SHARED_EXAMPLE_BLUEPRINTS;

function jsonFiles(folder: string): string[] {
  return readdirSync(folder)
    .filter((name) => name.endsWith('.json'))
    .sort()
    .map((name) => join(folder, name));
}

function unique(prefix: string): string {
  return `${prefix} ${Math.random().toString(36).slice(2, 10)}`;
}

/** Runs argv as `carepath admin …` would, collecting what it prints on stdout. */
async function runArgv(container: Container, argv: string[]): Promise<string> {
  const parsed = parseAdminArgv(argv);
  let printed = '';
  const out: Output = { write: async (text) => void (printed += text) };
  if (parsed.kind === 'help') return parsed.text;
  await parsed.command.execute(container, parsed.args, out, parsed.json);
  return printed;
}

async function openContainer(store: FreshStore, clock?: ManualClock): Promise<Container> {
  const config = loadConfig({ CAREPATH_DATABASE_URL: store.databaseUrl });
  return createContainer(config, { storeOptions: store.storeOptions, logger: createLogger('silent'), clock });
}

function suite(kind: StoreKind) {
  describe(`carepath admin [${kind}]`, () => {
    let store: FreshStore;
    let container: Container;
    let tmp: string;

    beforeAll(async () => {
      store = await freshStore(kind);
      container = await openContainer(store);
      tmp = mkdtempSync(join(tmpdir(), 'carepath-cli-'));
    });
    afterAll(async () => {
      await container?.close();
      await store?.dispose();
      rmSync(tmp, { recursive: true, force: true });
    });

    async function newWorkspace(): Promise<string> {
      return (await workspaceCreate(container, { tenant: unique('tenant'), name: 'Care team' })).workspaceId;
    }

    describe('workspace create', () => {
      it('makes the tenant once and reuses it for the next workspace of that tenant name', async () => {
        const tenant = unique('Acme Health');
        const first = await workspaceCreate(container, { tenant, name: 'Cardiology' });
        const second = await workspaceCreate(container, { tenant, name: 'Oncology' });
        expect(second.tenantId).toBe(first.tenantId);
        expect(second.workspaceId).not.toBe(first.workspaceId);
        const other = await workspaceCreate(container, { tenant: unique('Other'), name: 'Cardiology' });
        expect(other.tenantId).not.toBe(first.tenantId);
      });

      it('refuses a second workspace of the same name in one tenant, naming the existing one', async () => {
        const tenant = unique('Acme Health');
        const first = await workspaceCreate(container, { tenant, name: 'Cardiology' });
        const again = workspaceCreate(container, { tenant, name: 'Cardiology' });
        await expect(again).rejects.toThrow(CommandError);
        await expect(again).rejects.toThrow(first.workspaceId);
      });

      it('lists every workspace with its tenant, or one tenant\'s: an id lost is found again', async () => {
        const tenant = unique('Lost Ids Health');
        const cardiology = await workspaceCreate(container, { tenant, name: 'Cardiology' });
        const oncology = await workspaceCreate(container, { tenant, name: 'Oncology' });
        const listed = JSON.parse(await runArgv(container, ['workspace', 'list', '--tenant', tenant, '--json']));
        expect(listed).toEqual([
          { workspaceId: cardiology.workspaceId, name: 'Cardiology', tenantId: cardiology.tenantId, tenant, createdAt: expect.any(String) },
          { workspaceId: oncology.workspaceId, name: 'Oncology', tenantId: cardiology.tenantId, tenant, createdAt: expect.any(String) },
        ]);
        const all = JSON.parse(await runArgv(container, ['workspace', 'list', '--json'])) as { workspaceId: string }[];
        expect(all.map((w) => w.workspaceId)).toEqual(expect.arrayContaining([cardiology.workspaceId, oncology.workspaceId]));
        const text = await runArgv(container, ['workspace', 'list', '--tenant', tenant]);
        expect(text).toContain(`${cardiology.workspaceId}  Cardiology  tenant "${tenant}"`);
        expect(await runArgv(container, ['workspace', 'list', '--tenant', unique('nobody')])).toMatch(/^No workspaces in tenant ".+"\.\n$/);
      });

      it('prints exactly the contract object with --json', async () => {
        const printed = await runArgv(container, ['workspace', 'create', '--tenant', unique('t'), '--name', 'w', '--json']);
        expect(printed.endsWith('\n')).toBe(true);
        expect(printed.trim().split('\n')).toHaveLength(1);
        expect(Object.keys(JSON.parse(printed)).sort()).toEqual(['tenantId', 'workspaceId']);
      });
    });

    describe('keys', () => {
      it('creates a full-access key that works, lists it without its hash, and revokes it', async () => {
        const workspaceId = await newWorkspace();
        const issued = await keyCreate(container, { workspaceId, name: 'integration' });
        expect(issued.key).toMatch(/^cpk_staging_[0-9A-Za-z]{43}$/);
        expect(await findActiveKey(container.db, issued.key)).toMatchObject({ keyId: issued.keyId, workspaceId, scopes: [] });

        const listed = await keyList(container, { workspaceId });
        expect(listed).toEqual([expect.objectContaining({ keyId: issued.keyId, name: 'integration', scopes: [], revokedAt: null })]);
        const printed = await runArgv(container, ['key', 'list', '--workspace', workspaceId, '--json']);
        expect(Array.isArray(JSON.parse(printed))).toBe(true);
        expect(printed).not.toContain(hashApiKey(issued.key));
        expect(printed).not.toContain(issued.key);
        expect(printed).not.toMatch(/hash/i);

        expect(await keyRevoke(container, { keyId: issued.keyId })).toEqual({ keyId: issued.keyId, revoked: true });
        expect(await findActiveKey(container.db, issued.key)).toBeNull();
        const [revoked] = await keyList(container, { workspaceId });
        expect(revoked.revokedAt).not.toBeNull();
        // Revoking again is harmless; an unknown key is an error.
        await keyRevoke(container, { keyId: issued.keyId });
        await expect(keyRevoke(container, { keyId: '01900000-0000-7000-8000-000000000000' })).rejects.toThrow(CommandError);
        await expect(keyRevoke(container, { keyId: 'not-a-key' })).rejects.toThrow(/no key has the id "not-a-key"/);
      });

      it('takes ids in upper case: the same UUID, stored and shown in lower case', async () => {
        const workspaceId = await newWorkspace();
        const issued = JSON.parse(await runArgv(container, ['key', 'create', '--workspace', workspaceId.toUpperCase(), '--name', 'cased', '--json']));
        expect(await findActiveKey(container.db, issued.key)).toMatchObject({ keyId: issued.keyId, workspaceId });
        expect(JSON.parse(await runArgv(container, ['key', 'list', '--workspace', workspaceId.toUpperCase(), '--json']))).toHaveLength(1);
        await runArgv(container, ['key', 'revoke', issued.keyId.toUpperCase()]);
        expect(await findActiveKey(container.db, issued.key)).toBeNull();
      });

      it('narrows a key to the scopes listed and refuses unknown ones by name', async () => {
        const workspaceId = await newWorkspace();
        const printed = await runArgv(container, [
          'key', 'create', '--workspace', workspaceId, '--name', 'reader', '--scopes', 'runs:read, triggers:read,runs:read', '--json',
        ]);
        const issued = JSON.parse(printed);
        expect(Object.keys(issued).sort()).toEqual(['key', 'keyId']);
        expect((await findActiveKey(container.db, issued.key))?.scopes).toEqual(['runs:read', 'triggers:read']);

        await expect(keyCreate(container, { workspaceId, name: 'x', scopes: ['runs:read', 'runs:fly'] })).rejects.toThrow(
          /unknown scope "runs:fly"/,
        );
        await expect(keyCreate(container, { workspaceId, name: 'x', scopes: [] })).rejects.toThrow(/full-access/);
        // A malformed --scopes is wrong usage (exit 2), found before anything is read or written.
        for (const scopes of [',', 'foo:bar']) {
          await expect(runArgv(container, ['key', 'create', '--workspace', workspaceId, '--name', 'x', '--scopes', scopes])).rejects.toThrow(UsageError);
        }
        expect(await keyList(container, { workspaceId })).toHaveLength(1);
      });

      it('refuses an unknown workspace', async () => {
        await expect(keyCreate(container, { workspaceId: '01900000-0000-7000-8000-000000000000', name: 'x' })).rejects.toThrow(
          /no workspace has the id/,
        );
        await expect(keyList(container, { workspaceId: 'nope' })).rejects.toThrow(CommandError);
      });
    });

    describe('blueprints', () => {
      it.each(jsonFiles(PROJECT_BLUEPRINTS))('imports the project sample %s', async (file) => {
        const workspaceId = await newWorkspace();
        const imported = await blueprintImport(container, { file, workspaceId });
        const expected = validateBlueprint(parseBlueprintFile(readFileSync(file, 'utf8'), file));
        expect(imported).toMatchObject({ name: expected.name, version: 1 });
        expect(await blueprintExport(container, { blueprintId: imported.id, workspaceId })).toEqual(expected);
      });

      describe.skipIf(!existsSync(SHARED_EXAMPLES))('shared examples', () => {
        const files = existsSync(SHARED_EXAMPLES) ? jsonFiles(SHARED_EXAMPLES) : [];
        it.each(files)('imports %s', async (file) => {
          const workspaceId = await newWorkspace();
          const imported = await blueprintImport(container, { file, workspaceId });
          expect(imported.version).toBe(1);
        });
      });

      it('imports the same name twice as version 2 and exports the current version', async () => {
        const workspaceId = await newWorkspace();
        const file = jsonFiles(PROJECT_BLUEPRINTS)[0];
        const first = await blueprintImport(container, { file, workspaceId });
        const changed = { ...JSON.parse(readFileSync(file, 'utf8')), tags: ['changed'] };
        const second = join(tmp, 'changed.json');
        writeFileSync(second, JSON.stringify(changed));
        const again = JSON.parse(await runArgv(container, ['blueprint', 'import', second, '--workspace', workspaceId, '--json']));
        expect(again).toEqual({ id: first.id, name: first.name, version: 2 });
        expect(await blueprintExport(container, { blueprintId: first.id, workspaceId })).toMatchObject({ tags: ['changed'] });
        const list = await blueprintList(container, { workspaceId });
        expect(list).toEqual([expect.objectContaining({ id: first.id, version: 2, tags: ['changed'], type: 'blueprint' })]);
      });

      it('says which secrets an imported blueprint names that the workspace has not set (JSON answer unchanged)', async () => {
        const workspaceId = await newWorkspace();
        const file = join(tmp, 'with-secret.json');
        const call = { id: 'call', kind: 'action', automations: [{ id: 'post', type: 'http', with: { method: 'POST', url: 'https://lab.example.org/orders', headers: { authorization: 'Bearer ${secrets.LAB_TOKEN}', 'x-client': '${secrets.CLIENT_ID}' } } }] };
        writeFileSync(file, JSON.stringify({ name: 'Uses secrets', nodes: [{ id: 'start', kind: 'start' }, call, { id: 'done', kind: 'end' }], links: [{ from: 'start', to: 'call' }, { from: 'call', to: 'done' }] }));
        await secretSet(container, { workspaceId, name: 'CLIENT_ID', value: 'client-0042' });
        const printed = await runArgv(container, ['blueprint', 'import', file, '--workspace', workspaceId]);
        expect(printed).toContain(`Its http calls name secrets this workspace has not set: LAB_TOKEN; they fail until each is set with: printf %s "$VALUE" | carepath admin secret set <name> --workspace ${workspaceId}`);
        const json = JSON.parse(await runArgv(container, ['blueprint', 'import', file, '--workspace', workspaceId, '--json']));
        expect(Object.keys(json).sort()).toEqual(['id', 'name', 'version']);
        await secretSet(container, { workspaceId, name: 'LAB_TOKEN', value: 'lab-token-0042' });
        expect((await blueprintImport(container, { file, workspaceId })).secretsNotSet).toEqual([]);
        expect(await runArgv(container, ['blueprint', 'import', file, '--workspace', workspaceId])).not.toContain('not set');
      });

      it('reads YAML too', async () => {
        const workspaceId = await newWorkspace();
        const file = join(tmp, 'tiny.yaml');
        writeFileSync(
          file,
          ['name: Tiny', 'nodes:', '  - { id: start, kind: start }', '  - { id: done, kind: end }', 'links:', '  - { from: start, to: done }'].join('\n'),
        );
        expect(await blueprintImport(container, { file, workspaceId })).toMatchObject({ name: 'Tiny', version: 1 });
      });

      it('reports every problem of a bad blueprint, naming the node, and stores nothing', async () => {
        const workspaceId = await newWorkspace();
        const file = join(tmp, 'bad.json');
        writeFileSync(
          file,
          JSON.stringify({
            name: 'Broken',
            nodes: [
              { id: 'start', kind: 'start' },
              { id: 'beam-up', kind: 'action', automations: [{ id: 'go', type: 'teleport', with: {} }] },
              { id: 'done', kind: 'end' },
            ],
            links: [
              { from: 'start', to: 'beam-up' },
              { from: 'beam-up', to: 'nowhere' },
            ],
          }),
        );
        const failure = await blueprintImport(container, { file, workspaceId }).catch((error: unknown) => error);
        expect(failure).toBeInstanceOf(BlueprintError);
        const problems = (failure as BlueprintError).problems;
        expect(problems.length).toBeGreaterThan(1);
        expect(problems.some((problem) => problem.includes('"beam-up"') && problem.includes('teleport'))).toBe(true);
        expect(problems.some((problem) => problem.includes('nowhere'))).toBe(true);
        expect(await blueprintList(container, { workspaceId })).toEqual([]);
      });

      it('says which file it cannot read and which blueprint it cannot find', async () => {
        const workspaceId = await newWorkspace();
        await expect(blueprintImport(container, { file: join(tmp, 'missing.json'), workspaceId })).rejects.toThrow(/no such file/);
        await expect(
          blueprintExport(container, { blueprintId: '01900000-0000-7000-8000-000000000000', workspaceId }),
        ).rejects.toThrow(CommandError);
      });
    });

    describe('webhook rotate-secret', () => {
      it('gives a new secret and keeps the old one valid for the overlap', async () => {
        const workspaceId = await newWorkspace();
        const workspace = (await findWorkspace(container.db, workspaceId))!;
        const box = createSecretBox(container.config.secretKey);
        const ctx = systemContext(workspace.tenant_id, workspaceId, 'test');
        const created = await createWebhook({ db: container.db, box, publicUrl: 'http://x' }, ctx, { name: 'EHR' }, new Date());

        const printed = await runArgv(container, ['webhook', 'rotate-secret', created.webhookId, '--overlap', 'PT2H', '--json']);
        const rotated = JSON.parse(printed);
        expect(Object.keys(rotated).sort()).toEqual(['oldSecretValidUntil', 'secret', 'webhookId']);
        expect(rotated.secret).not.toBe(created.secret);
        const hours = (Date.parse(rotated.oldSecretValidUntil) - Date.now()) / 3_600_000;
        expect(hours).toBeGreaterThan(1.9);
        expect(hours).toBeLessThanOrEqual(2);
        const active = await activeSecretsOf(container.db, box, created.webhookId, new Date());
        expect(active.map((secret) => secret.secret).sort()).toEqual([created.secret, rotated.secret].sort());

        // Without overlap the old secret ends at once, and the command says so rather than
        // "keeps working until" this very instant.
        const ended = await runArgv(container, ['webhook', 'rotate-secret', created.webhookId, '--overlap', 'PT0S']);
        expect(ended).toMatch(/^The old secret stopped working now \(no overlap\)/m);
        expect(ended).not.toMatch(/keeps working/);
        expect(await activeSecretsOf(container.db, box, created.webhookId, new Date())).toHaveLength(1);
        await expect(
          webhookRotateSecret(container, { webhookId: '01900000-0000-7000-8000-000000000000', overlapMs: 0 }),
        ).rejects.toThrow(CommandError);
      });
    });

    describe('audit of admin changes', () => {
      it('records every admin change in its workspace, as carepath admin, with no key, hash or secret', async () => {
        const tenant = unique('Audited');
        const { workspaceId } = await workspaceCreate(container, { tenant, name: 'Cardiology' });
        const issued = await keyCreate(container, { workspaceId, name: 'ehr', scopes: ['runs:read'] });
        await keyRevoke(container, { keyId: issued.keyId });
        await keyRevoke(container, { keyId: issued.keyId }); // already revoked: nothing new to record
        const imported = await blueprintImport(container, { workspaceId, file: jsonFiles(PROJECT_BLUEPRINTS)[0] });
        const workspace = (await findWorkspace(container.db, workspaceId))!;
        const box = createSecretBox(container.config.secretKey);
        const ctx = systemContext(workspace.tenant_id, workspaceId, 'test');
        const webhook = await createWebhook({ db: container.db, box, publicUrl: 'http://x' }, ctx, { name: 'EHR' }, new Date());
        const rotated = await webhookRotateSecret(container, { webhookId: webhook.webhookId, overlapMs: 3_600_000 });

        const exported = [];
        for await (const event of auditExport(container, { workspaceId })) exported.push(event);
        // The endpoint was made through the service, as the API makes it: audited as its caller.
        const created = exported.filter((event) => event.action === 'webhook.create');
        expect(created).toMatchObject([{ resourceId: webhook.webhookId, keyName: 'carepath' }]);
        const events = exported.filter((event) => event.action !== 'webhook.create');
        expect(events.map((event) => [event.action, event.resourceId])).toEqual([
          ['workspace.create', workspaceId],
          ['key.create', issued.keyId],
          ['key.revoke', issued.keyId],
          ['blueprint.import', imported.id],
          ['webhook.rotate_secret', webhook.webhookId],
        ]);
        for (const event of events) {
          expect(event).toMatchObject({ keyName: 'carepath admin', keyId: null, workspaceId, outcome: 'success' });
          expect(event.requestId).toMatch(/^[0-9a-f-]{36}$/);
        }
        expect(new Set(events.map((event) => event.requestId)).size).toBe(events.length);
        expect(events[1].details).toEqual({ name: 'ehr', scopes: ['runs:read'], environment: 'staging' });
        expect(events[4].details).toEqual({ overlapSeconds: 3600 });
        const everything = JSON.stringify(exported);
        for (const secret of [issued.key, hashApiKey(issued.key), rotated.secret, webhook.secret]) expect(everything).not.toContain(secret);
      });

      it('records nothing when the change fails', async () => {
        const workspaceId = await newWorkspace();
        await expect(keyCreate(container, { workspaceId, name: 'bad', scopes: ['nope'] })).rejects.toThrow(UsageError);
        const events = [];
        for await (const event of auditExport(container, { workspaceId })) events.push(event);
        expect(events.map((event) => event.action)).toEqual(['workspace.create']);
      });
    });

    describe('audit export', () => {
      it('streams the workspace events oldest first, across pages, from --since on', async () => {
        const workspaceId = await newWorkspace();
        const otherId = await newWorkspace();
        const tenantId = (await findWorkspace(container.db, workspaceId))!.tenant_id;
        const ctx = systemContext(tenantId, workspaceId, 'req-1');
        const start = Date.parse('2024-03-01T00:00:00.000Z');
        const count = 1_203;
        for (let i = 0; i < count; i += 1) {
          await recordAudit(container.db, ctx, new Date(start + i * 1000).toISOString(), [
            { action: 'run.create', resourceType: 'run', resourceId: `r${i}`, details: { i } },
          ]);
        }
        await recordAudit(container.db, systemContext(tenantId, otherId, 'req-2'), new Date(start).toISOString(), [
          { action: 'run.create', resourceType: 'run', resourceId: 'elsewhere' },
        ]);

        const exported = [];
        for await (const event of auditExport(container, { workspaceId })) exported.push(event);
        // Besides the runs: the workspace's own creation, by the admin command.
        expect(exported.filter((event) => event.action === 'workspace.create')).toHaveLength(1);
        const events = exported.filter((event) => event.action !== 'workspace.create');
        expect(events).toHaveLength(count);
        expect(events.map((event) => event.details.i)).toEqual([...Array(count).keys()]);
        expect(events.every((event) => event.workspaceId === workspaceId)).toBe(true);

        const printed = await runArgv(container, ['audit', 'export', '--workspace', workspaceId, '--since', '2024-03-01T00:20:00+00:00']);
        const lines = printed.trimEnd().split('\n').map((line) => JSON.parse(line));
        const runLines = lines.filter((line) => line.action === 'run.create');
        expect(runLines).toHaveLength(count - 1200);
        expect(runLines[0]).toMatchObject({ action: 'run.create', resourceId: 'r1200', at: '2024-03-01T00:20:00.000Z' });
        const fresh = await runArgv(container, ['audit', 'export', '--workspace', await newWorkspace()]);
        expect(fresh.trimEnd().split('\n').map((line) => JSON.parse(line).action)).toEqual(['workspace.create']);
      });

      it('refuses a --since that is not a time', () => {
        expect(() => parseAdminArgv(['audit', 'export', '--workspace', 'w', '--since', 'last week'])).toThrow(UsageError);
      });

      it('exports the events of one record (--record) or one key (--key), oldest first, with --since too', async () => {
        const workspaceId = await newWorkspace();
        const tenantId = (await findWorkspace(container.db, workspaceId))!.tenant_id;
        const [ada, bob, runA, runB, leaked, other] = Array.from({ length: 6 }, () => uuidv7());
        const as = (keyId: string) => ({ ...systemContext(tenantId, workspaceId, 'req'), keyId });
        const start = Date.parse('2024-04-01T00:00:00.000Z');
        const at = (minute: number) => new Date(start + minute * 60_000).toISOString();
        await recordAudit(container.db, as(leaked), at(0), [{ action: 'run.create', resourceType: 'run', resourceId: runA, details: { subjectRecordId: ada } }]);
        await recordAudit(container.db, as(other), at(1), [{ action: 'run.create', resourceType: 'run', resourceId: runB, details: { subjectRecordId: bob } }]);
        await recordAudit(container.db, as(leaked), at(2), [
          { action: 'search.execute', resourceType: 'search', resourceId: null, details: { resourceType: 'Patient', filters: [], total: 2, limit: 10, offset: 0, ids: [bob, ada] } },
        ]);
        await recordAudit(container.db, as(other), at(3), [{ action: 'run.cancel', resourceType: 'run', resourceId: runA, details: { subjectRecordId: ada } }]);
        await recordAudit(container.db, as(leaked), at(4), [{ action: 'query.create', resourceType: 'query', resourceId: uuidv7(), details: { name: 'q' } }]);

        const exported = async (...flags: string[]) =>
          (await runArgv(container, ['audit', 'export', '--workspace', workspaceId, ...flags]))
            .trimEnd()
            .split('\n')
            .filter((line) => line !== '')
            .map((line) => JSON.parse(line))
            .map((event) => `${event.action} ${event.at.slice(14, 16)}`);
        expect(await exported('--record', ada.toUpperCase())).toEqual(['run.create 00', 'search.execute 02', 'run.cancel 03']);
        expect(await exported('--record', bob)).toEqual(['run.create 01', 'search.execute 02']);
        expect(await exported('--key', leaked)).toEqual(['run.create 00', 'search.execute 02', 'query.create 04']);
        expect(await exported('--key', leaked, '--record', bob)).toEqual(['search.execute 02']);
        // Ada's first export above is audited (audit.export, now) and names her record: it is in her events since then.
        expect(await exported('--record', ada, '--since', '2024-04-01T00:02:00Z')).toEqual(['search.execute 02', 'run.cancel 03', expect.stringMatching(/^audit\.export \d\d$/)]);
        expect(await exported('--record', uuidv7())).toEqual([]);
        expect(() => parseAdminArgv(['audit', 'export', '--workspace', workspaceId, '--record', 'mrn-1'])).toThrow(/--record must be a record id/);
        expect(() => parseAdminArgv(['audit', 'export', '--workspace', workspaceId, '--key', 'abc'])).toThrow(UsageError);
      });
    });

    describe('demo seed', () => {
      it('seeds an empty store once: key, workspace, samples and a web trigger', async () => {
        const demoStore = await freshStore(kind);
        const demo = await openContainer(demoStore);
        try {
          const seed = await seedDemoIfEmpty(demo);
          expect(seed).not.toBeNull();
          const ctx = await findActiveKey(demo.db, seed!.key);
          expect(ctx).toMatchObject({ workspaceId: seed!.workspaceId, keyName: 'demo key', scopes: [] });
          expect(seed!.blueprints.map((blueprint) => blueprint.name)).toEqual(
            jsonFiles(PROJECT_BLUEPRINTS).map((file) => JSON.parse(readFileSync(file, 'utf8')).name),
          );
          const trigger = await findTrigger(demo.db, seed!.workspaceId, seed!.trigger!.id);
          expect(trigger).toMatchObject({ type: 'web', name: 'Demo web trigger', source_id: seed!.blueprints[0].id });

          expect(seed!.trigger!.blueprintName).toBe('Lab result follow-up');
          const patient = await findRecordByExtId(demo.db, seed!.workspaceId, 'Patient', DEMO_PATIENT.extId);
          expect(patient).toMatchObject({ name: 'Demo Patient' });
          expect((await tagsOf(demo.db, [patient!.id])).get(patient!.id)).toEqual(['diabetes']);

          const notice = demoNotice(seed!, 'http://127.0.0.1:8080');
          expect(notice).toContain(seed!.key);
          expect(notice).toContain('curl -s http://127.0.0.1:8080/v1/me');
          for (const { body } of DEMO_FIRES) {
            expect(notice).toContain(`curl -s -X POST http://127.0.0.1:8080/v1/triggers/${seed!.trigger!.id}`);
            expect(notice).toContain(`-d '${JSON.stringify(body)}'`);
          }

          // Audited, the full-access key above all, as the admin commands that do the same are.
          const audited = await demo.db.selectFrom('audit_events').select(['action', 'resource_id', 'key_name']).where('workspace_id', '=', seed!.workspaceId).execute();
          const done = (action: string) => audited.filter((row) => row.action === action).map((row) => row.resource_id).sort();
          expect(done('workspace.create')).toEqual([seed!.workspaceId]);
          expect(done('key.create')).toEqual([seed!.keyId]);
          expect(done('blueprint.import')).toEqual(seed!.blueprints.map((blueprint) => blueprint.id).sort());
          expect(done('trigger.create')).toEqual([seed!.trigger!.id]);
          expect(new Set(audited.map((row) => row.key_name))).toEqual(new Set(['carepath']));
          expect(JSON.stringify(audited)).not.toContain(seed!.key);

          expect(await seedDemoIfEmpty(demo)).toBeNull();
        } finally {
          await demo.close();
          await demoStore.dispose();
        }
      });

      it('does nothing on a store that already has a tenant', async () => {
        expect(await seedDemoIfEmpty(container)).toBeNull();
      });
    });
  });
}

for (const kind of STORE_KINDS) suite(kind);

describe('admin argv', () => {
  it('parses flags and positionals into the command arguments', () => {
    const parsed = parseAdminArgv(['key', 'revoke', 'abc', '--json']);
    expect(parsed).toMatchObject({ kind: 'run', args: { keyId: 'abc' }, json: true });
    const rotate = parseAdminArgv(['webhook', 'rotate-secret', 'w1']);
    expect(rotate).toMatchObject({ kind: 'run', args: { webhookId: 'w1', overlapMs: 24 * 3_600_000 }, json: false });
  });

  it('takes --json where the output is one JSON value, blueprint export included', () => {
    expect(parseAdminArgv(['blueprint', 'export', 'b1', '--workspace', 'w', '--json'])).toMatchObject({ kind: 'run', json: true });
    expect(parseAdminArgv(['audit', 'export', '--workspace', 'w'])).toMatchObject({ kind: 'run', json: false });
  });

  it('refuses an in-memory store: what a command made there would be gone when it ends', async () => {
    const written: string[] = [];
    const out: Output = { write: async (text: string) => void written.push(text) };
    const config = () => loadConfig({ CAREPATH_DATABASE_URL: 'sqlite::memory:' });
    for (const argv of [['workspace', 'create', '--tenant', 'T', '--name', 'W', '--json'], ['workspace', 'list', '--json']]) {
      await expect(runAdmin(argv, config, out)).rejects.toThrow(CommandError);
      await expect(runAdmin(argv, config, out)).rejects.toThrow(/sqlite::memory:, a store that lasts only as long as this command/);
    }
    expect(written).toEqual([]);
  });

  it('answers help without a store', () => {
    expect(parseAdminArgv(['--help'])).toMatchObject({ kind: 'help' });
    expect(parseAdminArgv(['key', 'create', '--help'])).toMatchObject({ kind: 'help', text: expect.stringContaining('--scopes') });
  });

  it.each([
    [[], /admin needs a command/],
    [['tenant', 'create'], /unknown admin command "tenant"/],
    [['key'], /needs one of: create, revoke, list/],
    [['key', 'delete'], /has no "delete"/],
    [['key', 'create', '--workspace', 'w'], /--name <key name> is required/],
    [['key', 'create', '--workspace', 'w', '--name', 'n', '--colour', 'red'], /unknown flag --colour/],
    [['key', 'revoke'], /<keyId> is required/],
    [['key', 'revoke', 'a', 'b'], /unexpected argument "b"/],
    [['webhook', 'rotate-secret', 'w', '--overlap', '24h'], /--overlap must be an ISO 8601 duration/],
    [['webhook', 'rotate-secret', 'w', '--overlap', 'P-1M30DT1H'], /--overlap must be an ISO 8601 duration/],
    [['webhook', 'rotate-secret', 'w', '--overlap', 'P1000Y'], /--overlap may be at most P30D/],
    [['webhook', 'rotate-secret', 'w', '--overlap', 'P31D'], /--overlap may be at most P30D/],
    // --json promises one JSON value; an export of many events prints NDJSON, and says so.
    [['audit', 'export', '--workspace', 'w', '--json'], /carepath admin audit export takes no --json: it prints NDJSON already, one event per line/],
  ])('refuses %j as wrong usage', (argv, message) => {
    expect(() => parseAdminArgv(argv)).toThrow(UsageError);
    expect(() => parseAdminArgv(argv)).toThrow(message);
  });
});
