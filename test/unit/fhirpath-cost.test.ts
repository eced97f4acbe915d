import { describe, expect, it } from 'vitest';
import { mayGrowFasterThanData as fromSyntax } from '../../src/lib/fhirpath-cost.js';
import { parseSyntax } from '../../src/lib/fhirpath-syntax.js';

const mayGrowFasterThanData = (text: string) => fromSyntax(parseSyntax(text));

describe('mayGrowFasterThanData', () => {
  it.each([
    'payload.riskScore > 5',
    "steps.visit.outcome = 'event'",
    "subject.tags contains 'copd'",
    "payload.resource.code.coding.where(system = 'http://loinc.org' and code in ('4548-4' | '17856-6')).exists()",
    "payload.entry.where(resource.code.coding.where(system = 'x').exists()).count() > 1",
    'payload.list.select(value * 2).sum()',
    'payload.resource.descendants().count()',
    "payload.text.replace('a', 'b')",
    "payload.text.lastIndexOf('-')",
    "payload.entry.where(resource.status in ('final' | 'amended')).count()",
    "payload.entry.where(('final' | 'amended') contains resource.status).exists()",
    'payload.entry.select(resource.children()).count()',
    "payload.list.combine(payload.other).count()",
    "payload.text.matches('^[0-9]+$')",
    "today() + 1 day < payload.due.toDate()",
    "iif(payload.a.exists(), 'yes', 'no')",
    '%resource.payload.riskScore > 5',
  ])('%s is linear', (text) => {
    expect(mayGrowFasterThanData(text)).toBe(false);
  });

  it.each([
    'payload.ids.distinct().count()',
    'payload.ids.isDistinct()',
    'payload.a | payload.b',
    'payload.a.union(payload.b)',
    'payload.a.intersect(payload.b)',
    'payload.a.exclude(payload.b)',
    'payload.a.subsetOf(payload.b)',
    'payload.a.supersetOf(payload.b)',
    'payload.a.repeat(item)',
    'payload.a.aggregate($total + $this, 0)',
    'payload.list.where(%resource.payload.list.count() > 1)',
    'payload.list.select(%context.payload.list)',
    "payload.text.replace('a', payload.text)",
    'payload.a.resolve()',
    'payload.a.someFunctionNotKnown()',
    'payload.list.sort($this).first()',
    "payload.list.select($this.trace('t', $this))",
    // A verification round: each of these took 11 s to minutes unboxed over a small payload.
    `payload.arr.select(${'(0|1|2|3|4|5)'}.select((0|1|2|3|4|5).select((0|1|2|3|4|5)))).count()`,
    "iif(payload.s.exists(), (0|1|2).select((0|1|2).select((0|1|2))).count(), 0)",
    'payload.arr.select((0|1|2)).select((0|1|2)).count()',
    "payload.arr.select('abcdefghij'.toChars()).count()",
    'payload.arr.select($this.combine($this)).select($this.combine($this)).count()',
    'payload.x.descendants().select(descendants()).count()',
    'payload.s.lastIndexOf(payload.t)',
    "payload.arr.select($this.replace('a', '$\\''))",
  ])('%s may grow faster', (text) => {
    expect(mayGrowFasterThanData(text)).toBe(true);
  });
});
