/**
 * http automations through a forward proxy (CAREPATH_HTTP_PROXY): plain http in absolute form,
 * https through a CONNECT tunnel with the target's certificate still verified, the proxy's
 * credentials, CAREPATH_HTTP_NO_PROXY, the allow-list deciding before anything is sent, and a
 * proxy's own refusal told apart from the partner's answer.
 */
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { chain, FAST_RETRIES, fire, getRun, getSteps, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { LedgerServer } from '../helpers/ledger-server.js';
import { ForwardProxy } from '../helpers/forward-proxy.js';
import { createAllowList } from '../../src/engine/outbound/allow-list.js';
import { createOutboundProxy } from '../../src/engine/outbound/proxy.js';
import { secretSet } from '../../src/cli/admin/secret.js';
import { blueprintImport } from '../../src/cli/admin/blueprint.js';
import { BlueprintError, validateBlueprint } from '../../src/modules/blueprints/blueprint.validate.js';
import { RunWorker } from '../../src/engine/worker.js';
import { engineServices } from '../../src/engine/engine-services.js';
import { capturedLogger } from '../helpers/log-capture.js';

const ledger = new LedgerServer();
/** A TLS server with a self-signed certificate for secure.invalid: a client that checks certificates refuses it. */
const tlsServer = tls.createServer({
  key: readFileSync(new URL('../fixtures/tls/self-signed.key', import.meta.url)),
  cert: readFileSync(new URL('../fixtures/tls/self-signed.crt', import.meta.url)),
});
let tlsHandshakes = 0;
let proxy: ForwardProxy;

beforeAll(async () => {
  await ledger.listen();
  tlsServer.on('tlsClientError', () => tlsHandshakes++);
  tlsServer.on('secureConnection', (socket) => {
    tlsHandshakes++;
    socket.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok');
  });
  await new Promise<void>((resolve) => tlsServer.listen(0, '127.0.0.1', resolve));
  const tlsPort = (tlsServer.address() as AddressInfo).port;
  // Names only the proxy can resolve, as in a network whose DNS for the outside is the proxy's.
  proxy = new ForwardProxy(
    { 'partner.invalid': `127.0.0.1:${ledger.port}`, 'secure.invalid': `127.0.0.1:${tlsPort}` },
    undefined,
    // Its policy forbids one host; another it cannot reach.
    { 'forbidden.invalid': 403, 'down.invalid': 502 },
  );
  await proxy.listen();
});
afterAll(async () => {
  await proxy.close();
  await ledger.close();
  await new Promise<void>((resolve) => tlsServer.close(() => resolve()));
});

const httpStep = (id: string, settings: Record<string, unknown>) => ({ id: 'call', kind: 'action', automations: [{ id, type: 'http', with: settings }] });

describeEachStore('engine: http automation through a proxy', (env) => {
  it('sends plain http to the proxy in absolute form, with its credentials and the idempotency key', async () => {
    const ws = await env.workspace();
    ledger.on('/partner', { status: 201, body: { received: true } });
    const url = `http://partner.invalid:${ledger.port}/partner?ward=B2`;
    const { triggerId } = await webTriggerFor(ws, chain('Via proxy', [httpStep('post', { method: 'POST', url, body: { n: 1 } })]));
    const runId = await fire(ws, triggerId);
    const [seenByProxy, seenByLedger] = [proxy.requests.length, ledger.requests.length];
    await testWorker(env, {}, {
      allow: createAllowList(['partner.invalid']),
      proxy: createOutboundProxy(proxy.url('egress:s3cret'), []),
    }).drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    expect(proxy.requests.slice(seenByProxy)).toEqual([
      { method: 'POST', target: url, proxyAuthorization: `Basic ${Buffer.from('egress:s3cret').toString('base64')}` },
    ]);
    const sent = ledger.requests.slice(seenByLedger);
    expect(sent).toHaveLength(1);
    expect(sent[0].headers['idempotency-key']).toBe(`${runId}:call:post`);
    expect(sent[0].headers['proxy-authorization']).toBeUndefined();
    expect(JSON.parse(sent[0].body)).toEqual({ n: 1 });
    expect((await getSteps(ws, runId))[0]).toMatchObject({ outcome: 'ok', output: { status: 201, body: { received: true } } });
  });

  it('tunnels https with CONNECT and still verifies the target certificate', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Tunnel', [httpStep('get', { method: 'GET', url: 'https://secure.invalid/records' })]));
    const runId = await fire(ws, triggerId);
    const [seenByProxy, handshakes] = [proxy.requests.length, tlsHandshakes];
    await testWorker(env, {}, { allow: createAllowList(['secure.invalid']), proxy: createOutboundProxy(proxy.url(), []) }).drain();
    // Three tries, each a tunnel to secure.invalid:443 and a TLS handshake the client broke off:
    // the certificate is self-signed, and a tunnel is no reason to trust it.
    expect(proxy.requests.slice(seenByProxy)).toEqual(Array(3).fill({ method: 'CONNECT', target: 'secure.invalid:443', proxyAuthorization: undefined }));
    // (The server hears of a broken-off handshake a moment after the client gives up.)
    await vi.waitFor(() => expect(tlsHandshakes - handshakes).toBe(3));
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    expect(run.error?.message).toMatch(/^http GET https:\/\/secure\.invalid\/records request failed: [A-Z_]*(SELF_SIGNED|CERT)[A-Z_]* \(after 3 tries\)$/);
  });

  it("tells the proxy's refusal of a tunnel from the partner's answer, and keeps its page out of the output", async () => {
    const ws = await env.workspace();
    ledger.on('/denied', { status: 403, body: { reason: 'partner says no' } });
    const { triggerId } = await webTriggerFor(ws, chain('Refused', [httpStep('get', { method: 'GET', url: 'https://forbidden.invalid/x' })]));
    const { triggerId: partnerTrigger } = await webTriggerFor(ws, chain('Denied', [httpStep('get', { method: 'GET', url: `http://partner.invalid:${ledger.port}/denied` })]));
    const [refused, denied] = [await fire(ws, triggerId), await fire(ws, partnerTrigger)];
    const seenByProxy = proxy.requests.length;
    await testWorker(env, {}, { allow: createAllowList(['forbidden.invalid', 'partner.invalid']), proxy: createOutboundProxy(proxy.url(), []) }).drain();
    // A 403 will not change by asking again: one try each.
    expect(proxy.requests.slice(seenByProxy).map((r) => `${r.method} ${r.target}`).sort()).toEqual([
      'CONNECT forbidden.invalid:443',
      `GET http://partner.invalid:${ledger.port}/denied`,
    ]);
    const byProxy = await getRun(ws, refused);
    expect(byProxy.automationStatus).toBe('errored');
    expect(byProxy.error?.message).toBe('http GET https://forbidden.invalid/x was not passed on by the proxy: it answered 403 instead of connecting to forbidden.invalid');
    expect((await getSteps(ws, refused))[0]).toMatchObject({ outcome: 'failed', output: null });
    const byPartner = await getRun(ws, denied);
    expect(byPartner.error?.message).toBe(`http GET http://partner.invalid:${ledger.port}/denied answered 403`);
    expect((await getSteps(ws, denied))[0]).toMatchObject({ outcome: 'failed', output: { status: 403, body: { reason: 'partner says no' } } });
  });

  it('tries again when the proxy cannot reach the partner (502 to a CONNECT), and says so', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Unreachable', [httpStep('get', { method: 'GET', url: 'https://down.invalid/x' })]));
    const runId = await fire(ws, triggerId);
    const seenByProxy = proxy.requests.length;
    await testWorker(env, {}, { allow: createAllowList(['down.invalid']), proxy: createOutboundProxy(proxy.url(), []) }).drain();
    expect(proxy.requests.slice(seenByProxy)).toEqual(Array(3).fill({ method: 'CONNECT', target: 'down.invalid:443', proxyAuthorization: undefined }));
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    expect(run.error?.message).toBe('http GET https://down.invalid/x was not passed on by the proxy: it answered 502 instead of connecting to down.invalid (after 3 tries)');
  });

  it('reaches CAREPATH_HTTP_NO_PROXY hosts directly', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Direct', [httpStep('get', { method: 'GET', url: ledger.url('/direct') })]));
    const runId = await fire(ws, triggerId);
    const [seenByProxy, seenByLedger] = [proxy.requests.length, ledger.requests.length];
    await testWorker(env, {}, { allow: createAllowList(['127.0.0.1']), proxy: createOutboundProxy(proxy.url(), ['localhost', '127.0.0.0/8']) }).drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    expect(proxy.requests.length).toBe(seenByProxy);
    expect(ledger.requests.slice(seenByLedger).map((r) => r.path)).toEqual(['/direct']);
  });

  it('checks the allow-list before the proxy: a private target is refused and nothing is sent', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Private', [httpStep('p', { method: 'POST', url: ledger.url('/private'), body: {} })]));
    const runId = await fire(ws, triggerId);
    const [seenByProxy, seenByLedger] = [proxy.requests.length, ledger.requests.length];
    const { logger, lines } = capturedLogger('info');
    const services = engineServices(env.container, { backoff: FAST_RETRIES, timeoutMs: 2_000, allow: createAllowList([]), proxy: createOutboundProxy(proxy.url(), []) });
    await new RunWorker({ ...services, logger }, { leaseMs: 5_000 }).drain();
    expect(proxy.requests.length).toBe(seenByProxy);
    expect(ledger.requests.length).toBe(seenByLedger);
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    expect(run.error?.message).toMatch(/refused: 127\.0\.0\.1 resolves to 127\.0\.0\.1, a non-public address not listed in CAREPATH_HTTP_ALLOW/);
    // Whoever watches for a blueprint probing the network finds the run in the log (not the address).
    expect(lines.filter((line) => line.msg === 'http automation refused before sending: the run errored (its error says why)')).toEqual([
      expect.objectContaining({ level: 40, runId, nodeId: 'call', automationId: 'p', try: 1 }),
    ]);
  });

  it('will not import a Host header: through a proxy it named the target, past the allow-list and with the secret', async () => {
    const ws = await env.workspace();
    const host = { method: 'POST', url: `http://partner.invalid:${ledger.port}/notify`, headers: { authorization: 'Bearer ${secrets.LAB_TOKEN}', host: '{{ payload.h }}' }, body: {} };
    const file = join(mkdtempSync(join(tmpdir(), 'carepath-host-')), 'host.json');
    writeFileSync(file, JSON.stringify(chain('Host header', [httpStep('post', host)])));
    const refused = await blueprintImport(env.container, { workspaceId: ws.workspaceId, file }).catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(BlueprintError);
    expect((refused as BlueprintError).problems).toEqual([
      'node "call": automation "post": with.headers: "host" is set from the URL, so the host the allow-list checks is the one called; write the host in with.url',
    ]);
  });

  it('refuses the call of a blueprint stored with a Host header before import refused it: nothing reaches the proxy, the secret stays', async () => {
    const ws = await env.workspace();
    await secretSet(env.container, { workspaceId: ws.workspaceId, name: 'LAB_TOKEN', value: 'tok-very-secret-123' });
    ledger.on('/notify', { status: 200, body: { ok: true } });
    // Validated without the header, then given it, as a store written by an older version holds it.
    const blueprint = validateBlueprint(
      chain('Stored host', [httpStep('post', { method: 'POST', url: `http://partner.invalid:${ledger.port}/notify`, headers: { authorization: 'Bearer ${secrets.LAB_TOKEN}' }, body: { n: 1 } })]),
    ) as unknown as { nodes: { automations?: { with: { headers: Record<string, string> } }[] }[] };
    blueprint.nodes[1].automations![0].with.headers.host = '{{ payload.h }}';
    const imported = await ws.importBlueprint(blueprint as unknown as Record<string, unknown>);
    const trigger = await ws.call('POST', '/v1/triggers', { body: { name: 'stored host', sourceId: imported.id, type: 'web' } });
    const runId = await fire(ws, trigger.json().triggerId, { h: `127.0.0.1:${ledger.port}` });
    const [seenByProxy, seenByLedger] = [proxy.requests.length, ledger.requests.length];
    const { logger, lines } = capturedLogger('info');
    const services = engineServices(env.container, { backoff: FAST_RETRIES, timeoutMs: 2_000, allow: createAllowList(['partner.invalid']), proxy: createOutboundProxy(proxy.url(), []) });
    await new RunWorker({ ...services, logger }, { leaseMs: 5_000 }).drain();
    expect(proxy.requests.length).toBe(seenByProxy);
    expect(ledger.requests.length).toBe(seenByLedger);
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    expect(run.error?.message).toBe('http: once its placeholders are filled, with.headers: "host" is set from the URL, so the host the allow-list checks is the one called; write the host in with.url');
    // Nothing was sent, so nothing is disclosed in the trail.
    const audit = await ws.call('GET', '/v1/audit-events?action=http.send');
    expect(audit.json().data.filter((event: { resourceId: string }) => event.resourceId === runId)).toEqual([]);
    expect(lines.filter((line) => line.msg === 'run errored')).toEqual([expect.objectContaining({ runId, automationId: 'post', automation: 'http' })]);
    expect(JSON.stringify(lines)).not.toContain('127.0.0.1');
  });

  it('sends no path that starts with "//" (an empty first placeholder): through the proxy it named another host', async () => {
    const ws = await env.workspace();
    await secretSet(env.container, { workspaceId: ws.workspaceId, name: 'LAB_TOKEN', value: 'tok-very-secret-123' });
    const url = `http://partner.invalid:${ledger.port}/{{ payload.tenant }}/{{ payload.id }}/notify`;
    const { triggerId } = await webTriggerFor(ws, chain('Tenant path', [httpStep('post', { method: 'POST', url, headers: { authorization: 'Bearer ${secrets.LAB_TOKEN}' }, body: { n: 1 } })]));
    const runId = await fire(ws, triggerId, { tenant: '', id: 'evil.invalid' });
    const [seenByProxy, seenByLedger] = [proxy.requests.length, ledger.requests.length];
    await testWorker(env, {}, { allow: createAllowList(['partner.invalid']), proxy: createOutboundProxy(proxy.url(), []) }).drain();
    expect(proxy.requests.length).toBe(seenByProxy);
    expect(ledger.requests.length).toBe(seenByLedger);
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    expect(run.error?.message).toBe('http: with.url\'s path starts with "//" once its placeholders are filled (a path that starts so names another host to a proxy; was a placeholder at its start empty?)');
    // With a value, the same blueprint calls the partner.
    const fine = await fire(ws, triggerId, { tenant: 't1', id: 'evil.invalid' });
    ledger.on('/t1/evil.invalid/notify', { status: 200, body: { ok: true } });
    await testWorker(env, {}, { allow: createAllowList(['partner.invalid']), proxy: createOutboundProxy(proxy.url(), []) }).drain();
    expect((await getRun(ws, fine)).automationStatus).toBe('completed');
    expect(proxy.requests.slice(seenByProxy).map((request) => request.target)).toEqual([`http://partner.invalid:${ledger.port}/t1/evil.invalid/notify`]);
  });

  it('does not send a name it cannot check: unresolvable here and not named in the allow-list', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Unknown', [httpStep('u', { method: 'GET', url: `http://partner.invalid:${ledger.port}/x` })]));
    const runId = await fire(ws, triggerId);
    const seenByProxy = proxy.requests.length;
    await testWorker(env, {}, { allow: createAllowList([]), proxy: createOutboundProxy(proxy.url(), []) }).drain();
    expect(proxy.requests.length).toBe(seenByProxy);
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    expect(run.error?.message).toMatch(/could not resolve partner\.invalid: ENOTFOUND \(through the proxy, a host this process cannot resolve goes only when CAREPATH_HTTP_ALLOW names it\) \(after 3 tries\)$/);
  });
});
