/**
 * The `carepath` command as an operator runs it: a real process, a real port, real signals.
 * SQLite only: what is under test is the process around the store, not the store.
 */
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import { createServer, type AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { freePort, runToEnd, start, waitFor, type Spawned } from '../helpers/cli-process.js';
import { ForwardProxy } from '../helpers/forward-proxy.js';
import { LedgerServer } from '../helpers/ledger-server.js';

describe('the carepath process [sqlite]', () => {
  let dir: string;
  const running: Spawned[] = [];

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'carepath-process-'));
  });
  afterEach(() => {
    for (const spawned of running.splice(0)) if (spawned.child.exitCode === null) spawned.child.kill('SIGKILL');
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('admin workspace create --json prints exactly one JSON object; a failure prints only to stderr', async () => {
    const env = { CAREPATH_DATABASE_URL: `sqlite:${join(dir, 'admin.db')}` };
    const ok = start(['admin', 'workspace', 'create', '--tenant', 'Acme', '--name', 'Cardiology', '--json'], env);
    running.push(ok);
    expect(await ok.exited).toBe(0);
    expect(ok.stdout().endsWith('\n')).toBe(true);
    expect(ok.stdout().trim().split('\n')).toHaveLength(1);
    const created = JSON.parse(ok.stdout());
    expect(Object.keys(created).sort()).toEqual(['tenantId', 'workspaceId']);

    const again = start(['admin', 'workspace', 'create', '--tenant', 'Acme', '--name', 'Cardiology', '--json'], env);
    running.push(again);
    expect(await again.exited).toBe(1);
    expect(again.stdout()).toBe('');
    expect(again.stderr()).toContain(created.workspaceId);
    expect(again.stderr()).not.toMatch(/\bat .+:\d+:\d+/);

    const wrong = start(['admin', 'key', 'create', '--workspace', created.workspaceId], env);
    running.push(wrong);
    expect(await wrong.exited).toBe(2);
    expect(wrong.stderr()).toContain('--name <key name> is required');
  }, 60_000);

  it('an admin command other than workspace create refuses a store that does not exist, and makes none', async () => {
    const webhookId = '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b';
    for (const file of [join(dir, 'not-the-service.db'), join(dir, 'no-such-folder', 'x.db')]) {
      for (const command of [['admin', 'webhook', 'rotate-secret', webhookId], ['admin', 'workspace', 'list']]) {
        const refused = await runToEnd(command, { CAREPATH_DATABASE_URL: `sqlite:${file}` });
        expect(refused.code, command.join(' ')).toBe(1);
        expect(refused.stderr).toBe(
          `carepath: there is no store at sqlite:${file}: set CAREPATH_DATABASE_URL as the service has it; ` +
            '`carepath admin workspace create` (or starting the service) makes a new one\n',
        );
      }
      expect(existsSync(file)).toBe(false);
    }
    expect(existsSync(join(dir, 'no-such-folder'))).toBe(false);
    // In a store that exists, the same lookup says only what it found.
    const env = { CAREPATH_DATABASE_URL: `sqlite:${join(dir, 'admin.db')}` };
    const there = await runToEnd(['admin', 'webhook', 'rotate-secret', webhookId], env);
    expect(there.code).toBe(1);
    expect(there.stderr.trim()).toBe(`carepath: no live webhook endpoint has the id "${webhookId}"`);
  }, 60_000);

  it('admin secret set reads the value from standard input and never prints it', async () => {
    const env = { CAREPATH_DATABASE_URL: `sqlite:${join(dir, 'secrets.db')}`, CAREPATH_SECRET_KEY: 'b'.repeat(64) };
    const { workspaceId } = JSON.parse((await runToEnd(['admin', 'workspace', 'create', '--tenant', 'Acme', '--name', 'Lab', '--json'], env)).stdout);
    const value = 'piped-partner-token-42';
    const set = await runToEnd(['admin', 'secret', 'set', 'LAB_TOKEN', '--workspace', workspaceId, '--json'], env, `${value}\n`);
    expect(set.code, set.stderr).toBe(0);
    expect(JSON.parse(set.stdout)).toEqual({ workspaceId, name: 'LAB_TOKEN', created: true });
    const listed = await runToEnd(['admin', 'secret', 'list', '--workspace', workspaceId, '--json'], env);
    expect(JSON.parse(listed.stdout)).toEqual([{ name: 'LAB_TOKEN', createdAt: expect.any(String), updatedAt: expect.any(String) }]);
    for (const output of [set.stdout, set.stderr, listed.stdout, listed.stderr]) expect(output).not.toContain(value);
    // The trailing line break of `echo` is not part of the value; the value itself is sealed.
    const { default: Database } = await import('better-sqlite3');
    const file = new Database(join(dir, 'secrets.db'), { readonly: true });
    const row = file.prepare('select sealed_value from workspace_secrets').get() as { sealed_value: string };
    file.close();
    expect(row.sealed_value).toMatch(/^v1:/);
    const { createSecretBox } = await import('../../src/lib/secret-box.js');
    expect(createSecretBox(env.CAREPATH_SECRET_KEY).open(row.sealed_value)).toBe(value);

    const empty = await runToEnd(['admin', 'secret', 'set', 'LAB_TOKEN', '--workspace', workspaceId], env, '');
    expect(empty.code).toBe(1);
    expect(empty.stderr).toContain('no secret value on standard input');
    const badName = await runToEnd(['admin', 'secret', 'set', 'lab-token', '--workspace', workspaceId], env, value);
    expect(badName.code).toBe(2);
    expect(badName.stderr).toContain('"lab-token" is not a secret name');
  }, 60_000);

  it('a process without the key the store\'s secrets were sealed with stops at once, saying so; nothing is written', async () => {
    const database = `sqlite:${join(dir, 'sealed.db')}`;
    const sealing = { CAREPATH_DATABASE_URL: database, CAREPATH_SECRET_KEY: 'c'.repeat(64) };
    const { workspaceId } = JSON.parse((await runToEnd(['admin', 'workspace', 'create', '--tenant', 'Acme', '--name', 'Lab', '--json'], sealing)).stdout);
    expect((await runToEnd(['admin', 'secret', 'set', 'LAB_TOKEN', '--workspace', workspaceId], sealing, 'sealed-token')).code).toBe(0);

    const without = { CAREPATH_DATABASE_URL: database };
    const other = { CAREPATH_DATABASE_URL: database, CAREPATH_SECRET_KEY: 'd'.repeat(64) };
    const unset = await runToEnd(['admin', 'secret', 'set', 'OTHER', '--workspace', workspaceId], without, 'would-be-plain');
    expect(unset.code).toBe(1);
    expect(unset.stderr.trim()).toBe("carepath: CAREPATH_SECRET_KEY is not set, but this store holds secrets sealed with a key: set it to the deployment's key");
    const wrong = await runToEnd(['admin', 'secret', 'set', 'OTHER', '--workspace', workspaceId], other, 'sealed-wrongly');
    expect(wrong.code).toBe(1);
    expect(wrong.stderr).toContain('CAREPATH_SECRET_KEY does not open the secrets sealed in this store');
    const listed = await runToEnd(['admin', 'secret', 'list', '--workspace', workspaceId, '--json'], sealing);
    expect(JSON.parse(listed.stdout).map((secret: { name: string }) => secret.name)).toEqual(['LAB_TOKEN']);

    const api = start(['api'], { ...other, CAREPATH_PORT: String(await freePort()) });
    running.push(api);
    expect(await api.exited).toBe(1);
    expect(api.stdout()).not.toContain('listening');
    expect(api.stderr()).toContain('CAREPATH_SECRET_KEY does not open the secrets sealed in this store');
  }, 60_000);

  it('a process started with a key says that secrets stored before it are readable; admin secret seal-stored seals them', async () => {
    const database = `sqlite:${join(dir, 'sealed-later.db')}`;
    const bare = { CAREPATH_DATABASE_URL: database };
    const { workspaceId } = JSON.parse((await runToEnd(['admin', 'workspace', 'create', '--tenant', 'Acme', '--name', 'Lab', '--json'], bare)).stdout);
    expect((await runToEnd(['admin', 'secret', 'set', 'LAB_TOKEN', '--workspace', workspaceId], bare, 'token-stored-bare')).code).toBe(0);
    const readValue = () => {
      const file = new Database(join(dir, 'sealed-later.db'), { readonly: true });
      const row = file.prepare('select sealed_value from workspace_secrets').get() as { sealed_value: string };
      file.close();
      return row.sealed_value;
    };
    expect(readValue()).toBe('plain:token-stored-bare');

    // Without a key, every start says that secrets are stored readable.
    const keyless = start(['api'], { ...bare, CAREPATH_PORT: String(await freePort()) });
    running.push(keyless);
    await waitFor(keyless, /carepath listening on/);
    const warned = keyless.stdout().split('\n').find((line) => line.includes('CAREPATH_SECRET_KEY is not set'));
    expect(JSON.parse(warned!)).toMatchObject({ level: 40 });
    expect(warned).toContain('stored readable in the database');
    keyless.child.kill('SIGTERM');
    expect(await keyless.exited).toBe(0);

    // Starting with the key seals nothing (processes of a rolling deploy may still run without
    // it): it says what is still readable and how to seal it.
    const key = 'e'.repeat(64);
    const api = start(['api'], { ...bare, CAREPATH_SECRET_KEY: key, CAREPATH_PORT: String(await freePort()) });
    running.push(api);
    await waitFor(api, /carepath listening on/);
    expect(readValue()).toBe('plain:token-stored-bare');
    const said = api.stdout().split('\n').find((line) => line.includes('still readable'));
    expect(JSON.parse(said!)).toMatchObject({ level: 40, webhookSecrets: 0, partnerSecrets: 1 });
    expect(said).toContain('carepath admin secret seal-stored');
    expect(api.stdout()).not.toContain('CAREPATH_SECRET_KEY is not set');
    expect(api.stdout() + api.stderr()).not.toContain('token-stored-bare');
    api.child.kill('SIGTERM');
    expect(await api.exited).toBe(0);

    const without = await runToEnd(['admin', 'secret', 'seal-stored'], bare);
    expect(without.code).toBe(1);
    expect(without.stderr).toContain('CAREPATH_SECRET_KEY is not set');
    const sealedNow = await runToEnd(['admin', 'secret', 'seal-stored', '--json'], { ...bare, CAREPATH_SECRET_KEY: key });
    expect(sealedNow.code, sealedNow.stderr).toBe(0);
    expect(JSON.parse(sealedNow.stdout)).toEqual({ webhookSecrets: 0, partnerSecrets: 1 });
    const sealed = readValue();
    expect(sealed).toMatch(/^v1:/);
    const { createSecretBox } = await import('../../src/lib/secret-box.js');
    expect(createSecretBox(key).open(sealed)).toBe('token-stored-bare');
    expect(JSON.parse((await runToEnd(['admin', 'secret', 'seal-stored', '--json'], { ...bare, CAREPATH_SECRET_KEY: key })).stdout)).toEqual({ webhookSecrets: 0, partnerSecrets: 0 });
    // From now on the store holds a sealed secret: a process without the key stops, as for any sealed store.
    const after = await runToEnd(['admin', 'secret', 'set', 'OTHER', '--workspace', workspaceId], bare, 'x');
    expect(after.stderr).toContain('CAREPATH_SECRET_KEY is not set, but this store holds secrets sealed with a key');
  }, 90_000);

  it('a store a newer carepath migrated is named as such, not as corrupted; nothing starts on it', async () => {
    const file = join(dir, 'newer.db');
    const env = { CAREPATH_DATABASE_URL: `sqlite:${file}` };
    expect((await runToEnd(['migrate'], env)).code).toBe(0);
    const db = new Database(file);
    db.prepare('insert into kysely_migration (name, timestamp) values (?, ?)').run('9999_from_a_newer_version', new Date().toISOString());
    db.close();
    const message =
      'carepath: the store was brought up to date by a newer carepath: it has migration 9999_from_a_newer_version, which this version does not know. ' +
      'Run that version (or a newer one) on it, or restore a backup taken before the upgrade: carepath never migrates a store back\n';
    for (const command of [['migrate'], ['api'], ['admin', 'workspace', 'list']]) {
      const refused = await runToEnd(command, { ...env, CAREPATH_PORT: String(await freePort()) });
      expect(refused.code, command.join(' ')).toBe(1);
      expect(refused.stderr, command.join(' ')).toBe(message);
    }
  }, 60_000);

  it('a store that cannot be opened ends the command with one plain sentence and exit 1', async () => {
    const port = await freePort();
    const refused = start(['migrate'], { CAREPATH_DATABASE_URL: `postgres://carepath:s3cret-pw@127.0.0.1:${port}/carepath` });
    running.push(refused);
    expect(await refused.exited).toBe(1);
    expect(refused.stderr()).toBe(
      `carepath: cannot open the store in CAREPATH_DATABASE_URL (postgres://carepath:***@127.0.0.1:${port}/carepath): ` +
        `nothing listens there; is PostgreSQL running, on that host and port? [ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:${port}]\n`,
    );

    // Something listens, but closes every connection at once (not PostgreSQL, or a firewall).
    const closer = createServer((socket) => socket.end());
    await new Promise<void>((resolve) => closer.listen(0, '127.0.0.1', resolve));
    const closerPort = (closer.address() as AddressInfo).port;
    const cut = start(['migrate'], { CAREPATH_DATABASE_URL: `postgres://carepath@127.0.0.1:${closerPort}/carepath` });
    running.push(cut);
    expect(await cut.exited).toBe(1);
    closer.close();
    expect(cut.stderr()).toBe(
      `carepath: cannot open the store in CAREPATH_DATABASE_URL (postgres://carepath@127.0.0.1:${closerPort}/carepath): the connection was closed before PostgreSQL answered; ` +
        'is it PostgreSQL on that port, and does a firewall or proxy cut it (or does the server want TLS: ?sslmode=require)? [Connection terminated unexpectedly]\n',
    );

    const file = join(dir, 'not-a-database.db');
    writeFileSync(file, 'these bytes are no SQLite database, only text long enough to hold a header of one'.repeat(2));
    const notDb = start(['serve'], { CAREPATH_DATABASE_URL: `sqlite:${file}`, CAREPATH_PORT: String(await freePort()) });
    running.push(notDb);
    expect(await notDb.exited).toBe(1);
    expect(notDb.stderr()).toContain('the file is not a SQLite database [SQLITE_NOTADB');
    expect(notDb.stderr()).not.toMatch(/\bat .+:\d+:\d+/);
  }, 60_000);

  it('version prints the version and the schema it brings', async () => {
    const answer = await runToEnd(['version'], {});
    expect(answer).toMatchObject({ code: 0, stdout: 'carepath 0.1.0 (schema 0022_runs_by_idempotency_key)\n', stderr: '' });
  });

  it('serve in production makes no demo on an empty store: no key printed, none made, and says what to do', async () => {
    const port = await freePort();
    const file = join(dir, 'production.db');
    const env = { CAREPATH_DATABASE_URL: `sqlite:${file}`, CAREPATH_PORT: String(port), CAREPATH_ENVIRONMENT: 'production', CAREPATH_SECRET_KEY: 'ab'.repeat(32) };
    const production = start(['serve'], env);
    running.push(production);
    await waitFor(production, /no demo is made in production/);
    expect(production.stdout()).not.toMatch(/cpk_/);
    production.child.kill('SIGTERM');
    expect(await production.exited).toBe(0);
    const store = new Database(file, { readonly: true });
    try {
      expect(store.prepare('select count(*) as n from api_keys').get()).toEqual({ n: 0 });
    } finally {
      store.close();
    }
  }, 60_000);

  it('serve seeds a demo once, answers the printed key over HTTP and stops with 0 on SIGTERM', async () => {
    const port = await freePort();
    const env = { CAREPATH_DATABASE_URL: `sqlite:${join(dir, 'serve.db')}`, CAREPATH_PORT: String(port) };

    const first = start(['serve'], env);
    running.push(first);
    await waitFor(first, /carepath listening on http:\/\/127\.0\.0\.1:\d+/);
    // The log says which version this is, and that it brought a new store up to date.
    const lines = first.stdout().split('\n').filter((line) => line.startsWith('{')).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.find((line) => line.msg === 'brought the store up to date')?.migrations).toEqual(expect.arrayContaining(['0001_core', '0022_runs_by_idempotency_key']));
    expect(lines.find((line) => line.msg === 'carepath starting')).toMatchObject({ version: '0.1.0', schema: '0022_runs_by_idempotency_key', http: true, background: true });
    const [, key] = await waitFor(first, /curl -s \S+\/v1\/me -H 'Authorization: Bearer (cpk_staging_[0-9A-Za-z]{43})'/);
    expect(first.stdout()).toContain(`curl -s -X POST http://127.0.0.1:${port}/v1/triggers/`);
    // FHIR validation is compiled when the processor starts, not at the first delivery.
    await waitFor(first, /"component":"delivery-processor","ms":\d+,"msg":"FHIR R4 validation compiled"/);

    const me = await fetch(`http://127.0.0.1:${port}/v1/me`, { headers: { authorization: `Bearer ${key}` } });
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ keyName: 'demo key', scopes: [], environment: 'staging' });

    // The printed fires, as a newcomer would paste them: each ends where its comment says.
    const fires = [...first.stdout().matchAll(/curl -s -X POST (\S+\/v1\/triggers\/\S+) -H 'Authorization: Bearer \S+' -H 'Content-Type: application\/json' -d '(.+)'/g)];
    expect(fires).toHaveLength(2);
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const runIds: string[] = [];
    for (const [, url, body] of fires) {
      const fired = await fetch(url, { method: 'POST', headers: auth, body });
      expect(fired.status).toBe(201);
      runIds.push(((await fired.json()) as { runId: string }).runId);
    }
    const runOf = async (runId: string) => (await (await fetch(`http://127.0.0.1:${port}/v1/runs/${runId}`, { headers: auth })).json()) as { automationStatus: string };
    const stepsOf = async (runId: string) =>
      ((await (await fetch(`http://127.0.0.1:${port}/v1/runs/${runId}/steps`, { headers: auth })).json()) as { steps: { automationId: string; outcome: string | null }[] }).steps;
    await expect.poll(async () => (await runOf(runIds[0])).automationStatus, { timeout: 20_000 }).toBe('completed');
    // The abnormal result tags the demo patient, then waits its minute (the run stays running).
    await expect.poll(async () => (await stepsOf(runIds[1])).map((step) => [step.automationId, step.outcome]), { timeout: 20_000 }).toEqual([
      ['flag-subject', 'ok'],
      ['keep-result', 'ok'],
      ['pause', null],
    ]);
    expect((await runOf(runIds[1])).automationStatus).toBe('running');
    const search = await fetch(`http://127.0.0.1:${port}/v1/search`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ resourceType: 'Patient', filters: [{ op: 'with', tag: 'abnormal-lab' }] }),
    });
    expect(((await search.json()) as { results: { extId: string }[] }).results.map((hit) => hit.extId)).toEqual(['demo-patient']);

    // A second service on the same port, on another store, is told which setting to change.
    const samePort = start(['api'], { CAREPATH_DATABASE_URL: `sqlite:${join(dir, 'same-port.db')}`, CAREPATH_PORT: String(port) });
    running.push(samePort);
    expect(await samePort.exited).toBe(1);
    expect(samePort.stderr().trim()).toBe(`carepath: CAREPATH_PORT ${port} on CAREPATH_HOST 127.0.0.1 is in use by another process; stop it or choose another port`);

    // A second long-running process on the same SQLite file is refused, in one sentence; the
    // admin commands still run beside the service.
    const twin = start(['worker'], env);
    running.push(twin);
    expect(await twin.exited).toBe(1);
    expect(twin.stderr().trim()).toBe(
      `carepath: the store in CAREPATH_DATABASE_URL (${env.CAREPATH_DATABASE_URL}) is in use by another carepath process; SQLite serves one process: stop the other one, or use PostgreSQL to run several (docs/operations.md)`,
    );
    const listed = start(['admin', 'key', 'list', '--workspace', '00000000-0000-7000-8000-000000000000', '--json'], env);
    expect(await listed.exited).not.toBe(null);
    expect(listed.stderr()).not.toContain('in use by another carepath process');

    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(first.stderr()).toBe('');

    const second = start(['serve'], env);
    running.push(second);
    await waitFor(second, /carepath listening on/);
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    expect(second.stdout()).not.toMatch(/cpk_/);
    expect(second.stdout()).not.toContain('Demo workspace created');
    // Killed outright, it leaves no lock behind: the operating system lets go of it.
    second.child.kill('SIGKILL');
    await second.exited;
    const third = start(['serve'], env);
    running.push(third);
    await waitFor(third, /carepath listening on/);
    expect((await fetch(`http://127.0.0.1:${port}/healthz`)).status).toBe(200);
    third.child.kill('SIGTERM');
    expect(await third.exited).toBe(0);
  }, 120_000);

  it('serve sends http automations through an https CAREPATH_HTTP_PROXY, to hosts CAREPATH_HTTP_ALLOW names, trusting NODE_EXTRA_CA_CERTS', async () => {
    const ledger = new LedgerServer();
    await ledger.listen();
    // An https partner whose certificate an internal CA issued (here: a self-signed one).
    const tlsFiles = (name: string) => fileURLToPath(new URL(`../fixtures/tls/${name}`, import.meta.url));
    const secure = https.createServer({ key: readFileSync(tlsFiles('self-signed.key')), cert: readFileSync(tlsFiles('self-signed.crt')) }, (req, res) => {
      req.resume();
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ key: req.headers['idempotency-key'] }));
    });
    await new Promise<void>((resolve) => secure.listen(0, '127.0.0.1', resolve));
    // Both names resolve at the proxy only, as outside names do in many hospital networks. The
    // proxy is itself reached over TLS, with a certificate of the same internal CA.
    const proxy = new ForwardProxy(
      {
        'partner.invalid': `127.0.0.1:${ledger.port}`,
        'secure.invalid': `127.0.0.1:${(secure.address() as AddressInfo).port}`,
      },
      { key: readFileSync(tlsFiles('self-signed.key')), cert: readFileSync(tlsFiles('self-signed.crt')) },
    );
    await proxy.listen();
    try {
      const port = await freePort();
      const env = {
        CAREPATH_DATABASE_URL: `sqlite:${join(dir, 'proxy.db')}`,
        CAREPATH_PORT: String(port),
        CAREPATH_HTTP_PROXY: proxy.url('egress:s3cret'),
        CAREPATH_HTTP_ALLOW: 'partner.invalid,secure.invalid',
        NODE_EXTRA_CA_CERTS: tlsFiles('self-signed.crt'),
      };
      const serve = start(['serve'], env);
      running.push(serve);
      const [, key] = await waitFor(serve, /-H 'Authorization: Bearer (cpk_staging_[0-9A-Za-z]{43})'/);
      const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
      const api = async (method: string, path: string, body?: unknown) =>
        fetch(`http://127.0.0.1:${port}${path}`, { method, headers: auth, ...(body ? { body: JSON.stringify(body) } : {}) });
      const { workspaceId } = (await (await api('GET', '/v1/me')).json()) as { workspaceId: string };
      const file = join(dir, 'notify-partner.json');
      const call = (id: string, url: string) => ({ id, type: 'http', with: { method: 'POST', url, body: { n: 1 } } });
      writeFileSync(
        file,
        JSON.stringify({
          name: 'Notify partners',
          nodes: [
            { id: 'start', kind: 'start' },
            { id: 'call', kind: 'action', automations: [call('notify', `http://partner.invalid:${ledger.port}/notify`), call('secure', 'https://secure.invalid/notify')] },
            { id: 'done', kind: 'end' },
          ],
          links: [
            { from: 'start', to: 'call' },
            { from: 'call', to: 'done' },
          ],
        }),
      );
      const imported = await runToEnd(['admin', 'blueprint', 'import', file, '--workspace', workspaceId, '--json'], env);
      expect(imported.code).toBe(0);
      const { id: sourceId } = JSON.parse(imported.stdout) as { id: string };
      const trigger = (await (await api('POST', '/v1/triggers', { name: 'notify', sourceId, type: 'web' })).json()) as { triggerId: string };
      const fired = await api('POST', `/v1/triggers/${trigger.triggerId}`, {});
      expect(fired.status).toBe(201);
      const { runId } = (await fired.json()) as { runId: string };
      await expect.poll(async () => ((await (await api('GET', `/v1/runs/${runId}`)).json()) as { automationStatus: string }).automationStatus, { timeout: 20_000 }).toBe('completed');
      const credentials = `Basic ${Buffer.from('egress:s3cret').toString('base64')}`;
      expect(proxy.requests).toEqual([
        { method: 'POST', target: `http://partner.invalid:${ledger.port}/notify`, proxyAuthorization: credentials },
        { method: 'CONNECT', target: 'secure.invalid:443', proxyAuthorization: credentials },
      ]);
      expect(ledger.requests.map((r) => [r.path, r.headers['idempotency-key']])).toEqual([['/notify', `${runId}:call:notify`]]);
      const steps = ((await (await api('GET', `/v1/runs/${runId}/steps`)).json()) as { steps: { automationId: string; output: unknown }[] }).steps;
      expect(steps.find((step) => step.automationId === 'secure')?.output).toEqual({ status: 200, body: { key: `${runId}:call:secure` } });
      // The log says the proxy is in use, naming its host and never its credentials.
      expect(serve.stdout()).toContain(`"proxy":"127.0.0.1:${proxy.port}","noProxy":[],"msg":"http automations go through a forward proxy"`);
      expect(serve.stdout() + serve.stderr()).not.toContain('s3cret');
      serve.child.kill('SIGTERM');
      expect(await serve.exited).toBe(0);
    } finally {
      await proxy.close();
      await ledger.close();
      secure.closeAllConnections();
      await new Promise<void>((resolve) => secure.close(() => resolve()));
    }
  }, 120_000);
});
