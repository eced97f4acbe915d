import { expect, it } from 'vitest';
import { describeEachStore } from '../helpers/test-env.js';
import { chain, fire, getRun, getSteps, patient, recordTags, testWorker, webTriggerFor } from '../helpers/engine-harness.js';
import { ManualClock } from '../../src/lib/clock.js';
import { wakeRunsWaitingFor } from '../../src/engine/event-waits.js';
import { startPathwayAutomation } from '../../src/engine/automations/start-pathway.js';
import { waitForEventAutomation } from '../../src/engine/automations/wait-for-event.js';
import { ReplanNeeded } from '../../src/engine/automations/automation.js';
import { engineServices } from '../../src/engine/engine-services.js';
import { ExpressionCache } from '../../src/lib/fhirpath.js';

const subjectOf = (extId: string) => ({ subject: { reference: `Patient/${extId}` } });

describeEachStore('engine: automations', (env) => {
  it('set: evaluates FHIRPath into vars, later steps see them, and the run completes', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Set things', [
      { id: 'a', automations: [{ id: 'one', type: 'set', with: { vars: { x: 'payload.n + 1', both: 'vars.x + 1' } } }] },
      { id: 'b', automations: [{ id: 'two', type: 'set', with: { vars: { y: 'vars.x * 2', none: 'payload.missing', many: 'payload.list' } } }] },
    ]));
    const runId = await fire(ws, triggerId, { n: 4, list: [1, 2] });
    await testWorker(env).drain();
    expect(await getRun(ws, runId)).toMatchObject({ automationStatus: 'completed', error: null });
    const steps = await getSteps(ws, runId);
    expect(steps.map((s) => [s.nodeId, s.automationId, s.type, s.attempt, s.outcome, s.output])).toEqual([
      ['a', 'one', 'set', 1, 'ok', { vars: { x: 5, both: 6 } }],
      ['b', 'two', 'set', 1, 'ok', { vars: { y: 10, none: null, many: [1, 2] } }],
    ]);
    expect(steps.every((s) => s.finishedAt !== null && s.startedAt <= s.finishedAt)).toBe(true);
  });

  it('tag: each change of a record is audited in its step (record.tags.change); run.create names the subject', async () => {
    const ws = await env.workspace();
    const subjectId = await patient(env, ws, 'p-tag-audit', ['review-done']);
    const { triggerId } = await webTriggerFor(ws, chain('Tag audit', [
      { id: 'mark', automations: [
        { id: 'due', type: 'tag', with: { target: 'subject', add: ['review-due'], remove: ['review-done'] } },
        { id: 'path', type: 'tag', with: { target: 'pathway', add: ['needs-call'] } },
      ] },
    ]));
    const runId = await fire(ws, triggerId, subjectOf('p-tag-audit'));
    await testWorker(env).drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    const events = await env.db.selectFrom('audit_events').selectAll().where('workspace_id', '=', ws.workspaceId).orderBy('id').execute();
    const created = events.find((e) => e.action === 'run.create')!;
    expect(JSON.parse(created.details)).toMatchObject({ triggerId, subjectRecordId: subjectId });
    const changes = events.filter((e) => e.action === 'record.tags.change');
    expect(changes.map((e) => [e.resource_type, e.resource_id, e.request_id, e.key_name, e.tenant_id, JSON.parse(e.details)])).toEqual([
      ['record', subjectId, `run:${runId}`, 'carepath', ws.tenantId, { target: 'subject', runId, nodeId: 'mark', automationId: 'due', subjectRecordId: subjectId, add: ['review-due'], remove: ['review-done'] }],
      ['record', runId, `run:${runId}`, 'carepath', ws.tenantId, { target: 'pathway', runId, nodeId: 'mark', automationId: 'path', subjectRecordId: subjectId, add: ['needs-call'], remove: [] }],
    ]);
    // Both are found by the patient's record (a tag on the patient's pathway too), and the
    // Pathway record's change by the run's own record.
    const byRecord = async (recordId: string) =>
      (await ws.call('GET', `/v1/audit-events?recordId=${recordId}&action=record.tags.change`)).json().data.map((e: { resourceId: string }) => e.resourceId);
    expect(await byRecord(subjectId)).toEqual([runId, subjectId]);
    expect(await byRecord(runId)).toEqual([runId]);
    // A run without a subject: run.create says so (null), as the other run events do.
    const bare = await fire(ws, (await webTriggerFor(ws, chain('No subject', [{ id: 'x', automations: [{ id: 's', type: 'set', with: { vars: { a: '1' } } }] }]))).triggerId);
    const bareCreated = await env.db.selectFrom('audit_events').select('details').where('resource_id', '=', bare).where('action', '=', 'run.create').executeTakeFirstOrThrow();
    expect(JSON.parse(bareCreated.details)).toMatchObject({ subjectRecordId: null });
  });

  it('tag: changes the subject record and the run\'s Pathway record, and search sees both', async () => {
    const ws = await env.workspace();
    const subjectId = await patient(env, ws, 'p-tag', ['review-done']);
    const { triggerId } = await webTriggerFor(ws, {
      name: 'Tagging',
      nodes: [
        { id: 'start', kind: 'start' },
        { id: 'mark', kind: 'action', automations: [
          { id: 'due', type: 'tag', with: { target: 'subject', add: ['review-due'], remove: ['review-done'] } },
          { id: 'path', type: 'tag', with: { target: 'pathway', add: ['needs-call'] } },
        ] },
        { id: 'check', kind: 'decision' },
        { id: 'done', kind: 'end' },
        { id: 'wrong', kind: 'stop' },
      ],
      links: [
        { from: 'start', to: 'mark' },
        { from: 'mark', to: 'check' },
        // The in-memory subject follows the tag step, so the condition sees the new tags.
        { from: 'check', to: 'done', when: "subject.tags contains 'review-due' and (subject.tags contains 'review-done').not()" },
        { from: 'check', to: 'wrong' },
      ],
    });
    const runId = await fire(ws, triggerId, subjectOf('p-tag'));
    await testWorker(env).drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    expect(await recordTags(env, subjectId)).toEqual(['review-due']);
    expect(await recordTags(env, runId)).toEqual(['completed', 'needs-call']);
    const search = await ws.call('POST', '/v1/search', { body: { resourceType: 'Pathway', filters: [{ op: 'with', tag: 'needs-call' }] } });
    expect(search.json().results.map((hit: { id: string }) => hit.id)).toEqual([runId]);
    const patients = await ws.call('POST', '/v1/search', { body: { resourceType: 'Patient', filters: [{ op: 'with', tag: 'review-due' }] } });
    expect(patients.json().results.map((hit: { id: string }) => hit.id)).toEqual([subjectId]);
  });

  it('tag as a node\'s last step: the links leaving it, and a decision right behind it, see the new tags', async () => {
    const ws = await env.workspace();
    await patient(env, ws, 'p-last', ['stale']);
    const { triggerId } = await webTriggerFor(ws, {
      name: 'Flag then route',
      nodes: [
        { id: 'start', kind: 'start' },
        { id: 'mark', kind: 'action', automations: [{ id: 'flag', type: 'tag', with: { target: 'subject', add: ['flagged'], remove: ['stale'] } }] },
        { id: 'check', kind: 'decision' },
        { id: 'ok', kind: 'end' },
        { id: 'wrong', kind: 'stop' },
      ],
      links: [
        { from: 'start', to: 'mark' },
        // An action's links are parallel branches: with the old tags this one would not hold
        // and the run would error at mark.
        { from: 'mark', to: 'check', when: "subject.tags contains 'flagged'" },
        { from: 'check', to: 'ok', when: "subject.tags contains 'flagged' and (subject.tags contains 'stale').not()" },
        { from: 'check', to: 'wrong' },
      ],
    });
    const runId = await fire(ws, triggerId, subjectOf('p-last'));
    await testWorker(env).drain();
    expect(await getRun(ws, runId)).toMatchObject({ automationStatus: 'completed', error: null });
    const graph = (await ws.call('GET', `/v1/diagrams/${runId}/graph`)).json();
    const stateOf = (id: string) => graph.nodes.find((node: { id: string }) => node.id === id).state;
    expect([stateOf('check'), stateOf('ok'), stateOf('wrong')]).toEqual(['done', 'done', 'skipped']);
  });

  it('tag on the subject of a run without one errors that step with a clear message', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('No subject', [
      { id: 'mark', automations: [{ id: 't', type: 'tag', with: { target: 'subject', add: ['x'] } }] },
    ]));
    const runId = await fire(ws, triggerId, { nothing: true });
    await testWorker(env).drain();
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    expect(run.error).toEqual({
      nodeId: 'mark',
      message: `tag needs the run's subject, and this run has none (a fired run takes it from payload.subject, {"reference": "Patient/<extId>"})`,
    });
    const [step] = await getSteps(ws, runId);
    expect(step).toMatchObject({ automationId: 't', outcome: 'failed', error: run.error!.message });
    expect(await recordTags(env, runId)).toEqual(['errored']);
  });

  it('takes placeholders in any setting: filled when the step runs, then held to the rules import applies', async () => {
    const ws = await env.workspace();
    const subjectId = await patient(env, ws, 'p-filled');
    const { triggerId } = await webTriggerFor(ws, chain('Filled settings', [
      { id: 'mark', automations: [{ id: 't', type: 'tag', with: { target: 'subject', add: ['lab-{{payload.code}}'] } }] },
      { id: 'nap', automations: [{ id: 'w', type: 'wait', with: { duration: '{{payload.delay}}' } }] },
    ]));
    const runId = await fire(ws, triggerId, { code: 'hba1c', delay: 'PT2H', subject: { reference: 'Patient/p-filled' } });
    await testWorker(env).drain();
    expect(await recordTags(env, subjectId)).toContain('lab-hba1c');
    const [tag, wait] = await getSteps(ws, runId);
    expect(tag).toMatchObject({ outcome: 'ok', output: { target: 'subject', add: ['lab-hba1c'], remove: [] } });
    expect(wait.outcome).toBeNull();
    const due = await env.db.selectFrom('runs').select('available_at').where('id', '=', runId).executeTakeFirstOrThrow();
    expect(Date.parse(due.available_at) - Date.parse(wait.startedAt)).toBe(2 * 3600_000);
    // A deadline past the year 9999 waits until its last instant (it ended at once before).
    const ages = await fire(ws, triggerId, { code: 'hba1c', delay: 'P8000Y', subject: { reference: 'Patient/p-filled' } });
    await testWorker(env).drain();
    expect((await getRun(ws, ages)).automationStatus).toBe('running');
    expect((await env.db.selectFrom('runs').select('available_at').where('id', '=', ages).executeTakeFirstOrThrow()).available_at).toBe('9999-12-31T23:59:59.999Z');

    // Filled with something the rule refuses: the run errors at that node, saying which rule.
    const bad = await fire(ws, triggerId, { code: 'Not A Slug', delay: 'PT2H', subject: { reference: 'Patient/p-filled' } });
    await testWorker(env).drain();
    const run = await getRun(ws, bad);
    expect(run.automationStatus).toBe('errored');
    expect(run.error).toEqual({
      nodeId: 'mark',
      message: 'tag: once its placeholders are filled, with.add[0] must be a tag slug (lower-case letters, digits, . _ : -), got "lab-Not A Slug"',
    });
    // A value that brings braces of its own is not taken for a placeholder still to fill.
    const braces = await fire(ws, triggerId, { code: '{{x}}', delay: 'PT2H', subject: { reference: 'Patient/p-filled' } });
    await testWorker(env).drain();
    expect((await getRun(ws, braces)).error).toEqual({ nodeId: 'mark', message: 'tag: once its placeholders are filled, with.add[0] may not hold {{' });
    expect(await recordTags(env, subjectId)).not.toContain('lab-{{x}}');
  });

  it('tag on the pathway may not touch automation status tags', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Status tag', [
      { id: 'mark', automations: [{ id: 't', type: 'tag', with: { target: 'pathway', remove: ['running'] } }] },
    ]));
    const runId = await fire(ws, triggerId);
    await testWorker(env).drain();
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    expect(run.error?.message).toMatch(/"running" is an automation status/);
    expect(await recordTags(env, runId)).toEqual(['errored']);
  });

  it('fail: errors the run at its node with the message, placeholders filled', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Failing', [
      { id: 'boom', automations: [{ id: 'f', type: 'fail', with: { message: 'score {{payload.score}} is out of range' } }] },
    ]));
    const runId = await fire(ws, triggerId, { score: 11 });
    await testWorker(env).drain();
    expect(await getRun(ws, runId)).toMatchObject({
      automationStatus: 'errored',
      error: { message: 'score 11 is out of range', nodeId: 'boom' },
    });
    // Free text may bring braces of its own.
    const braces = await fire(ws, triggerId, { score: '{{11}}' });
    await testWorker(env).drain();
    expect((await getRun(ws, braces)).error).toEqual({ message: 'score {{11}} is out of range', nodeId: 'boom' });
  });

  it('a step whose output would pass 4 MiB fails at its node, never retried, and writes none of it; the worker goes on', async () => {
    const ws = await env.workspace();
    // 23 variables, each its predecessor twice: 16 characters doubled 22 times would be 64 MiB.
    const doubling: Record<string, string> = { v0: "'xxxxxxxxxxxxxxxx'" };
    for (let i = 1; i <= 22; i++) doubling[`v${i}`] = `vars.v${i - 1} + vars.v${i - 1}`;
    const big = await webTriggerFor(ws, chain('Doubling', [{ id: 'a', automations: [{ id: 'grow', type: 'set', with: { vars: doubling } }] }]));
    const fine = await webTriggerFor(ws, chain('Fine', [{ id: 'b', automations: [{ id: 'small', type: 'set', with: { vars: { x: '1' } } }] }]));
    const bigRun = await fire(ws, big.triggerId);
    const fineRun = await fire(ws, fine.triggerId);
    await testWorker(env).drain();
    const run = await getRun(ws, bigRun);
    expect(run.automationStatus).toBe('errored');
    expect(run.error).toEqual({ nodeId: 'a', message: expect.stringMatching(/^set: with vars\.v\d+, its output comes to more than 4 MiB as JSON, the most a step may keep$/) });
    const [step] = await getSteps(ws, bigRun);
    expect(step).toMatchObject({ automationId: 'grow', outcome: 'failed', output: null });
    const row = await env.db.selectFrom('runs').select(['engine_state', 'failures']).where('id', '=', bigRun).executeTakeFirstOrThrow();
    expect(row.failures).toBe(0);
    expect(row.engine_state!.length).toBeLessThan(10_000);
    expect((await getRun(ws, fineRun)).automationStatus).toBe('completed');
  });

  it('a run whose variables and outputs would pass 16 MiB errors at the step that would take it there', async () => {
    const ws = await env.workspace();
    // Each step keeps about 3 MB (under a step's 4 MiB); together they pass the run's 16 MiB.
    const nodes = Array.from({ length: 8 }, (_, i) => ({
      id: `n${i}`,
      automations: [{ id: `s${i}`, type: 'set', with: { vars: { [`a${i}`]: 'payload.s + payload.s', [`b${i}`]: `vars.a${i} + payload.s` } } }],
    }));
    const { triggerId } = await webTriggerFor(ws, chain('Growing', nodes));
    const runId = await fire(ws, triggerId, { s: 'y'.repeat(500_000) });
    await testWorker(env).drain();
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    expect(run.error!.message).toMatch(/^set automation "s\d": the run's variables and step outputs would come to more than 16 MiB as JSON, the most a run may keep$/);
    const steps = await getSteps(ws, runId);
    const failed = steps.find((step) => step.outcome === 'failed')!;
    expect(failed).toMatchObject({ nodeId: run.error!.nodeId, output: null });
    expect(steps.filter((step) => step.outcome === 'ok').length).toBeGreaterThan(0);
    const row = await env.db.selectFrom('runs').select('engine_state').where('id', '=', runId).executeTakeFirstOrThrow();
    expect(row.engine_state!.length).toBeLessThanOrEqual(16 * 1024 * 1024 + 10_000);
  });

  it('fail: a message filled past 4,000 characters is cut, saying so', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Long message', [{ id: 'f', automations: [{ id: 'no', type: 'fail', with: { message: 'lab said: {{payload.s}}' } }] }]));
    const runId = await fire(ws, triggerId, { s: 'z'.repeat(300_000) });
    await testWorker(env).drain();
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    const said = '… (cut: 300010 characters)';
    expect(run.error!.message).toBe(`lab said: ${'z'.repeat(4_000 - 10 - said.length)}${said}`);
    expect(run.error!.message).toHaveLength(4_000);
    const [step] = await getSteps(ws, runId);
    expect(step.error).toBe(run.error!.message);
    expect(step.output).toEqual({ message: run.error!.message });
  });

  it('fail: a message holding U+0000 or an unpaired surrogate ends the run errored, those characters shown as U+FFFD', async () => {
    // FHIRPath spells them as escapes, so they pass import and appear only when the step fills
    // the message; PostgreSQL refused the step's row, and the run was retried for ever.
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Odd text', [
      { id: 'boom', automations: [{ id: 'f', type: 'fail', with: { message: "boom {{ 'a\\u0000b' }} {{ 'c\\ud800d' }}" } }] },
    ]));
    const runId = await fire(ws, triggerId, {});
    await testWorker(env).drain();
    expect(await getRun(ws, runId)).toMatchObject({ automationStatus: 'errored', error: { message: 'boom a\uFFFDb c\uFFFDd', nodeId: 'boom' } });
    const [step] = await getSteps(ws, runId);
    expect(step).toMatchObject({ outcome: 'failed', error: 'boom a\uFFFDb c\uFFFDd' });
  });

  it('stop and cancel automations end the run as stopped and canceled; later steps never run', async () => {
    const ws = await env.workspace();
    const runs: Record<string, string> = {};
    for (const type of ['stop', 'cancel'] as const) {
      const { triggerId } = await webTriggerFor(ws, chain(`Ends by ${type}`, [
        { id: 'end-it', automations: [{ id: 'x', type, with: {} }, { id: 'never', type: 'set', with: { vars: { v: '1' } } }] },
      ]));
      runs[type] = await fire(ws, triggerId);
    }
    await testWorker(env).drain();
    expect(await getRun(ws, runs.stop)).toMatchObject({ automationStatus: 'stopped', error: null });
    expect(await getRun(ws, runs.cancel)).toMatchObject({ automationStatus: 'canceled', error: null });
    expect((await getSteps(ws, runs.stop)).map((s) => [s.automationId, s.outcome])).toEqual([['x', 'stopped']]);
    expect((await getSteps(ws, runs.cancel)).map((s) => [s.automationId, s.outcome])).toEqual([['x', 'canceled']]);
    expect(await recordTags(env, runs.stop)).toEqual(['stopped']);
    expect(await recordTags(env, runs.cancel)).toEqual(['canceled']);
  });

  it('a stop node ends the run as stopped', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, {
      name: 'Stop node',
      nodes: [{ id: 'start', kind: 'start' }, { id: 'halt', kind: 'stop' }],
      links: [{ from: 'start', to: 'halt' }],
    });
    const runId = await fire(ws, triggerId);
    await testWorker(env).drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('stopped');
  });

  it('a decision with no true branch errors at the decision', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, {
      name: 'No branch',
      nodes: [{ id: 'start', kind: 'start' }, { id: 'pick', kind: 'decision' }, { id: 'done', kind: 'end' }],
      links: [{ from: 'start', to: 'pick' }, { from: 'pick', to: 'done', when: 'payload.go = true' }],
    });
    const runId = await fire(ws, triggerId, { go: false });
    await testWorker(env).drain();
    expect(await getRun(ws, runId)).toMatchObject({
      automationStatus: 'errored',
      error: { nodeId: 'pick', message: 'decision node "pick": no outgoing link holds' },
    });
  });

  it('an expression that fails at run time errors its node, and the worker goes on with other runs', async () => {
    const ws = await env.workspace();
    const { triggerId: badLink } = await webTriggerFor(ws, {
      name: 'Bad link',
      nodes: [{ id: 'start', kind: 'start' }, { id: 'pick', kind: 'decision' }, { id: 'done', kind: 'end' }],
      // Fine on an empty context (the import check), two items at run time.
      links: [{ from: 'start', to: 'pick' }, { from: 'pick', to: 'done', when: 'payload.flags' }],
    });
    const { triggerId: badSet } = await webTriggerFor(ws, chain('Bad set', [
      { id: 'calc', automations: [{ id: 'v', type: 'set', with: { vars: { one: 'payload.items.single()' } } }] },
    ]));
    const { triggerId: fine } = await webTriggerFor(ws, chain('Fine', [{ id: 'ok', automations: [{ id: 's', type: 'set', with: { vars: { a: '1' } } }] }]));
    const first = await fire(ws, badLink, { flags: [true, false] });
    const second = await fire(ws, badSet, { items: [1, 2] });
    const third = await fire(ws, fine);
    await testWorker(env).drain();
    const linkRun = await getRun(ws, first);
    expect(linkRun.automationStatus).toBe('errored');
    expect(linkRun.error?.nodeId).toBe('pick');
    expect(linkRun.error?.message).toMatch(/the condition of the link to "done" failed: .*payload\.flags/);
    const setRun = await getRun(ws, second);
    expect(setRun.automationStatus).toBe('errored');
    expect(setRun.error?.nodeId).toBe('calc');
    expect(setRun.error?.message).toMatch(/set automation "v": FHIRPath expression "payload.items.single\(\)" failed/);
    expect((await getRun(ws, third)).automationStatus).toBe('completed');
  });

  it('patterns from the payload run in linear time: one that backtracks answers at once, one the engine lacks errors its node', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Patterns', [
      { id: 'check', automations: [{ id: 'm', type: 'set', with: { vars: { hit: 'payload.text.matches(payload.pattern)' } } }] },
    ]));
    // With JavaScript's backtracking RegExp this pattern over this text would hold the process for hours.
    const slow = await fire(ws, triggerId, { text: `${'a'.repeat(40)}!`, pattern: '(a+)+$' });
    const lookAhead = await fire(ws, triggerId, { text: 'E11.9', pattern: 'E11(?=\\.9)' });
    const started = Date.now();
    await testWorker(env).drain();
    expect(Date.now() - started).toBeLessThan(10_000);
    expect(await getRun(ws, slow)).toMatchObject({ automationStatus: 'completed', error: null });
    expect((await getSteps(ws, slow))[0].output).toEqual({ vars: { hit: false } });
    const refused = await getRun(ws, lookAhead);
    expect(refused.automationStatus).toBe('errored');
    expect(refused.error?.nodeId).toBe('check');
    expect(refused.error?.message).toMatch(/regular expression "E11\(\?=\\\.9\)" is not supported: .*without look-around or back-references/);
  });

  it('an expression that compares a payload list pairwise is stopped after its budget and errors its node', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Pairwise', [
      { id: 'count', automations: [{ id: 'd', type: 'set', with: { vars: { distinct: 'payload.ids.distinct().count()' } } }] },
    ]));
    // Unbounded, fhirpath.js compares these 30,000 ids two by two for minutes on the serving thread.
    const large = await fire(ws, triggerId, { ids: Array.from({ length: 30_000 }, (_, n) => `id-${n}`) });
    const small = await fire(ws, triggerId, { ids: ['a', 'b', 'a'] });
    const started = Date.now();
    await testWorker(env).drain();
    expect(Date.now() - started).toBeLessThan(15_000);
    const stopped = await getRun(ws, large);
    expect(stopped.automationStatus).toBe('errored');
    expect(stopped.error).toEqual({
      nodeId: 'count',
      message: expect.stringMatching(/"payload\.ids\.distinct\(\)\.count\(\)" failed: took longer than 1000 ms over this data and was stopped/),
    });
    expect(await getRun(ws, small)).toMatchObject({ automationStatus: 'completed', error: null });
    expect((await getSteps(ws, small))[0].output).toEqual({ vars: { distinct: 2 } });
  });

  it('conditions and placeholders read payload, subject, vars and steps', async () => {
    const ws = await env.workspace();
    await patient(env, ws, 'p-ctx', ['copd']);
    const { triggerId } = await webTriggerFor(ws, {
      name: 'Context',
      nodes: [
        { id: 'start', kind: 'start' },
        { id: 'calc', kind: 'action', automations: [{ id: 'c', type: 'set', with: { vars: { risk: 'payload.riskScore * 2' } } }] },
        { id: 'pick', kind: 'decision' },
        { id: 'high', kind: 'action', automations: [{ id: 'h', type: 'fail', with: { message: '{{subject.extId}} {{subject.name}} risk {{vars.risk}} after {{steps.c.outcome}}' } }] },
        { id: 'low', kind: 'end' },
      ],
      links: [
        { from: 'start', to: 'calc' },
        { from: 'calc', to: 'pick' },
        { from: 'pick', to: 'high', when: "vars.risk > 10 and subject.tags contains 'copd' and steps.c.outcome = 'ok' and subject.resourceType = 'Patient'" },
        { from: 'pick', to: 'low' },
        { from: 'high', to: 'low' },
      ],
    });
    const high = await fire(ws, triggerId, { riskScore: 6, ...subjectOf('p-ctx') });
    const low = await fire(ws, triggerId, { riskScore: 2, ...subjectOf('p-ctx') });
    await testWorker(env).drain();
    expect((await getRun(ws, high)).error).toEqual({ nodeId: 'high', message: 'p-ctx Patient p-ctx risk 12 after ok' });
    expect((await getRun(ws, low)).automationStatus).toBe('completed');
  });

  it('parallel branches run and join; the graph shows each node\'s state', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, {
      name: 'Parallel',
      nodes: [
        { id: 'start', kind: 'start' },
        { id: 'fork', kind: 'action', automations: [{ id: 'f', type: 'set', with: { vars: { n: '1' } } }] },
        { id: 'left', kind: 'action', automations: [{ id: 'l', type: 'set', with: { vars: { left: 'true' } } }] },
        { id: 'right', kind: 'action', automations: [{ id: 'r', type: 'set', with: { vars: { right: 'true' } } }] },
        { id: 'skipped', kind: 'action', automations: [{ id: 's', type: 'set', with: { vars: { never: 'true' } } }] },
        { id: 'join', kind: 'action', automations: [{ id: 'j', type: 'set', with: { vars: { both: 'vars.left and vars.right' } } }] },
        { id: 'done', kind: 'end' },
      ],
      links: [
        { from: 'start', to: 'fork' },
        { from: 'fork', to: 'left' },
        { from: 'fork', to: 'right' },
        { from: 'fork', to: 'skipped', when: 'payload.never = true' },
        { from: 'left', to: 'join' },
        { from: 'right', to: 'join' },
        { from: 'skipped', to: 'join' },
        { from: 'join', to: 'done' },
      ],
    });
    const runId = await fire(ws, triggerId, { never: false });
    await testWorker(env).drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    const steps = await getSteps(ws, runId);
    expect(steps.map((s) => s.automationId)).toEqual(['f', 'l', 'r', 'j']);
    expect(steps[3].output).toEqual({ vars: { both: true } });
    const graph = (await ws.call('GET', `/v1/diagrams/${runId}/graph`)).json();
    const states = Object.fromEntries(graph.nodes.map((n: { id: string; state: string }) => [n.id, n.state]));
    expect(states).toEqual({ start: 'done', fork: 'done', left: 'done', right: 'done', skipped: 'skipped', join: 'done', done: 'done' });
    const join = graph.nodes.find((n: { id: string }) => n.id === 'join');
    expect(join.startedAt).not.toBeNull();
    expect(join.finishedAt).not.toBeNull();
  });

  it('start_pathway starts one run of the web trigger, with this run\'s subject, however often the step repeats', async () => {
    const ws = await env.workspace();
    const subjectId = await patient(env, ws, 'p-child');
    const child = await webTriggerFor(ws, chain('Child', [{ id: 'c', automations: [{ id: 'cs', type: 'set', with: { vars: { who: 'subject.extId' } } }] }]));
    const parent = await webTriggerFor(ws, chain('Parent', [
      { id: 'spawn', automations: [{ id: 'go', type: 'start_pathway', with: { triggerId: child.triggerId, payload: { from: '{{payload.origin}}' } } }] },
    ]));
    const runId = await fire(ws, parent.triggerId, { origin: 'parent', ...subjectOf('p-child') });
    await testWorker(env).drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    const [step] = await getSteps(ws, runId);
    const childRunId = (step.output as { runId: string }).runId;
    const childRun = await env.db.selectFrom('runs').selectAll().where('id', '=', childRunId).executeTakeFirstOrThrow();
    expect(childRun).toMatchObject({ trigger_id: child.triggerId, subject_record_id: subjectId, idempotency_key: `${runId}:spawn:go`, automation_status: 'completed' });
    expect(JSON.parse(childRun.payload!)).toEqual({ from: 'parent', subject: { reference: 'Patient/p-child' } });

    // The same step again (a worker lost before recording it) finds the same run.
    if (startPathwayAutomation.mode !== 'call') throw new Error('start_pathway is a call');
    const again = await startPathwayAutomation.call(
      {
        run: { id: runId, workspaceId: ws.workspaceId, triggerId: parent.triggerId, payload: { origin: 'parent' }, subject: { id: subjectId, extId: 'p-child', name: 'x', resourceType: 'Patient', tags: [] }, subjectRecordId: subjectId },
        nodeId: 'spawn',
        automation: { id: 'go', type: 'start_pathway', with: { triggerId: child.triggerId, payload: { from: '{{payload.origin}}' } } },
        context: { payload: { origin: 'parent' }, subject: null, steps: {}, vars: {} },
        expressions: new ExpressionCache(),
        now: new Date(),
        stepKey: `${runId}:spawn:go`,
        mayTryAgain: async () => true,
        holdsLease: () => true,
      },
      engineServices(env.container),
    );
    expect(again).toEqual({ result: { outcome: 'ok', output: { runId: childRunId, triggerId: child.triggerId } } });
    const children = await env.db.selectFrom('runs').select('id').where('trigger_id', '=', child.triggerId).execute();
    expect(children).toHaveLength(1);
  });

  it('a run whose blueprint version cannot be read errors with a clear message', async () => {
    const ws = await env.workspace();
    const { triggerId, blueprintId } = await webTriggerFor(ws, chain('Vanishing', [{ id: 'a', automations: [{ id: 's', type: 'set', with: { vars: { x: '1' } } }] }]));
    const runId = await fire(ws, triggerId);
    await env.db.deleteFrom('blueprint_versions').where('blueprint_id', '=', blueprintId).execute();
    await testWorker(env).drain();
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    expect(run.error?.message).toBe(`the blueprint version this run was copied from (${blueprintId} v1) cannot be read`);
    expect(await recordTags(env, runId)).toEqual(['errored']);
  });

  it('a blueprint imported before a rule it breaks still runs: the engine does not judge a stored version again', async () => {
    const ws = await env.workspace();
    const { triggerId, blueprintId } = await webTriggerFor(ws, {
      name: 'Imported long ago',
      nodes: [
        { id: 'start', kind: 'start' },
        { id: 'pick', kind: 'decision' },
        { id: 'usual', kind: 'end' },
        { id: 'rare', kind: 'end' },
      ],
      links: [
        { from: 'start', to: 'pick' },
        { from: 'pick', to: 'usual', when: "payload.kind = 'usual'" },
        { from: 'pick', to: 'rare' },
      ],
    });
    // As an earlier version stored it: a condition import now refuses (RE2 has no look-ahead).
    const row = await env.db.selectFrom('blueprint_versions').select('graph').where('blueprint_id', '=', blueprintId).executeTakeFirstOrThrow();
    const graph = JSON.parse(row.graph);
    graph.links[2].when = "payload.code.matches('^E11(?=9)')";
    await env.db.updateTable('blueprint_versions').set({ graph: JSON.stringify(graph) }).where('blueprint_id', '=', blueprintId).execute();
    const usual = await fire(ws, triggerId, { kind: 'usual' });
    const rare = await fire(ws, triggerId, { kind: 'rare', code: 'E119' });
    await testWorker(env).drain();
    expect(await getRun(ws, usual)).toMatchObject({ automationStatus: 'completed', error: null });
    const errored = await getRun(ws, rare);
    expect(errored.automationStatus).toBe('errored');
    expect(errored.error).toMatchObject({ nodeId: 'pick', message: expect.stringMatching(/the condition of the link to "rare" failed: .*not supported/) });
  });

  it('start_pathway chains are at most 10 runs long: a blueprint that starts its own trigger stops there', async () => {
    const ws = await env.workspace();
    // A review started 11,868 runs from one fire of this blueprint before deactivating its trigger.
    const { triggerId } = await webTriggerFor(ws, chain('Loop', [
      { id: 'again', automations: [{ id: 'go', type: 'start_pathway', with: { triggerId: '{{payload.next}}', payload: { next: '{{payload.next}}' } } }] },
    ]));
    const first = await fire(ws, triggerId, { next: triggerId });
    await testWorker(env).drain();
    const runs = await env.db.selectFrom('runs').select(['id', 'automation_status', 'error', 'idempotency_key']).where('trigger_id', '=', triggerId).orderBy('id').execute();
    expect(runs).toHaveLength(10);
    expect(runs[0].id).toBe(first);
    expect(runs.slice(0, 9).map((run) => run.automation_status)).toEqual(Array(9).fill('completed'));
    expect(runs[9].automation_status).toBe('errored');
    expect(JSON.parse(runs[9].error!).message).toBe(
      `start_pathway of trigger ${triggerId}: this run is the 10th of a chain of runs started by one another, the most there may be ` +
        '(a blueprint that starts its own trigger, directly or through others, would start runs for ever)',
    );
    // Each run was started by the one before it.
    for (let i = 1; i < 10; i++) expect(runs[i].idempotency_key).toBe(`${runs[i - 1].id}:again:go`);
  });

  it('start_pathway of an unknown trigger errors the step', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Bad child', [
      { id: 'spawn', automations: [{ id: 'go', type: 'start_pathway', with: { triggerId: '0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b' } }] },
    ]));
    const runId = await fire(ws, triggerId);
    await testWorker(env).drain();
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    expect(run.error?.message).toMatch(/start_pathway of trigger 0190a1b2-.*: trigger not found/);
  });
});

