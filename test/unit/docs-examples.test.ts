/**
 * The examples integrators copy from docs/automations.md and docs/integrating.md pass the checks
 * they would meet: every JSON block of the reference imports (a whole blueprint as it is, an
 * automation or a list of them in an action node, links between nodes made for them), and every
 * trigger condition of the integration walk is one a trigger may be given. A check tightened
 * without the docs, or a doc edited without the checks, fails here.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { BlueprintError, validateBlueprint } from '../../src/modules/blueprints/blueprint.validate.js';
import { triggerConditionProblem } from '../../src/modules/blueprints/expression.check.js';

type Json = Record<string, any>;

function doc(name: string): string {
  return readFileSync(fileURLToPath(new URL(`../../docs/${name}`, import.meta.url)), 'utf8');
}

function blocks(text: string, language: string): string[] {
  return [...text.matchAll(new RegExp('```' + language + '\\n([\\s\\S]*?)```', 'g'))].map((m) => m[1]!);
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

/** The blueprint a snippet stands in: itself, its automations in one action node, or its links. */
function asBlueprint(snippet: unknown): Json | null {
  const items = (Array.isArray(snippet) ? snippet : [snippet]) as Json[];
  if (!Array.isArray(snippet) && 'nodes' in (snippet as Json)) return snippet as Json;
  if (items.every((item) => 'type' in item && 'id' in item)) {
    return {
      name: 'automation example',
      nodes: [{ id: 'start', kind: 'start' }, { id: 'n', kind: 'action', automations: items }, { id: 'done', kind: 'end' }],
      links: [
        { from: 'start', to: 'n' },
        { from: 'n', to: 'done' },
      ],
    };
  }
  if (items.every((item) => 'from' in item && 'to' in item)) {
    const from = [...new Set(items.map((link) => link.from as string))];
    const to = [...new Set(items.map((link) => link.to as string))].filter((id) => !from.includes(id));
    return {
      name: 'link example',
      nodes: [{ id: 'start', kind: 'start' }, ...from.map((id) => ({ id, kind: 'decision' })), ...to.map((id) => ({ id, kind: 'end' }))],
      links: [...from.map((id) => ({ from: 'start', to: id })), ...items],
    };
  }
  return null; // a search body, not a blueprint
}

describe('docs/automations.md examples', () => {
  const examples = blocks(doc('automations.md'), 'json').map((text) => JSON.parse(text) as unknown);

  it('has the examples this test reads', () => {
    expect(examples.filter((example) => asBlueprint(example) !== null).length).toBeGreaterThanOrEqual(12);
  });

  it.each(examples.map((example, index) => [index, example] as const))('block %i imports', (_index, example) => {
    const blueprint = asBlueprint(example);
    if (blueprint) expect(problemsOf(blueprint)).toEqual([]);
  });
});

describe('docs/integrating.md trigger conditions', () => {
  const text = doc('integrating.md');
  const conditions = [...text.matchAll(/"when": "([^"]+)"/g)].map((m) => m[1]!);

  it('finds them', () => {
    expect(conditions.length).toBeGreaterThanOrEqual(2);
  });

  it.each(conditions)('%s may be saved on a trigger', (condition) => {
    expect(triggerConditionProblem(condition)).toBeUndefined();
  });
});
