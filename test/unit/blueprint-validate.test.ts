import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parseBlueprintFile } from '../../src/modules/blueprints/blueprint.parse.js';
import { BLUEPRINT_LIMITS, BlueprintError, validateBlueprint } from '../../src/modules/blueprints/blueprint.validate.js';
import { SHARED_EXAMPLE_BLUEPRINTS } from '../helpers/shared-files.js';

type Json = Record<string, any>;

/** The DESIGN §11 example: valid as it stands; each test breaks one thing. */
function postDischarge(): Json {
  return {
    name: 'Post-discharge follow-up',
    tags: ['discharge'],
    swimlanes: [{ id: 'care-team', name: 'Care team' }],
    nodes: [
      { id: 'start', kind: 'start' },
      { id: 'risk', kind: 'decision', name: 'High risk?' },
      {
        id: 'flag',
        kind: 'action',
        name: 'Flag for a call',
        swimlaneId: 'care-team',
        automations: [{ id: 'tag-it', type: 'tag', with: { target: 'subject', add: ['followup-call'] } }],
      },
      { id: 'wait', kind: 'action', automations: [{ id: 'two-days', type: 'wait', with: { duration: 'P2D' } }] },
      { id: 'done', kind: 'end' },
    ],
    links: [
      { from: 'start', to: 'risk' },
      { from: 'risk', to: 'flag', when: 'payload.riskScore > 5' },
      { from: 'risk', to: 'wait' },
      { from: 'flag', to: 'done' },
      { from: 'wait', to: 'done' },
    ],
  };
}

function node(blueprint: Json, id: string): Json {
  return blueprint.nodes.find((n: Json) => n.id === id);
}

/** A blueprint with one extra action node "extra" (between flag and done) running `automation`. */
function withAutomation(automation: Json): Json {
  const blueprint = postDischarge();
  blueprint.nodes.push({ id: 'extra', kind: 'action', automations: [{ id: 'auto', ...automation }] });
  blueprint.links.push({ from: 'flag', to: 'extra' }, { from: 'extra', to: 'done' });
  return blueprint;
}

function problemsOf(input: unknown): string[] {
  try {
    validateBlueprint(input);
  } catch (error) {
    if (error instanceof BlueprintError) return error.problems;
    throw error;
  }
  return [];
}

function expectProblem(input: unknown, expected: string | RegExp): void {
  const problems = problemsOf(input);
  const found = problems.some((p) => (typeof expected === 'string' ? p === expected : expected.test(p)));
  expect(found, `expected ${String(expected)} among:\n${problems.join('\n')}`).toBe(true);
}

function expectValid(input: unknown): void {
  expect(problemsOf(input)).toEqual([]);
}

describe('validateBlueprint accepts', () => {
  it('the DESIGN example, filling defaults', () => {
    const blueprint = validateBlueprint(postDischarge());
    expect(blueprint.name).toBe('Post-discharge follow-up');
    expect(node(blueprint, 'risk').automations).toEqual([]);
    expect(node(blueprint, 'flag').automations[0]).toEqual({
      id: 'tag-it',
      type: 'tag',
      with: { target: 'subject', add: ['followup-call'] },
    });
    expect(blueprint.links[1]).toEqual({ from: 'risk', to: 'flag', when: 'payload.riskScore > 5' });
    expect(blueprint.links[0]).toEqual({ from: 'start', to: 'risk' });
  });

  it('absent tags and swimlanes as empty lists', () => {
    const input = postDischarge();
    delete input.tags;
    delete input.swimlanes;
    delete node(input, 'flag').swimlaneId;
    const blueprint = validateBlueprint(input);
    expect(blueprint.tags).toEqual([]);
    expect(blueprint.swimlanes).toEqual([]);
  });

  it('returns a copy that shares nothing with its input', () => {
    const input = withAutomation({ type: 'http', with: { method: 'POST', url: 'https://example.org/x', body: { a: [1] } } });
    const blueprint = validateBlueprint(input);
    const automation = node(blueprint, 'extra').automations[0];
    automation.with.body.a.push(2);
    expect(node(input, 'extra').automations[0].with.body.a).toEqual([1]);
  });

  it('stop and cancel with an empty or absent with, filled as {}', () => {
    const blueprint = validateBlueprint(withAutomation({ type: 'stop' }));
    expect(node(blueprint, 'extra').automations[0]).toEqual({ id: 'auto', type: 'stop', with: {} });
    expectValid(withAutomation({ type: 'cancel', with: {} }));
  });

  it('a join: a node with several incoming links', () => {
    expectValid(postDischarge()); // "done" is reached from flag and from wait
  });
});