const clock = new ManualClock('2030-06-03T08:00:00.000Z');

describeEachStore('engine: waits', (env) => {
  it('wait {duration}: the run sleeps with its timer and completes once it is due', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Nap', [{ id: 'w', automations: [{ id: 'nap', type: 'wait', with: { duration: 'PT2H' } }] }]));
    const runId = await fire(ws, triggerId);
    const worker = testWorker(env);
    await worker.drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('running');
    const [open] = await getSteps(ws, runId);
    expect(open).toMatchObject({ automationId: 'nap', outcome: null, finishedAt: null });
    const waiting = (await ws.call('GET', `/v1/diagrams/${runId}/graph`)).json().nodes.find((n: { id: string }) => n.id === 'w');
    expect(waiting.state).toBe('waiting');
    clock.advance(60 * 60 * 1000);
    expect(await worker.drain()).toBe(0);
    clock.advance(60 * 60 * 1000 + 1);
    await worker.drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    const [done] = await getSteps(ws, runId);
    expect(done).toMatchObject({ outcome: 'elapsed', output: { until: new Date(Date.parse(open.startedAt) + 2 * 3600_000).toISOString() } });
  });

  it('wait {until, timezone}: due at the next local time', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Morning', [{ id: 'w', automations: [{ id: 'am', type: 'wait', with: { until: '09:30', timezone: 'America/New_York' } }] }]));
    const runId = await fire(ws, triggerId);
    const worker = testWorker(env);
    await worker.drain();
    const row = await env.db.selectFrom('runs').select(['available_at', 'lease_owner']).where('id', '=', runId).executeTakeFirstOrThrow();
    expect(row.lease_owner).toBeNull();
    // 09:30 in New York (UTC-4 in June) after 08:00Z+ is 13:30Z the same day.
    expect(row.available_at.slice(11)).toBe('13:30:00.000Z');
    clock.set(row.available_at);
    await worker.drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
  });

  it('wait_for_event: an event for the subject wakes the run with outcome event; others do not', async () => {
    const ws = await env.workspace();
    const subjectId = await patient(env, ws, 'p-ev');
    const otherId = await patient(env, ws, 'p-other');
    const { triggerId } = await webTriggerFor(ws, {
      name: 'Visit',
      nodes: [
        { id: 'start', kind: 'start' },
        { id: 'wait', kind: 'action', automations: [{ id: 'visit', type: 'wait_for_event', with: { event: 'Encounter.finished', timeout: 'P30D' } }] },
        { id: 'seen', kind: 'decision' },
        { id: 'done', kind: 'end' },
        { id: 'late', kind: 'stop' },
      ],
      links: [
        { from: 'start', to: 'wait' },
        { from: 'wait', to: 'seen' },
        { from: 'seen', to: 'done', when: "steps.visit.outcome = 'event' and steps.visit.output.payload.encounter = 'e-1'" },
        { from: 'seen', to: 'late' },
      ],
    });
    const runId = await fire(ws, triggerId, subjectOf('p-ev'));
    const worker = testWorker(env);
    await worker.drain();
    const at = clock.now().toISOString();
    const base = { workspaceId: ws.workspaceId, eventPayload: { encounter: 'e-1' }, at };
    expect(await wakeRunsWaitingFor(env.db, { ...base, subjectRecordId: otherId, event: 'Encounter.finished' })).toBe(0);
    expect(await wakeRunsWaitingFor(env.db, { ...base, subjectRecordId: subjectId, event: 'Encounter.created' })).toBe(0);
    const otherWs = await env.workspace();
    expect(await wakeRunsWaitingFor(env.db, { ...base, workspaceId: otherWs.workspaceId, subjectRecordId: subjectId, event: 'Encounter.finished' })).toBe(0);
    expect(await worker.drain()).toBe(0);
    expect(await wakeRunsWaitingFor(env.db, { ...base, subjectRecordId: subjectId, event: 'Encounter.finished' })).toBe(1);
    await worker.drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    const [step] = await getSteps(ws, runId);
    expect(step).toMatchObject({ outcome: 'event', output: { event: 'Encounter.finished', at, payload: { encounter: 'e-1' } } });
    // The wait is over: a second event finds no one waiting.
    expect(await wakeRunsWaitingFor(env.db, { ...base, subjectRecordId: subjectId, event: 'Encounter.finished' })).toBe(0);
  });

  it('wait_for_event: without an event the wait times out with outcome timeout', async () => {
    const ws = await env.workspace();
    await patient(env, ws, 'p-timeout');
    const { triggerId } = await webTriggerFor(ws, chain('Timeout', [
      { id: 'wait', automations: [{ id: 'visit', type: 'wait_for_event', with: { event: 'Encounter.finished', timeout: 'PT1H' } }] },
    ]));
    const runId = await fire(ws, triggerId, subjectOf('p-timeout'));
    const worker = testWorker(env);
    await worker.drain();
    clock.advance(3600_000);
    await worker.drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
    expect((await getSteps(ws, runId))[0]).toMatchObject({ outcome: 'timeout', output: null });
  });

  it('wait_for_event: an event that lands after the worker looked wins over the timeout', async () => {
    const ws = await env.workspace();
    const subjectId = await patient(env, ws, 'p-race');
    const { triggerId } = await webTriggerFor(ws, chain('Race', [
      { id: 'wait', automations: [{ id: 'visit', type: 'wait_for_event', with: { event: 'Encounter.finished', timeout: 'PT1M' } }] },
    ]));
    const runId = await fire(ws, triggerId, subjectOf('p-race'));
    await testWorker(env).drain();
    const at = clock.now().toISOString();
    await wakeRunsWaitingFor(env.db, { workspaceId: ws.workspaceId, subjectRecordId: subjectId, event: 'Encounter.finished', eventPayload: {}, at });
    // The timeout's write, as a worker that read no event would make it, asks for a new plan.
    if (waitForEventAutomation.mode !== 'wait') throw new Error('wait_for_event waits');
    const automation = { id: 'visit', type: 'wait_for_event' as const, with: { event: 'Encounter.finished', timeout: 'PT1M' } };
    const request = {
      run: { id: runId, workspaceId: ws.workspaceId, triggerId, payload: null, subject: null, subjectRecordId: null },
      nodeId: 'wait', automation, context: { payload: null, subject: null, steps: {}, vars: {} },
      expressions: new ExpressionCache(), now: clock.now(), stepKey: `${runId}:wait:visit`, mayTryAgain: async () => true, holdsLease: () => true,
    };
    const timeout = waitForEventAutomation.wake(request, { stepId: 'x', automationId: 'visit', attempt: 1, startedAt: at, dueAt: at, event: 'Encounter.finished' }, 'timeout');
    expect(timeout.alone).toBe(true);
    await expect(env.db.transaction().execute((tx) => timeout.write!(tx, at))).rejects.toBeInstanceOf(ReplanNeeded);
    clock.advance(120_000);
    await testWorker(env).drain();
    expect((await getSteps(ws, runId))[0].outcome).toBe('event');
  });

  it('wait_for_event on a run without a subject errors with a clear message', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('No subject wait', [
      { id: 'wait', automations: [{ id: 'visit', type: 'wait_for_event', with: { event: 'Encounter.finished' } }] },
    ]));
    const runId = await fire(ws, triggerId);
    await testWorker(env).drain();
    expect((await getRun(ws, runId)).error).toEqual({
      nodeId: 'wait',
      message: `wait_for_event needs the run's subject, and this run has none (a fired run takes it from payload.subject, {"reference": "Patient/<extId>"})`,
    });
  });

  it('a fired run whose payload.subject names no record says so, without repeating the reference', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, chain('Unknown subject', [
      { id: 'mark', automations: [{ id: 't', type: 'tag', with: { target: 'subject', add: ['x'] } }] },
    ]));
    const runId = await fire(ws, triggerId, subjectOf('mrn-0042-not-delivered'));
    await testWorker(env).drain();
    const run = await getRun(ws, runId);
    expect(run.automationStatus).toBe('errored');
    expect(run.error!.message).toBe(
      "tag needs the run's subject, and payload.subject names a patient that is not a record of this workspace (deliver the Patient first, or check the reference)",
    );
    expect(run.error!.message).not.toContain('mrn-0042');

    // A reference the fire does not read as a patient gave the run no subject to look for.
    const otherRunId = await fire(ws, triggerId, { subject: { reference: 'Practitioner/dr-1' } });
    await testWorker(env).drain();
    expect((await getRun(ws, otherRunId)).error!.message).toBe(
      `tag needs the run's subject, and this run has none (a fired run takes it from payload.subject, {"reference": "Patient/<extId>"})`,
    );
  });

  it('a run that ends while another branch waits closes that step and drops its event wait', async () => {
    const ws = await env.workspace();
    const subjectId = await patient(env, ws, 'p-stop-wait');
    const { triggerId } = await webTriggerFor(ws, {
      name: 'Stop while waiting',
      nodes: [
        { id: 'start', kind: 'start' },
        { id: 'wait', kind: 'action', automations: [{ id: 'visit', type: 'wait_for_event', with: { event: 'Encounter.finished' } }] },
        { id: 'halt', kind: 'action', automations: [{ id: 'x', type: 'stop', with: {} }] },
        { id: 'done', kind: 'end' },
      ],
      links: [{ from: 'start', to: 'wait' }, { from: 'start', to: 'halt' }, { from: 'wait', to: 'done' }, { from: 'halt', to: 'done' }],
    });
    const runId = await fire(ws, triggerId, subjectOf('p-stop-wait'));
    await testWorker(env).drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('stopped');
    expect((await getSteps(ws, runId)).map((s) => [s.automationId, s.outcome, s.error])).toEqual([
      ['visit', 'canceled', 'the run ended (stopped) before this step finished'],
      ['x', 'stopped', null],
    ]);
    const at = clock.now().toISOString();
    expect(await wakeRunsWaitingFor(env.db, { workspaceId: ws.workspaceId, subjectRecordId: subjectId, event: 'Encounter.finished', eventPayload: {}, at })).toBe(0);
  });

  it('a branch goes on while another waits; the run completes when the wait is due', async () => {
    const ws = await env.workspace();
    const { triggerId } = await webTriggerFor(ws, {
      name: 'Wait in parallel',
      nodes: [
        { id: 'start', kind: 'start' },
        { id: 'slow', kind: 'action', automations: [{ id: 'nap', type: 'wait', with: { duration: 'PT10M' } }] },
        { id: 'fast', kind: 'action', automations: [{ id: 'now', type: 'set', with: { vars: { x: '1' } } }] },
        { id: 'done', kind: 'end' },
      ],
      links: [{ from: 'start', to: 'slow' }, { from: 'start', to: 'fast' }, { from: 'slow', to: 'done' }, { from: 'fast', to: 'done' }],
    });
    const runId = await fire(ws, triggerId);
    const worker = testWorker(env);
    await worker.drain();
    expect((await getSteps(ws, runId)).map((s) => [s.automationId, s.outcome])).toEqual([['nap', null], ['now', 'ok']]);
    clock.advance(10 * 60_000);
    await worker.drain();
    expect((await getRun(ws, runId)).automationStatus).toBe('completed');
  });
}, { clock });
