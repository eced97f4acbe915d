import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeEachStore, type TestWorkspace } from '../helpers/test-env.js';
import { chain, FAST_RETRIES, fire, getRun, getSteps, patient, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { LedgerServer } from '../helpers/ledger-server.js';
import { capturedLogger } from '../helpers/log-capture.js';
import { createAllowList } from '../../src/engine/outbound/allow-list.js';
import { engineServices } from '../../src/engine/engine-services.js';
import { RunWorker } from '../../src/engine/worker.js';
import type { Logger } from '../../src/lib/logger.js';

const ledger = new LedgerServer();
beforeAll(() => ledger.listen());
afterAll(() => ledger.close());

const httpStep = (id: string, settings: Record<string, unknown>) => ({ id: 'call', kind: 'action', automations: [{ id, type: 'http', with: settings }] });

describeEachStore('engine: http automation', (env) => {
  it('sends the rendered request with the idempotency key, and keeps {status, body} in steps', async () => {
    const ws = await env.workspace();
    await patient(env, ws, 'p-http');
    ledger.on('/notify', { status: 201, body: { accepted: true, id: 7 } });
    const { triggerId } = await webTriggerFor(ws, {
      name: 'Notify',
      nodes: [
        { id: 'start', kind: 'start' },
        httpStep('post', {
          method: 'POST',
          url: ledger.url('/notify'),
          headers: {
            'X-Ward': '{{payload.ward}}',
            'X-Score': '{{payload.score}}',
            'X-Bed': '{{payload.bed}}',
            'X-None': '{{payload.missing}}',
            'X-Codes': '{{payload.codes}}',
            'Idempotency-Key': 'mine',
          },
          body: { patient: '{{subject.extId}}', score: '{{payload.score}}', note: 'score {{payload.score}}' },
        }),
        { id: 'check', kind: 'decision' },
        { id: 'done', kind: 'end' },
      ],
      links: [
        { from: 'start', to: 'call' },
        { from: 'call', to: 'check' },
        { from: 'check', to: 'done', when: 'steps.post.output.status = 201 and steps.post.output.body.id = 7' },
      ],
    });
    const runId = await fire(ws, triggerId, {
      ward: 'B2',
      score: 4,
      bed: { unit: 'B2', number: 7 },
      codes: ['a', 'b'],
      subject: { reference: 'Patient/p-http' },
    });
    const before = ledger.requests.length;
    await testWorker(env).drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    const sent = ledger.requests.slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]).toMatchObject({ method: 'POST', path: '/notify' });
    expect(sent[0].headers['idempotency-key']).toBe(`${runId}:call:post`);
    expect(sent[0].headers['x-ward']).toBe('B2');
    // A header value is text: a placeholder alone gives its value's text, an object its JSON, nothing ''.
    expect(sent[0].headers['x-score']).toBe('4');
    expect(sent[0].headers['x-bed']).toBe('{"unit":"B2","number":7}');
    expect(sent[0].headers['x-none']).toBe('');
    expect(sent[0].headers['x-codes']).toBe('a,b');
    expect(sent[0].headers['content-type']).toBe('application/json');
    expect(JSON.parse(sent[0].body)).toEqual({ patient: 'p-http', score: 4, note: 'score 4' });
    const [step] = await getSteps(ws, runId);
    expect(step).toMatchObject({ type: 'http', outcome: 'ok', output: { status: 201, body: { accepted: true, id: 7 } } });
  });

  it('frames every body with its length, a DELETE\'s too, and sends none with a GET', async () => {
    const ws = await env.workspace();
    ledger.on('/framed', { status: 200, body: { ok: true } });
    const { triggerId } = await webTriggerFor(ws, {
      name: 'Framed',
      nodes: [
        { id: 'start', kind: 'start' },
        httpStep('call', { method: '{{payload.method}}', url: ledger.url('/framed'), body: { note: 'é {{payload.method}}' } }),
        { id: 'done', kind: 'end' },
      ],
      links: [
        { from: 'start', to: 'call' },
        { from: 'call', to: 'done' },
      ],
    });
    for (const method of ['DELETE', 'POST', 'PUT', 'PATCH', 'GET']) {
      const runId = await fire(ws, triggerId, { method });
      const before = ledger.requests.length;
      await testWorker(env).drain();
      // A DELETE's body went out unframed: the partner saw none, then a broken request, and answered 400.
      expect((await getRun(ws, runId)).automationStatus, method).toBe('completed');
      const sent = ledger.requests.slice(before);
      expect(sent.map((request) => request.method)).toEqual([method]);
      if (method === 'GET') {
        expect(sent[0].body).toBe('');
        expect(sent[0].headers['content-length']).toBeUndefined();
        continue;
      }
      expect(JSON.parse(sent[0].body)).toEqual({ note: `é ${method}` });
      expect(sent[0].headers['content-length']).toBe(String(Buffer.byteLength(sent[0].body)));
      expect(sent[0].headers['transfer-encoding']).toBeUndefined();
    }
  });

  it('percent-encodes what placeholders put in the path or query: run data cannot choose another endpoint', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(
      ws,
      chain('Encoded', [httpStep('notify', { method: 'GET', url: `${ledger.url('/patients')}/{{payload.id}}/notify?note={{payload.note}}&n={{payload.n}}` })]),
    );
    const runId = await fire(ws, triggerId, { id: '../../admin/delete?all=1#', note: 'a&b=c d', n: 3 });
    const before = ledger.requests.length;
    await testWorker(env).drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    const [sent] = ledger.requests.slice(before);
    expect(sent.target).toBe('/patients/..%2F..%2Fadmin%2Fdelete%3Fall%3D1%23/notify?note=a%26b%3Dc%20d&n=3');
    // A value of ".." alone would climb out of /patients once the URL is resolved: refused, nothing sent.
    const climbing = await fire(ws, triggerId, { id: '..', note: 'x', n: 1 });
    const sentBefore = ledger.requests.length;
    await testWorker(env).drain();
    expect(ledger.requests.length).toBe(sentBefore);
    expect((await getRun(ws, climbing)).error).toEqual({ nodeId: 'call', message: 'http: with.url: a placeholder filled a path segment with "." or ".." (it would change the path)' });
  });

  it('logs why it tries again without the host or path, which placeholders may have filled from data', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(
      ws,
      chain('Unresolvable', [httpStep('lookup', { method: 'GET', url: 'http://{{payload.who}}.invalid/patients/{{payload.mrn}}' })]),
    );
    const runId = await fire(ws, triggerId, { who: 'jane-doe-hiv-positive', mrn: 'mrn-778812' });
    const { logger, lines } = capturedLogger('info');
    await new RunWorker({ ...engineServices(env.container, { backoff: FAST_RETRIES, timeoutMs: 2_000 }), logger }, { leaseMs: 5_000 }).drain();
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    // The run's own error names the host: it is read through the API, which keys and scopes guard.
    expect(run.error?.message).toContain('jane-doe-hiv-positive.invalid');
    const retries = lines.filter((line) => line.msg === 'http automation will try again');
    expect(retries).toHaveLength(FAST_RETRIES.attempts - 1);
    for (const line of retries) expect(line.problem).toMatch(/^dns [A-Z_]+$/);
    // Tries of this execution, not the step's attempts (the timeline's word).
    expect(retries.map((line) => [line.try, line.tries, line.attempt])).toEqual(
      Array.from({ length: FAST_RETRIES.attempts - 1 }, (_, i) => [i + 1, FAST_RETRIES.attempts, undefined]),
    );
    // The run's end is a line of its own, with what finds its timeline; never the message.
    expect(lines.filter((line) => line.msg === 'run errored')).toEqual([
      expect.objectContaining({ level: 40, runId, triggerId, workspaceId: ws.workspaceId, nodeId: run.error?.nodeId, automationId: 'lookup', automation: 'http' }),
    ]);
    const logged = JSON.stringify(lines);
    for (const data of ['jane-doe', 'mrn-778812']) expect(logged).not.toContain(data);
  });

  it('retries 5xx and 429 with the same key, then succeeds', async () => {
    const ws = await env.workspace();
    ledger.on('/flaky', { status: 503 }, { status: 429, headers: { 'retry-after': '0' } }, { status: 200, body: 'fine' });
    const { triggerId } = await webTriggerFor(ws, chain('Flaky', [httpStep('get', { method: 'GET', url: ledger.url('/flaky') })]));
    const runId = await fire(ws, triggerId);
    const before = ledger.requests.length;
    await testWorker(env).drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    const sent = ledger.requests.slice(before);
    expect(sent.map((r) => r.headers['idempotency-key'])).toEqual(Array(3).fill(`${runId}:call:get`));
    expect(sent[0].body).toBe('');
    expect((await getSteps(ws, runId))[0].output).toEqual({ status: 200, body: 'fine' });
  });

  it('errors the run after its tries when 5xx persists, and at once on a 4xx', async () => {
    const ws = await env.workspace();
    ledger.on('/down', { status: 500, body: { secret: 'not logged' } });
    ledger.on('/missing', { status: 404 });
    const down = await webTriggerFor(ws, chain('Down', [httpStep('d', { method: 'POST', url: ledger.url('/down?token=abc'), body: {} })]));
    const missing = await webTriggerFor(ws, chain('Missing', [httpStep('m', { method: 'DELETE', url: ledger.url('/missing') })]));
    const downRun = await fire(ws, down.triggerId);
    const missingRun = await fire(ws, missing.triggerId);
    const before = ledger.requests.length;
    await testWorker(env).drain();
    const sent = ledger.requests.slice(before);
    expect(sent.filter((r) => r.path === '/down')).toHaveLength(3);
    expect(sent.filter((r) => r.path === '/missing')).toHaveLength(1);
    expect((await getRun(ws, downRun)).error).toEqual({
      nodeId: 'call',
      message: `http POST ${ledger.url('/down')} answered 500 (after 3 tries)`,
    });
    expect((await getRun(ws, missingRun)).error).toEqual({ nodeId: 'call', message: `http DELETE ${ledger.url('/missing')} answered 404` });
    expect((await getSteps(ws, downRun))[0]).toMatchObject({ outcome: 'failed', output: { status: 500, body: { secret: 'not logged' } } });
  });

  describe('a run canceled or paused while its call waits to try again', () => {
    /** 503 with Retry-After: 1 s, so the test can act between the first try and the second. */
    const slowRetries = { backoff: { attempts: 4, baseMs: 5, maxMs: 2_000 } };
    const sentTo = (path: string, before: number) => ledger.requests.slice(before).filter((r) => r.path === path);

    /** A run whose call got a 503 (Retry-After 1 s) and waits to try again; its worker draining. */
    async function callWaitingToRetry(ws: TestWorkspace, path: string, logger?: Logger) {
      ledger.on(path, { status: 503, headers: { 'retry-after': '1' } });
      const { triggerId } = await webTriggerFor(ws, chain(`Call to ${path}`, [httpStep('c', { method: 'POST', url: ledger.url(path), body: {} })]));
      const runId = await fire(ws, triggerId);
      const before = ledger.requests.length;
      const worker = logger
        ? new RunWorker({ ...engineServices(env.container, { timeoutMs: 2_000, ...slowRetries }), logger }, { leaseMs: 5_000 })
        : testWorker(env, {}, slowRetries);
      const draining = worker.drain();
      for (let i = 0; i < 500 && sentTo(path, before).length === 0; i++) await new Promise((r) => setTimeout(r, 10));
      return { runId, before, worker, draining };
    }

    it('canceled: sends nothing more, and the step stays canceled', async () => {
      // The retries went on after the cancel (4 tries over minutes with a slow partner) and the
      // step was rewritten to "failed" once they ran out (an engine review).
      const ws = await env.workspace();
      const { runId, before, draining } = await callWaitingToRetry(ws, '/cancel-me');
      expect((await ws.call('POST', `/v1/runs/${runId}/cancel`)).statusCode).toBe(200);
      await draining;
      expect(sentTo('/cancel-me', before)).toHaveLength(1);
      expect(await getRun(ws, runId)).toMatchObject({ automationStatus: 'canceled', error: null });
      expect((await getSteps(ws, runId)).map((s) => [s.automationId, s.outcome, s.error])).toEqual([['c', 'canceled', 'the run was canceled']]);
      const row = await env.db.selectFrom('runs').select(['lease_owner']).where('id', '=', runId).executeTakeFirstOrThrow();
      expect(row.lease_owner).toBeNull();
    });

    it('interrupted twice: each attempt that never recorded its outcome is audited as it is closed', async () => {
      const ws = await env.workspace();
      const { runId, before, worker, draining } = await callWaitingToRetry(ws, '/twice');
      expect((await ws.call('POST', `/v1/runs/${runId}/pause`)).statusCode).toBe(200);
      await draining;
      // Resumed while the partner still answers 503: the second attempt is paused mid-call too.
      expect((await ws.call('POST', `/v1/runs/${runId}/resume`)).statusCode).toBe(200);
      const second = worker.drain();
      for (let i = 0; i < 500 && sentTo('/twice', before).length < 2; i++) await new Promise((r) => setTimeout(r, 10));
      expect((await ws.call('POST', `/v1/runs/${runId}/pause`)).statusCode).toBe(200);
      await second;
      ledger.on('/twice', { status: 200, body: { ok: true } });
      expect((await ws.call('POST', `/v1/runs/${runId}/resume`)).statusCode).toBe(200);
      await worker.drain();
      expect((await getRun(ws, runId)).automationStatus).toBe('completed');
      expect(sentTo('/twice', before)).toHaveLength(3);
      const steps = await getSteps(ws, runId);
      expect(steps.map((s) => [s.attempt, s.outcome])).toEqual([[1, 'interrupted'], [2, 'interrupted'], [3, 'ok']]);
      const audited = await env.db.selectFrom('audit_events').select(['outcome', 'details']).where('resource_id', '=', runId).where('action', '=', 'http.send').orderBy('id').execute();
      expect(audited.map((row) => [row.outcome, JSON.parse(row.details).interruptedStepId ?? null, JSON.parse(row.details).tries])).toEqual([
        ['failure', steps[0].stepId, null],
        ['failure', steps[1].stepId, null],
        ['success', null, 1],
      ]);
    });

    it('paused: sends nothing more until resumed, then makes the call again with the same key, saying so in the log', async () => {
      const ws = await env.workspace();
      const { logger, lines } = capturedLogger('info');
      const { runId, before, worker, draining } = await callWaitingToRetry(ws, '/pause-me', logger);
      expect((await ws.call('POST', `/v1/runs/${runId}/pause`)).statusCode).toBe(200);
      await draining;
      expect(sentTo('/pause-me', before)).toHaveLength(1);
      // Let go at once: a resume need not wait out the lease.
      const row = await env.db.selectFrom('runs').select(['automation_status', 'lease_owner']).where('id', '=', runId).executeTakeFirstOrThrow();
      expect(row).toEqual({ automation_status: 'paused', lease_owner: null });
      expect(await worker.drain()).toBe(0);

      ledger.on('/pause-me', { status: 200, body: { ok: true } });
      expect((await ws.call('POST', `/v1/runs/${runId}/resume`)).statusCode).toBe(200);
      await worker.drain();
      expect((await getRun(ws, runId)).automationStatus).toBe('completed');
      const sent = sentTo('/pause-me', before);
      expect(sent).toHaveLength(2);
      expect(new Set(sent.map((r) => r.headers['idempotency-key']))).toEqual(new Set([`${runId}:call:c`]));
      const steps = await getSteps(ws, runId);
      expect(steps.map((s) => [s.attempt, s.outcome])).toEqual([[1, 'interrupted'], [2, 'ok']]);
      // The worker said why it stopped, and the next one that it called again (ids, never data).
      const ofRun = lines.filter((line) => line.runId === runId && line.msg !== 'http automation will try again');
      expect(ofRun.map((line) => [line.level, (line.msg as string).split(':')[0]])).toEqual([
        [30, 'stopped a call before its next try'],
        [40, 'making a call again'],
      ]);
      expect(ofRun[1]).toMatchObject({ nodeId: 'call', automationId: 'c', automation: 'http', attempt: 2, interruptedStepId: steps[0].stepId, stepId: steps[1].stepId });
      expect(JSON.stringify(ofRun)).not.toContain('/pause-me');
      // The trail says the data may have gone out twice: the interrupted attempt (what it sent
      // unknown) and the redo, in the redo's transaction.
      const audited = await env.db.selectFrom('audit_events').select(['outcome', 'details']).where('resource_id', '=', runId).where('action', '=', 'http.send').orderBy('id').execute();
      const origin = new URL(ledger.url('/')).origin;
      expect(audited.map((row) => [row.outcome, JSON.parse(row.details)])).toEqual([
        ['failure', { nodeId: 'call', automationId: 'c', subjectRecordId: null, method: 'POST', origin, tries: null, status: null, interruptedStepId: steps[0].stepId }],
        ['success', { nodeId: 'call', automationId: 'c', subjectRecordId: null, method: 'POST', origin, tries: 1, status: 200 }],
      ]);
    });
  });

  it('treats a refused connection and a hung server as network failures', async () => {
    const ws = await env.workspace();
    const closed = new LedgerServer();
    const port = await closed.listen();
    await closed.close();
    ledger.on('/hang', { hang: true });
    const refused = await webTriggerFor(ws, chain('Refused', [httpStep('r', { method: 'GET', url: `http://127.0.0.1:${port}/` })]));
    const hung = await webTriggerFor(ws, chain('Hung', [httpStep('h', { method: 'GET', url: ledger.url('/hang'), timeoutMs: 100 })]));
    const refusedRun = await fire(ws, refused.triggerId);
    const hungRun = await fire(ws, hung.triggerId);
    await testWorker(env).drain();
    expect((await getRun(ws, refusedRun)).error?.message).toMatch(/answered|request failed: ECONNREFUSED \(after 3 tries\)/);
    expect((await getRun(ws, hungRun)).error?.message).toBe(`http GET ${ledger.url('/hang')} no answer within 100 ms (after 3 tries)`);
  });

  it('never follows a redirect', async () => {
    const ws = await env.workspace();
    ledger.on('/moved', { status: 302, headers: { location: ledger.url('/elsewhere') } });
    const { triggerId } = await webTriggerFor(ws, chain('Moved', [httpStep('mv', { method: 'GET', url: ledger.url('/moved') })]));
    const runId = await fire(ws, triggerId);
    const before = ledger.requests.length;
    await testWorker(env).drain();
    expect(ledger.requests.slice(before).map((r) => r.path)).toEqual(['/moved']);
    expect((await getRun(ws, runId)).error?.message).toMatch(/answered 302$/);
  });

  it('caps the kept body at 64 KiB', async () => {
    const ws = await env.workspace();
    ledger.on('/big', { status: 200, body: 'x'.repeat(200_000) });
    const { triggerId } = await webTriggerFor(ws, chain('Big', [httpStep('big', { method: 'GET', url: ledger.url('/big') })]));
    const runId = await fire(ws, triggerId);
    await testWorker(env).drain();
    const [step] = await getSteps(ws, runId);
    const output = step.output as { status: number; body: string; truncated: boolean };
    expect(output.status).toBe(200);
    expect(output.truncated).toBe(true);
    expect(output.body).toHaveLength(64 * 1024);
  });

  it('refuses a private address that the allow-list does not name, without sending anything', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Private', [httpStep('p', { method: 'POST', url: ledger.url('/private'), body: {} })]));
    const runId = await fire(ws, triggerId);
    const before = ledger.requests.length;
    await testWorker(env, {}, { allow: createAllowList([]) }).drain();
    expect(ledger.requests.length).toBe(before);
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    expect(run.error?.message).toMatch(/refused: 127\.0\.0\.1 resolves to 127\.0\.0\.1, a non-public address not listed in CAREPATH_HTTP_ALLOW/);
  });

  it('audits what each call sent out (http.send): method, origin, tries and answer, never the path; a refused call none', async () => {
    const ws = await env.workspace();
    const subjectId = await patient(env, ws, 'p-sent');
    ledger.on('/sent/ok', { status: 200, body: {} });
    ledger.on('/sent/busy', { status: 503 }, { status: 503 }, { status: 404 });
    const ok = await webTriggerFor(ws, chain('Sent ok', [httpStep('tell', { method: 'POST', url: `${ledger.url('/sent')}/{{payload.where}}`, body: { mrn: 'MRN-SECRET-1' } })]));
    const busy = await webTriggerFor(ws, chain('Sent busy', [httpStep('tell', { method: 'PUT', url: `${ledger.url('/sent')}/{{payload.where}}`, body: {} })]));
    const okRun = await fire(ws, ok.triggerId, { where: 'ok', subject: { reference: 'Patient/p-sent' } });
    const busyRun = await fire(ws, busy.triggerId, { where: 'busy' });
    await testWorker(env).drain();
    expect((await getRun(ws, okRun)).automationStatus).toBe('completed');
    expect((await getRun(ws, busyRun)).automationStatus).toBe('errored');

    const refused = await webTriggerFor(ws, chain('Sent refused', [httpStep('tell', { method: 'POST', url: ledger.url('/sent/ok'), body: {} })]));
    const refusedRun = await fire(ws, refused.triggerId);
    await testWorker(env, {}, { allow: createAllowList([]) }).drain();
    expect((await getRun(ws, refusedRun)).automationStatus).toBe('errored');

    const events = await env.db.selectFrom('audit_events').selectAll().where('workspace_id', '=', ws.workspaceId).where('action', '=', 'http.send').orderBy('id').execute();
    expect(events.map((e) => [e.resource_id, e.outcome, e.request_id, e.key_id, e.key_name, e.tenant_id])).toEqual([
      [okRun, 'success', `run:${okRun}`, null, 'carepath', ws.tenantId],
      [busyRun, 'failure', `run:${busyRun}`, null, 'carepath', ws.tenantId],
    ]);
    const origin = new URL(ledger.url('/')).origin;
    expect(JSON.parse(events[0].details)).toEqual({ nodeId: 'call', automationId: 'tell', subjectRecordId: subjectId, method: 'POST', origin, tries: 1, status: 200 });
    expect(JSON.parse(events[1].details)).toEqual({ nodeId: 'call', automationId: 'tell', subjectRecordId: null, method: 'PUT', origin, tries: 3, status: 404 });
    // Where and what: the origin only (a path or body may hold patient data).
    expect(events.map((e) => e.details).join()).not.toMatch(/\/sent|MRN-SECRET/);
    // Readable through the API like every other event.
    const listed = await ws.call('GET', '/v1/audit-events?action=http.send');
    expect(listed.statusCode).toBe(200);
    expect(listed.json().data.map((e: { resourceId: string }) => e.resourceId).sort()).toEqual([okRun, busyRun].sort());
    // An accounting of disclosures: found by the patient's record, which only the first names.
    const disclosed = await ws.call('GET', `/v1/audit-events?recordId=${subjectId}&action=http.send`);
    expect(disclosed.json().data.map((e: { resourceId: string }) => e.resourceId)).toEqual([okRun]);
  });

  it('a try the allow-list refuses after an answer (the name now resolves elsewhere) keeps that answer as the last one in the trail', async () => {
    const ws = await env.workspace();
    ledger.on('/rebound', { status: 503 });
    const { triggerId } = await webTriggerFor(ws, chain('Rebound', [httpStep('tell', { method: 'POST', url: ledger.url('/rebound'), body: {} })]));
    const runId = await fire(ws, triggerId);
    // Allowed for the first try, refused from the second: what DNS pointed elsewhere between tries gives.
    const listed = createAllowList([new URL(ledger.url('/')).host]);
    let checks = 0;
    const allow = { ...listed, refusal: (host: string, port: number, address: string) => (++checks === 1 ? listed.refusal(host, port, address) : `${host} resolves to ${address}, refused now`) };
    await testWorker(env, {}, { allow }).drain();
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    expect(run.error?.message).toMatch(/refused now$/);
    const events = await env.db.selectFrom('audit_events').select(['outcome', 'details']).where('resource_id', '=', runId).where('action', '=', 'http.send').execute();
    expect(events.map((event) => [event.outcome, JSON.parse(event.details).tries, JSON.parse(event.details).status])).toEqual([['failure', 1, 503]]);
  });

  it('a header value filled with a line break or a character beyond U+00FF errors the run, naming the header and the rule; nothing is sent', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Header from data', [httpStep('h', { method: 'POST', url: ledger.url('/header-data'), headers: { 'X-Note': 'note: {{payload.note}}' }, body: {} })]));
    const before = ledger.requests.length;
    const broken = await fire(ws, triggerId, { note: 'a\r\nX-Injected: 1' });
    const euro = await fire(ws, triggerId, { note: '12 €' });
    await testWorker(env).drain();
    for (const runId of [broken, euro]) {
      const run = await getRun(ws, runId);
      expect(run.automationStatus).toBe('errored');
      expect(run.error).toEqual({
        nodeId: 'call',
        message: 'http: once its placeholders are filled, with.headers.X-Note holds a character a header cannot carry (a line break, a control character, or one beyond U+00FF)',
      });
    }
    expect(ledger.requests.length).toBe(before);
  });

  it('resolves names before checking them: localhost is refused unless allowed', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Localhost', [httpStep('lh', { method: 'GET', url: `http://localhost:${ledger.port}/x` })]));
    const refused = await fire(ws, triggerId);
    await testWorker(env, {}, { allow: createAllowList(['10.0.0.0/8']) }).drain();
    expect((await getRun(ws, refused)).error?.message).toMatch(/localhost resolves to .*non-public/);
    const allowed = await fire(ws, triggerId);
    await testWorker(env, {}, { allow: createAllowList([`localhost:${ledger.port}`]) }).drain();
    expect((await getRun(ws, allowed)).automationStatus).toBe('completed');
  });
}, { env: { CAREPATH_HTTP_ALLOW: '127.0.0.1' } });