describe('validateBlueprint: the top level', () => {
  it('needs an object', () => {
    expect(problemsOf([])).toEqual(['a blueprint must be an object']);
    expect(problemsOf(null)).toEqual(['a blueprint must be an object']);
  });

  it('checks the name length', () => {
    const empty = postDischarge();
    empty.name = '';
    expectProblem(empty, 'name must be 1 to 200 characters of text');
    const long = postDischarge();
    long.name = 'x'.repeat(201);
    expectProblem(long, 'name must be 1 to 200 characters of text');
    const longest = postDischarge();
    longest.name = 'x'.repeat(200);
    expectValid(longest);
  });

  it('refuses text no store keeps (U+0000, unpaired surrogates) anywhere, naming the place', () => {
    const named = postDischarge();
    named.name = 'Nul\u0000Name';
    expectProblem(named, /^blueprint\.name holds the character U\+0000 or an unpaired UTF-16 surrogate/);
    const deep = postDischarge();
    (node(deep, 'flag').name as unknown) = 'x\ud800';
    expectProblem(deep, /^blueprint\.nodes\[\d+\]\.name holds the character U\+0000/);
    const emoji = postDischarge();
    emoji.name = 'Follow-up \u{1F600}';
    expectValid(emoji);
  });

  it('needs slug tags', () => {
    const input = postDischarge();
    input.tags = ['ok', 'Not A Slug', 'ok'];
    expectProblem(input, /^tags\[1\] must be a tag slug .*got "Not A Slug"$/);
    expectProblem(input, 'tags: "ok" is listed twice');
  });

  it('rejects unknown fields', () => {
    const input = postDischarge();
    input.version = 3;
    expectProblem(input, 'unknown top-level field "version"');
  });

  it('needs lists of nodes and links', () => {
    const input = postDischarge();
    input.nodes = {};
    delete input.links;
    expectProblem(input, 'nodes must be a list');
    expectProblem(input, 'links must be a list');
  });

  it('reports every problem at once, joined in the message', () => {
    const input = postDischarge();
    input.name = '';
    input.extra = true;
    node(input, 'flag').automations[0].with.target = 'patient';
    input.links.push({ from: 'risk', to: 'nowhere' });
    let error: BlueprintError | undefined;
    try {
      validateBlueprint(input);
    } catch (caught) {
      error = caught as BlueprintError;
    }
    expect(error).toBeInstanceOf(BlueprintError);
    expect(error!.problems).toHaveLength(4);
    expect(error!.message).toBe(error!.problems.join('\n'));
  });
});

describe('validateBlueprint: nodes', () => {
  it('rejects unknown node fields', () => {
    const input = postDischarge();
    node(input, 'flag').colour = 'red';
    expectProblem(input, 'node "flag": unknown field "colour"');
  });

  it('needs ids of 1 to 100 characters', () => {
    const input = postDischarge();
    input.nodes.push({ id: '', kind: 'end' }, { id: 'x'.repeat(101), kind: 'end' }, { id: 7, kind: 'end' });
    expectProblem(input, 'node 6: id must be text of 1 to 100 characters');
    expectProblem(input, 'node 7: id must be text of 1 to 100 characters');
    expectProblem(input, 'node 8: id must be text of 1 to 100 characters');
  });

  it('needs unique ids', () => {
    const input = postDischarge();
    input.nodes.push({ id: 'flag', kind: 'end' });
    expectProblem(input, 'node "flag": duplicate id');
  });

  it('needs a known kind', () => {
    const input = postDischarge();
    node(input, 'wait').kind = 'task';
    expectProblem(input, 'node "wait": kind must be one of start, action, decision, end, stop, got "task"');
  });

  it('needs a name of text when it has one', () => {
    const input = postDischarge();
    node(input, 'risk').name = '';
    expectProblem(input, 'node "risk": name must be 1 to 200 characters of text');
  });

  it('lets decision, start, end and stop nodes carry no automations', () => {
    const input = postDischarge();
    node(input, 'risk').automations = [{ id: 'x', type: 'stop' }];
    node(input, 'start').automations = [{ id: 'y', type: 'stop' }];
    node(input, 'done').automations = [{ id: 'z', type: 'stop' }];
    expectProblem(input, 'node "risk": a decision node carries no automations');
    expectProblem(input, 'node "start": a start node carries no automations');
    expectProblem(input, 'node "done": an end node carries no automations');
    const empty = postDischarge();
    node(empty, 'risk').automations = [];
    expectValid(empty);
  });
});

describe('validateBlueprint: swimlanes', () => {
  it('needs unique ids and names', () => {
    const input = postDischarge();
    input.swimlanes.push({ id: 'care-team', name: 'Again' }, { id: 'gp' });
    expectProblem(input, 'swimlane "care-team": duplicate id');
    expectProblem(input, 'swimlane "gp": name must be 1 to 200 characters of text');
  });

  it('needs swimlaneId to name a swimlane', () => {
    const input = postDischarge();
    node(input, 'flag').swimlaneId = 'pharmacy';
    expectProblem(input, `node "flag": swimlaneId "pharmacy" is not one of the blueprint's swimlanes`);
  });
});

describe('validateBlueprint: links', () => {
  it('needs known nodes at both ends', () => {
    const input = postDischarge();
    input.links[2] = { from: 'risk', to: 'nowhere' };
    expectProblem(input, 'link 3 (risk → nowhere): unknown node "nowhere"');
    input.links[2] = { from: 'somewhere', to: 'wait' };
    expectProblem(input, 'link 3 (somewhere → wait): unknown node "somewhere"');
  });

  it('needs node ids as text', () => {
    const input = postDischarge();
    input.links.push({ from: 1, to: 'done' });
    expectProblem(input, 'link 6 (? → done): from must be a node id');
  });

  it('rejects unknown link fields', () => {
    const input = postDischarge();
    input.links[0].label = 'go';
    expectProblem(input, 'link 1 (start → risk): unknown field "label"');
  });

  it('rejects a second link between the same two nodes', () => {
    const input = postDischarge();
    input.links.push({ from: 'risk', to: 'flag' });
    expectProblem(input, 'link 6 (risk → flag): duplicates link 2');
  });

  it('needs when to compile', () => {
    const input = postDischarge();
    input.links[1].when = 'payload.riskScore >';
    expectProblem(input, /^link 2 \(risk → flag\): when does not compile: line 1, column 20: /);
  });

  it('needs when to name functions that exist', () => {
    const input = postDischarge();
    input.links[1].when = 'payload.riskScore.exist()';
    expectProblem(input, 'link 2 (risk → flag): when fails even on an empty run context: Not implemented: exist');
  });

  it('refuses a when whose path starts outside the run context (it is empty in every run), not inside a function', () => {
    const input = postDischarge();
    input.links[1].when = 'riskScore > 5';
    expectProblem(
      input,
      'link 2 (risk → flag): when reads riskScore at the top, where the run context has payload, subject, steps and vars only, so it is empty in every run; start the path at one of them (payload.riskScore…)',
    );
    input.links[1].when = "payload.riskScore > 5 and (Patient.gender = 'female')";
    expectProblem(input, /^link 2 \(risk → flag\): when reads Patient at the top/);
    // Names inside a function's arguments are read from each item, not from the root.
    input.links[1].when = "payload.labs.where(code = 'x' and value > 5).exists() and subject.tags contains 'copd' and vars.n > 1 and steps.`tag-it`.outcome = 'ok'";
    expect(() => validateBlueprint(input)).not.toThrow();
    input.links[1].when = "today() > @2020-01-01 and 'a' = 'a'";
    expect(() => validateBlueprint(input)).not.toThrow();
  });

  it('refuses a hyphenated name written bare (FHIRPath reads a subtraction), and takes it in backticks', () => {
    const input = postDischarge();
    input.links[1].when = "steps.tag-it.outcome = 'ok'";
    expectProblem(input, 'link 2 (risk → flag): when reads steps.tag-it as "steps.tag - it" (FHIRPath subtracts); write the name in backticks: steps.`tag-it`');
    input.links[1].when = "steps.`tag-it`.outcome = 'ok' and payload.riskScore - 1 > 4 and payload.note != 'a.b-c'";
    expect(() => validateBlueprint(input)).not.toThrow();
    // After steps. comes an automation id, even when a digit follows its hyphen; elsewhere that is arithmetic.
    input.links[1].when = "steps.t-1.outcome = 'ok'";
    expectProblem(input, 'link 2 (risk → flag): when reads steps.t-1 as "steps.t - 1" (FHIRPath subtracts); write the name in backticks: steps.`t-1`');
    input.links[1].when = "steps.check-2b.outcome = 'ok'";
    expectProblem(input, 'link 2 (risk → flag): when reads steps.check-2b as "steps.check - 2b" (FHIRPath subtracts); write the name in backticks: steps.`check-2b`');
    input.links[1].when = "payload.count-1 > 4 and steps.`t-1`.outcome = 'ok' and payload.steps.x-1 > 0";
    expect(() => validateBlueprint(input)).not.toThrow();
  });

  it('refuses a pattern written in when that the linear-time engine cannot run, and takes one it can', () => {
    const input = postDischarge();
    input.links[1].when = "payload.diagnosis.matches('^E11(?!9)')";
    expectProblem(input, /^link 2 \(risk → flag\): when matches\(\): regular expression "\^E11\(\?!9\)" is not supported: invalid or unsupported Perl syntax/);
    input.links[1].when = "payload.diagnosis.matches('^E11\\.[0-8]')";
    expect(() => validateBlueprint(input)).not.toThrow();
  });

  it('refuses a when that gives several items even on an empty run context: it could never hold', () => {
    const input = postDischarge();
    input.links[1].when = "'high' | 'low'";
    expectProblem(input, 'link 2 (risk → flag): when can never hold: it gave 2 items where a single Boolean was expected');
  });

  it('refuses a when that gives one item that is not a Boolean even on an empty run context: it would always hold', () => {
    const input = postDischarge();
    for (const when of ["'high'", '8', 'today()']) {
      input.links[1].when = when;
      expectProblem(input, /^link 2 \(risk → flag\): when always holds: it gives a (string|number), not true or false, even with no data/);
    }
    // A path empty on an empty context, a comparison and a test stay what they are.
    // `subject` and `payload` alone are null in a run without them: tests, not constants.
    for (const when of ['payload.risk', "payload.risk = 'high'", 'payload.risk.exists()', 'true', 'subject', 'payload']) {
      input.links[1].when = when;
      expect(() => validateBlueprint(input)).not.toThrow();
    }
  });

  it('needs when to be text', () => {
    const input = postDischarge();
    input.links[1].when = true;
    expectProblem(input, 'link 2 (risk → flag): when must be a FHIRPath expression');
  });
});

describe('validateBlueprint: the graph', () => {
  it('needs a start node', () => {
    const input = postDischarge();
    input.nodes[0].kind = 'action';
    expectProblem(input, 'the blueprint needs a start node');
  });

  it('needs exactly one start node', () => {
    const input = postDischarge();
    input.nodes.push({ id: 'start-2', kind: 'start' });
    input.links.push({ from: 'start-2', to: 'done' });
    expectProblem(input, 'the blueprint has 2 start nodes ("start", "start-2"); it needs exactly one');
  });

  it('lets no link enter the start node', () => {
    const input = postDischarge();
    input.links.push({ from: 'wait', to: 'start' });
    expectProblem(input, 'link 6 (wait → start): a start node takes no incoming links');
  });

  it('lets no link leave an end or stop node', () => {
    const input = postDischarge();
    input.nodes.push({ id: 'halt', kind: 'stop' }, { id: 'after', kind: 'end' });
    input.links.push({ from: 'risk', to: 'halt' }, { from: 'halt', to: 'after' }, { from: 'done', to: 'after' });
    expectProblem(input, 'link 7 (halt → after): a stop node has no outgoing links');
    expectProblem(input, 'link 8 (done → after): an end node has no outgoing links');
  });

  it('needs an outgoing link from start, action and decision nodes', () => {
    const input = postDischarge();
    input.nodes.push({ id: 'choose', kind: 'decision' }, { id: 'act', kind: 'action' });
    input.links.push({ from: 'wait', to: 'choose' }, { from: 'wait', to: 'act' });
    expectProblem(input, 'node "choose": a decision node needs at least one outgoing link');
    expectProblem(input, 'node "act": an action node needs at least one outgoing link');
    const lonely = { name: 'Lonely', nodes: [{ id: 'start', kind: 'start' }], links: [] };
    expectProblem(lonely, 'node "start": a start node needs at least one outgoing link');
  });

  it('rejects a cycle, naming its nodes', () => {
    const input = postDischarge();
    input.links.push({ from: 'wait', to: 'risk' });
    expectProblem(input, 'nodes form a cycle: risk → wait → risk (pathways may not loop)');
  });

  it('rejects a node linked to itself', () => {
    const input = postDischarge();
    input.links.push({ from: 'flag', to: 'flag' });
    expectProblem(input, 'nodes form a cycle: flag → flag (pathways may not loop)');
  });

  it('needs every node reachable from the start', () => {
    const input = postDischarge();
    input.nodes.push(
      { id: 'island', kind: 'action', automations: [{ id: 'i', type: 'stop' }] },
      { id: 'island-end', kind: 'end' },
    );
    input.links.push({ from: 'island', to: 'island-end' });
    expectProblem(input, 'node "island": not reachable from the start node');
    expectProblem(input, 'node "island-end": not reachable from the start node');
  });

  const chainOf = (count: number) => {
    const nodes: Record<string, unknown>[] = [{ id: 'start', kind: 'start' }];
    const links: Record<string, unknown>[] = [];
    for (let i = 1; i < count; i++) {
      nodes.push({ id: `n${i}`, kind: i === count - 1 ? 'end' : 'action' });
      links.push({ from: i === 1 ? 'start' : `n${i - 1}`, to: `n${i}` });
    }
    return { name: 'Long', nodes, links };
  };

  it('takes a chain as long as the limit allows, and refuses a longer one naming the count', () => {
    expectValid(chainOf(BLUEPRINT_LIMITS.nodes));
    expectProblem(chainOf(BLUEPRINT_LIMITS.nodes + 1), `nodes: ${BLUEPRINT_LIMITS.nodes + 1}, at most ${BLUEPRINT_LIMITS.nodes}`);
    // A resource review: 20,000 nodes ran at 17 steps a second and held the worker for minutes.
    expectProblem(chainOf(20_000), 'nodes: 20000, at most 500');
  });

  it('refuses too many links, swimlanes or automations in a node, and nesting deeper than a JSON body may', () => {
    const dense = chainOf(3);
    dense.links = Array.from({ length: BLUEPRINT_LIMITS.links + 1 }, () => ({ from: 'start', to: 'n1' }));
    expectProblem(dense, `links: ${BLUEPRINT_LIMITS.links + 1}, at most ${BLUEPRINT_LIMITS.links}`);
    const lanes = { ...chainOf(3), swimlanes: Array.from({ length: 101 }, (_, i) => ({ id: `l${i}`, name: `Lane ${i}` })) };
    expectProblem(lanes, 'swimlanes: 101, at most 100');
    const busy = chainOf(3);
    busy.nodes[1].automations = Array.from({ length: 26 }, (_, i) => ({ id: `a${i}`, type: 'stop' }));
    expectProblem(busy, 'node "n1": automations: 26, at most 25');
    const deep = withAutomation({ type: 'http', with: { method: 'POST', url: 'https://example.org/x', body: {} } });
    let level: Record<string, unknown> = node(deep, 'extra').automations[0].with.body;
    for (let i = 0; i < 5000; i++) level = level.next = {};
    expectProblem(deep, 'the blueprint nests objects and lists deeper than 100 levels');
  });
});

describe('validateBlueprint: automations', () => {
  it('needs automation ids unique across the blueprint', () => {
    const input = withAutomation({ type: 'stop' });
    node(input, 'extra').automations[0].id = 'tag-it';
    expectProblem(input, 'node "extra": automation "tag-it": duplicate id (already used in node "flag")');
  });

  it('needs an id', () => {
    const input = withAutomation({ type: 'stop' });
    delete node(input, 'extra').automations[0].id;
    expectProblem(input, 'node "extra": automation 1: id must be text of 1 to 100 characters');
  });

  it('rejects unknown automation fields', () => {
    expectProblem(withAutomation({ type: 'stop', retries: 3 }), 'node "extra": automation "auto": unknown field "retries"');
  });

  it('needs a known type', () => {
    expectProblem(
      withAutomation({ type: 'email', with: {} }),
      'node "extra": automation "auto": type must be one of wait, wait_for_event, tag, set, http, start_pathway, fail, stop, cancel, got "email"',
    );
  });

  it('needs with to be an object', () => {
    expectProblem(withAutomation({ type: 'tag', with: 'subject' }), 'node "extra": automation "auto": with must be an object');
    expectProblem(withAutomation({ type: 'tag' }), 'node "extra": automation "auto": with is required for a tag automation');
  });

  it('rejects unknown with fields', () => {
    expectProblem(
      withAutomation({ type: 'wait', with: { duration: 'PT1M', durration: 'PT2M' } }),
      'node "extra": automation "auto": with: unknown field "durration" for a wait automation',
    );
  });

  describe('placeholders in with', () => {
    it('may stand in any setting: import checks their expressions, the step checks the filled value', () => {
      for (const automation of [
        { type: 'tag', with: { target: 'subject', add: ['lab-{{payload.code}}'], remove: ['{{payload.old}}'] } },
        { type: 'wait', with: { duration: '{{payload.delay}}' } },
        { type: 'wait', with: { until: '{{payload.at}}', timezone: '{{payload.zone}}' } },
        { type: 'wait_for_event', with: { event: '{{payload.event}}', timeout: '{{payload.timeout}}' } },
        { type: 'start_pathway', with: { triggerId: '{{payload.next}}' } },
        { type: 'http', with: { method: '{{payload.method}}', url: 'https://lab.example/x', timeoutMs: '{{payload.ms}}' } },
      ]) {
        expect(() => validateBlueprint(withAutomation(automation)), JSON.stringify(automation)).not.toThrow();
      }
      expectProblem(withAutomation({ type: 'wait', with: { duration: '{{payload.delay(}}' } }), /with\.duration: placeholder \{\{ payload\.delay\( \}\} does not compile/);
    });
    it('must compile', () => {
      expectProblem(
        withAutomation({ type: 'http', with: { method: 'POST', url: 'https://example.org', body: { patient: { id: '{{ subject. }}' } } } }),
        /^node "extra": automation "auto": with\.body\.patient\.id: placeholder \{\{ subject\. \}\} does not compile: line 1, column 9: /,
      );
    });

    it('must name functions that exist, wherever they sit', () => {
      expectProblem(
        withAutomation({ type: 'fail', with: { message: 'risk {{ payload.riskScore.toInteger() }} {{ payload.nope() }}' } }),
        'node "extra": automation "auto": with.message: placeholder {{ payload.nope() }} fails even on an empty run context: Not implemented: nope',
      );
    });

    it('must start their paths in the run context', () => {
      expectProblem(
        withAutomation({ type: 'fail', with: { message: 'risk {{ payload.riskScore }} for {{ patient.name }}' } }),
        'node "extra": automation "auto": with.message: placeholder {{ patient.name }} reads patient at the top, where the run context has payload, subject, steps and vars only, so it is empty in every run; start the path at one of them (payload.patient…)',
      );
    });

    it('must not be empty', () => {
      expectProblem(
        withAutomation({ type: 'http', with: { method: 'POST', url: 'https://example.org', body: ['{{ }}'] } }),
        'node "extra": automation "auto": with.body[0]: placeholder {{ }} is empty',
      );
    });
  });

  describe('wait', () => {
    const at = 'node "extra": automation "auto": ';
    it('accepts a duration, or until with a time zone', () => {
      expectValid(withAutomation({ type: 'wait', with: { duration: 'PT1M' } }));
      expectValid(withAutomation({ type: 'wait', with: { until: '08:30', timezone: 'Europe/Paris' } }));
      expectValid(withAutomation({ type: 'wait', with: { until: '23:59:59', timezone: 'America/New_York' } }));
    });

    it('needs exactly one of the two forms', () => {
      expectProblem(withAutomation({ type: 'wait', with: {} }), `${at}with needs duration, or until with timezone`);
      expectProblem(
        withAutomation({ type: 'wait', with: { duration: 'PT1M', until: '08:00', timezone: 'UTC' } }),
        `${at}with must have either duration or until with timezone, not both`,
      );
    });

    it('needs an ISO 8601 duration longer than zero with no negative part', () => {
      // P-1M30DT1H: luxon counts the month as 30 days, "positive", and the wait ended 23 h before it began.
      for (const duration of ['2 days', 'PT0S', '-P1D', 'p1d', 5, 'P-1M30DT1H', 'P1DT-1H', 'P0.00000001D']) {
        expectProblem(
          withAutomation({ type: 'wait', with: { duration } }),
          `${at}with.duration must be an ISO 8601 duration longer than zero with no negative part, such as PT1M or P2D, got ${JSON.stringify(duration)}`,
        );
      }
      expectProblem(withAutomation({ type: 'wait_for_event', with: { event: 'Encounter.finished', timeout: 'P1MT-1H' } }), /with\.timeout must be an ISO 8601 duration longer than zero with no negative part/);
      for (const duration of ['PT0.5S', 'P1M', 'P1Y2M3W4DT5H6M7.5S']) expectValid(withAutomation({ type: 'wait', with: { duration } }));
    });

    it('needs a local time and a valid time zone', () => {
      expectProblem(withAutomation({ type: 'wait', with: { until: '24:00', timezone: 'UTC' } }), `${at}with.until must be a local time HH:MM or HH:MM:SS, got "24:00"`);
      expectProblem(withAutomation({ type: 'wait', with: { until: '8:00', timezone: 'UTC' } }), `${at}with.until must be a local time HH:MM or HH:MM:SS, got "8:00"`);
      expectProblem(
        withAutomation({ type: 'wait', with: { until: '08:00', timezone: 'Mars/Olympus' } }),
        `${at}with.timezone must be an IANA time zone such as Europe/Paris, got "Mars/Olympus"`,
      );
      expectProblem(withAutomation({ type: 'wait', with: { until: '08:00' } }), `${at}with.timezone is required with until`);
      expectProblem(withAutomation({ type: 'wait', with: { timezone: 'UTC' } }), `${at}with.until is required with timezone`);
    });
  });

  describe('wait_for_event', () => {
    const at = 'node "extra": automation "auto": ';
    it('accepts an event with an optional timeout', () => {
      expectValid(withAutomation({ type: 'wait_for_event', with: { event: 'Encounter.finished', timeout: 'P30D' } }));
      expectValid(withAutomation({ type: 'wait_for_event', with: { event: 'Observation.entered-in-error' } }));
    });

    it('needs an event name like Type.word, and names a near miss', () => {
      for (const event of ['Encounter', 'Encounter finished', 42]) {
        expectProblem(
          withAutomation({ type: 'wait_for_event', with: { event } }),
          `${at}with.event must be an event name such as Encounter.finished, got ${JSON.stringify(event)}`,
        );
      }
      expectProblem(withAutomation({ type: 'wait_for_event', with: { event: 'encounter.finished' } }), new RegExp(`^${at}with\\.event .*names are case-sensitive: Encounter$`));
    });

    it('refuses a well-formed event carepath never raises, naming the node', () => {
      expectProblem(
        withAutomation({ type: 'wait_for_event', with: { event: 'Encounter.done', timeout: 'P30D' } }),
        `${at}with.event Encounter has no status "done": its events are created, updated, deleted, planned, arrived, triaged, in-progress, onleave, finished, cancelled, entered-in-error, unknown`,
      );
      expectProblem(
        withAutomation({ type: 'wait_for_event', with: { event: 'Visit.finished' } }),
        `${at}with.event "Visit" is not a FHIR R4 resource type (see GET /v1/events/catalog)`,
      );
    });

    it('refuses Patient.deleted, which is raised for no subject and so never wakes a wait; takes other deletions', () => {
      expectProblem(
        withAutomation({ type: 'wait_for_event', with: { event: 'Patient.deleted', timeout: 'P1D' } }),
        `${at}with.event Patient.deleted is raised for no subject (the record goes with the Patient), so it never wakes a wait; a trigger on it starts runs`,
      );
      expectValid(withAutomation({ type: 'wait_for_event', with: { event: 'Encounter.deleted', timeout: 'P1D' } }));
    });

    it('refuses events of types that never belong to a patient; takes types that name one by subject, patient, beneficiary or participant', () => {
      expectProblem(
        withAutomation({ type: 'wait_for_event', with: { event: 'Practitioner.updated', timeout: 'P1D' } }),
        `${at}with.event Practitioner.updated is raised for no subject (a Practitioner has no subject, patient, beneficiary, individual or participant.actor reference: it belongs to no patient), so it never wakes a wait; a trigger on it starts runs`,
      );
      expectProblem(
        withAutomation({ type: 'wait_for_event', with: { event: 'Organization.created', timeout: 'P1D' } }),
        /with\.event Organization\.created is raised for no subject/,
      );
      expectProblem(withAutomation({ type: 'wait_for_event', with: { event: 'Medication.active' } }), /Medication\.active is raised for no subject/);
      // Account's subject is a list, which the ingestion does not read a patient from.
      expectProblem(withAutomation({ type: 'wait_for_event', with: { event: 'Account.updated' } }), /Account\.updated is raised for no subject \(an Account has no/);
      for (const event of ['Observation.final', 'AllergyIntolerance.created', 'Coverage.active', 'Appointment.booked', 'Device.active', 'Patient.updated']) {
        expectValid(withAutomation({ type: 'wait_for_event', with: { event, timeout: 'P1D' } }));
      }
    });

    it('needs the timeout to be a duration', () => {
      expectProblem(
        withAutomation({ type: 'wait_for_event', with: { event: 'Encounter.finished', timeout: '30 days' } }),
        /^node "extra": automation "auto": with\.timeout must be an ISO 8601 duration/,
      );
    });
  });

  describe('tag', () => {
    it('needs subject or pathway as the target', () => {
      const input = postDischarge();
      node(input, 'flag').automations[0].with.target = 'patient';
      expectProblem(input, 'node "flag": automation "tag-it": with.target must be "subject" or "pathway", got "patient"');
    });

    it('needs add or remove', () => {
      expectProblem(withAutomation({ type: 'tag', with: { target: 'pathway' } }), 'node "extra": automation "auto": with needs add or remove');
      expectProblem(
        withAutomation({ type: 'tag', with: { target: 'pathway', add: [], remove: [] } }),
        'node "extra": automation "auto": with.add and with.remove are both empty',
      );
      expectValid(withAutomation({ type: 'tag', with: { target: 'pathway', remove: ['x'] } }));
    });

    it('refuses one empty list with the other left out, which changes nothing (a list left out is [])', () => {
      expectProblem(
        withAutomation({ type: 'tag', with: { target: 'pathway', add: [] } }),
        'node "extra": automation "auto": with.add is empty (and the other list left out): the step would change nothing',
      );
      expectProblem(
        withAutomation({ type: 'tag', with: { target: 'subject', remove: [] } }),
        'node "extra": automation "auto": with.remove is empty (and the other list left out): the step would change nothing',
      );
    });

    it('needs slugs', () => {
      expectProblem(
        withAutomation({ type: 'tag', with: { target: 'subject', add: ['ok', 'Bad Tag'] } }),
        /^node "extra": automation "auto": with\.add\[1\] must be a tag slug .*got "Bad Tag"$/,
      );
      expectProblem(withAutomation({ type: 'tag', with: { target: 'subject', remove: 'x' } }), 'node "extra": automation "auto": with.remove must be a list of tags');
    });

    it('rejects a tag both added and removed', () => {
      expectProblem(
        withAutomation({ type: 'tag', with: { target: 'subject', add: ['x'], remove: ['x'] } }),
        'node "extra": automation "auto": with: tag "x" is both added and removed',
      );
    });
  });

  describe('set', () => {
    const at = 'node "extra": automation "auto": ';
    it('accepts variables set from FHIRPath', () => {
      expectValid(withAutomation({ type: 'set', with: { vars: { score: 'payload.riskScore * 2', _since: 'now()' } } }));
    });

    it('needs valid names', () => {
      expectProblem(
        withAutomation({ type: 'set', with: { vars: { '2nd': 'true', 'a-b': 'true' } } }),
        `${at}with.vars: "2nd" is not a valid variable name (letters, digits and _, not first a digit)`,
      );
      expectProblem(
        withAutomation({ type: 'set', with: { vars: { 'a-b': 'true' } } }),
        /with\.vars: "a-b" is not a valid variable name/,
      );
    });

    it('needs expressions that compile', () => {
      expectProblem(
        withAutomation({ type: 'set', with: { vars: { score: 'payload.riskScore *' } } }),
        /^node "extra": automation "auto": with\.vars\.score does not compile: /,
      );
      expectProblem(withAutomation({ type: 'set', with: { vars: { score: 3 } } }), `${at}with.vars.score must be a FHIRPath expression`);
    });

    it('needs at least one variable in an object', () => {
      expectProblem(withAutomation({ type: 'set', with: { vars: {} } }), `${at}with.vars must set at least one variable`);
      expectProblem(withAutomation({ type: 'set', with: { vars: ['a'] } }), /with\.vars must be an object/);
    });
  });

  describe('http', () => {
    const at = 'node "extra": automation "auto": ';
    const http = (overrides: Json) => withAutomation({ type: 'http', with: { method: 'POST', url: 'https://example.org/hook', ...overrides } });

    it('accepts a request with placeholders in url, headers and body', () => {
      expectValid(
        http({
          url: 'https://{{ vars.host }}/patients/{{ subject.extId }}',
          headers: { Authorization: 'Bearer {{ vars.token }}' },
          body: { score: '{{ payload.riskScore }}' },
          timeoutMs: 60_000,
        }),
      );
    });

    it('needs a known method', () => {
      expectProblem(http({ method: 'post' }), `${at}with.method must be one of GET, POST, PUT, PATCH, DELETE, got "post"`);
    });

    it('needs an http or https URL', () => {
      for (const url of ['ftp://example.org/x', 'example.org/x', '{{ vars.url }}', 42]) {
        expectProblem(http({ url }), `${at}with.url must be an http or https URL`);
      }
    });

    it('needs headers of text', () => {
      expectProblem(http({ headers: { 'X-Count': 3 } }), `${at}with.headers.X-Count must be text`);
      expectProblem(http({ headers: { 'Bad Header': 'x' } }), `${at}with.headers: "Bad Header" is not a valid header name`);
      expectProblem(http({ headers: ['x'] }), /with\.headers must be an object/);
    });

    it('refuses the headers the service sets: Host (the allow-list checks the URL\'s host) and the framing and proxy ones', () => {
      expectProblem(
        http({ headers: { Host: '{{ payload.h }}' } }),
        `${at}with.headers: "Host" is set from the URL, so the host the allow-list checks is the one called; write the host in with.url`,
      );
      for (const name of ['content-length', 'Transfer-Encoding', 'connection', 'Keep-Alive', 'upgrade', 'TE', 'trailer', 'expect', 'Proxy-Authorization', 'proxy-connection']) {
        expectProblem(http({ headers: { [name]: 'x' } }), `${at}with.headers: "${name}" is set by the service (it frames the request or speaks to a proxy) and cannot be written`);
      }
      for (const name of ['X-Forwarded-Host', 'x-forwarded-for', 'Forwarded', 'Via', 'max-forwards']) {
        expectProblem(
          http({ headers: { [name]: 'x' } }),
          `${at}with.headers: "${name}" is for the proxies on the way to set (it can choose the host or address a partner's ingress routes to) and cannot be written`,
        );
      }
      // Names that merely start like them are the blueprint's own.
      expectValid(http({ headers: { 'X-Host': 'a', Hostname: 'b', 'Content-Type': 'text/plain', Authorization: 'Bearer x' } }));
    });

    it('refuses a header value written with a line break or another character a header cannot carry', () => {
      const cannot = 'holds a character a header cannot carry (a line break, a control character, or one beyond U+00FF)';
      for (const value of ['a\r\nX-Injected: 1', 'a\nb', 'nul\u0000', 'euro €']) {
        expectProblem(http({ headers: { 'X-A': value } }), `${at}with.headers.X-A ${cannot}`);
      }
      expectProblem(http({ headers: { 'X-A': '{{ payload.a }}\r\n' } }), `${at}with.headers.X-A ${cannot}`);
      for (const value of ['tab\there', 'café', 'Bearer {{ payload.token }}', '{{ payload.a\n + payload.b }}']) {
        expect(() => validateBlueprint(http({ headers: { 'X-A': value } }) as never)).not.toThrow();
      }
    });

    it('needs a timeout from 1 to 60000 ms', () => {
      for (const timeoutMs of [0, 60_001, 1.5, '100']) {
        expectProblem(http({ timeoutMs }), `${at}with.timeoutMs must be a whole number from 1 to 60000`);
      }
    });

    it('takes workspace secrets in header values, written as ${secrets.NAME}', () => {
      expectValid(http({ headers: { Authorization: 'Bearer ${secrets.LAB_TOKEN}', 'X-Pair': '${secrets.ID}:${secrets.KEY_2}' } }));
      expectProblem(http({ headers: { Authorization: 'Bearer ${secrets.2FA}' } }), `${at}with.headers.Authorization: "2FA" is not a secret name (letters, digits and _, up to 64, not starting with a digit)`);
      expectProblem(http({ headers: { Authorization: 'Bearer ${secrets.LAB_TOKEN' } }), `${at}with.headers.Authorization: write a secret as \${secrets.NAME}`);
      // Data must never decide which secret is sent: no placeholders beside a secret.
      expectProblem(
        http({ headers: { Authorization: '${secrets.LAB_TOKEN} {{ payload.who }}' } }),
        `${at}with.headers.Authorization: a header that names a secret takes no {{ }} placeholders`,
      );
    });

    it('sends a secret only to a host written in the blueprint: no placeholder before the path', () => {
      const headers = { Authorization: 'Bearer ${secrets.LAB_TOKEN}' };
      const refused = `${at}with.url: an http automation that sends a secret must name its host as written, with {{ }} placeholders only after it (in the path or query), so no run's data can choose where the secret goes`;
      for (const url of ['http://{{ payload.partnerHost }}/results', 'https://lab.example{{ payload.suffix }}/r', 'https://lab.example:{{ payload.port }}/r', '{{ payload.url }}', 'https://{{ payload.a / 2 }}.example/r']) {
        expectProblem(http({ url, headers }), refused);
      }
      expectValid(http({ url: 'https://lab.example/patients/{{ payload.id }}?since={{ vars.since }}', headers }));
      expectValid(http({ url: 'https://lab.example:8443', headers }));
      // Without a secret, data may choose the host (the allow-list still holds).
      expectValid(http({ url: 'https://{{ payload.partnerHost }}/results' }));
    });

    it('refuses secrets anywhere but in http headers', () => {
      expectProblem(http({ url: 'https://example.org/?key=${secrets.LAB_TOKEN}' }), `${at}with.url: secrets (\${secrets.NAME}) may be used in http headers only`);
      expectProblem(http({ body: { token: '${secrets.LAB_TOKEN}' } }), `${at}with.body.token: secrets (\${secrets.NAME}) may be used in http headers only`);
      expectProblem(
        withAutomation({ type: 'set', with: { vars: { leaked: "'${secrets.LAB_TOKEN}'" } } }),
        `${at}with.vars.leaked: secrets (\${secrets.NAME}) may be used in http headers only`,
      );
    });
  });

  describe('start_pathway, fail, stop, cancel', () => {
    const at = 'node "extra": automation "auto": ';
    it('start_pathway needs a trigger UUID', () => {
      expectValid(withAutomation({ type: 'start_pathway', with: { triggerId: '0190f5a2-7c1e-7000-8000-000000000001', payload: { a: 1 } } }));
      expectProblem(withAutomation({ type: 'start_pathway', with: { triggerId: 'trigger-1' } }), `${at}with.triggerId must be a trigger id (a UUID), got "trigger-1"`);
    });

    it('fail needs a message', () => {
      expectValid(withAutomation({ type: 'fail', with: { message: 'No consent for {{ subject.extId }}' } }));
      expectProblem(withAutomation({ type: 'fail', with: {} }), `${at}with.message must be a non-empty text`);
    });

    it('stop and cancel take nothing', () => {
      expectProblem(withAutomation({ type: 'stop', with: { reason: 'x' } }), `${at}with must be empty for a stop automation, found "reason"`);
      expectProblem(withAutomation({ type: 'cancel', with: { reason: 'x' } }), `${at}with must be empty for a cancel automation, found "reason"`);
    });
  });
});

const SHARED_EXAMPLES = SHARED_EXAMPLE_BLUEPRINTS;

describe.skipIf(!existsSync(SHARED_EXAMPLES))('the shared example blueprints', () => {
  const files = existsSync(SHARED_EXAMPLES) ? readdirSync(SHARED_EXAMPLES).filter((f) => f.endsWith('.json')) : [];
  it.each(files)('%s validates', (file) => {
    const text = readFileSync(`${SHARED_EXAMPLES}/${file}`, 'utf8');
    expect(() => validateBlueprint(parseBlueprintFile(text, file))).not.toThrow();
  });
});

describe('the blueprints this project ships', () => {
  const folder = fileURLToPath(new URL('../../blueprints/', import.meta.url));
  const files = readdirSync(folder).filter((f) => f.endsWith('.json'));

  it('are at least three', () => {
    expect(files.length).toBeGreaterThanOrEqual(3);
  });

  it.each(files)('%s validates', (file) => {
    const blueprint = validateBlueprint(parseBlueprintFile(readFileSync(folder + file, 'utf8'), file));
    const types = blueprint.nodes.flatMap((n) => n.automations.map((a) => a.type));
    // Seeded into the demo workspace: nothing that calls out to a host that may not exist.
    expect(types).not.toContain('http');
  });
});

describe('parseBlueprintFile', () => {
  const yaml = `
name: Post-discharge follow-up
tags: [discharge]
swimlanes:
  - { id: care-team, name: Care team }
nodes:
  - { id: start, kind: start }
  - { id: risk, kind: decision, name: High risk? }
  - id: flag
    kind: action
    name: Flag for a call
    swimlaneId: care-team
    automations:
      - id: tag-it
        type: tag
        with: { target: subject, add: [followup-call] }
  - id: wait
    kind: action
    automations:
      - { id: remind-at, type: wait, with: { until: "08:00", timezone: Europe/Paris } }
  - { id: done, kind: end }
links:
  - { from: start, to: risk }
  - { from: risk, to: flag, when: "payload.riskScore > 5" }
  - { from: risk, to: wait }
  - { from: flag, to: done }
  - { from: wait, to: done }
`;

  it('reads a YAML blueprint that then validates', () => {
    const blueprint = validateBlueprint(parseBlueprintFile(yaml, 'follow-up.yaml'));
    expect(blueprint).toEqual(validateBlueprint(postDischargeWithClockWait()));
  });

  it('keeps a YAML local time as text', () => {
    const data = parseBlueprintFile('until: 08:00\n', 'x.yml') as Json;
    expect(data.until).toBe('08:00');
  });

  it('reads JSON by extension or by its opening brace', () => {
    expect(parseBlueprintFile('{"name": "x"}', 'file.yaml')).toEqual({ name: 'x' });
    expect(parseBlueprintFile('\uFEFF{"name": "x"}', 'file.txt')).toEqual({ name: 'x' });
    expect(parseBlueprintFile('  ["a"]', 'file.JSON')).toEqual(['a']);
  });

  it('says where JSON breaks', () => {
    expect(() => parseBlueprintFile('{\n  "name": "x",\n  "tags": ]\n}', 'bp.json')).toThrow(
      new BlueprintError(['bp.json: not valid JSON: line 3, column 11: unexpected "]" where a value was expected']),
    );
    expect(() => parseBlueprintFile('{"name": "x"', 'bp.json')).toThrow(/line 1, column 13: unexpected end of input/);
    expect(() => parseBlueprintFile('{\n  "a": 1,\n}', 'bp.json')).toThrow(/line 3, column 1: unexpected "}" where a property name/);
  });

  it('says where YAML breaks', () => {
    let error: unknown;
    try {
      parseBlueprintFile('name: x\nnodes:\n  - id: a\n   kind: b\n', 'bp.yaml');
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(BlueprintError);
    expect((error as BlueprintError).problems[0]).toMatch(/^bp\.yaml: not valid YAML: line 4, column 1: /);
  });

  it('rejects duplicate YAML keys', () => {
    expect(() => parseBlueprintFile('name: a\nname: b\n', 'bp.yaml')).toThrow(/line 2, column 1: Map keys must be unique/);
  });
});

function postDischargeWithClockWait(): Json {
  const input = postDischarge();
  node(input, 'wait').automations = [{ id: 'remind-at', type: 'wait', with: { until: '08:00', timezone: 'Europe/Paris' } }];
  return input;
}
