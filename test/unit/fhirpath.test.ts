import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  compileExpression,
  evaluate,
  evaluateBoolean,
  ExpressionCache,
  ExpressionEvaluationError,
  ExpressionSyntaxError,
  type ExpressionContext,
} from '../../src/lib/fhirpath.js';

function context(overrides: Partial<ExpressionContext> = {}): ExpressionContext {
  return {
    payload: { riskScore: 7 },
    subject: { extId: 'p-1', tags: ['copd', 'diabetes'] },
    steps: { visit: { outcome: 'event', output: { event: 'Encounter.finished' } } },
    vars: { count: 2 },
    ...overrides,
  };
}

const run = (text: string, ctx = context()) => evaluate(compileExpression(text), ctx);
const holds = (text: string, ctx = context()) => evaluateBoolean(compileExpression(text), ctx);

describe('the run context as the root', () => {
  it('reads payload', () => {
    expect(holds('payload.riskScore > 5')).toBe(true);
    expect(holds('payload.riskScore > 5', context({ payload: { riskScore: 3 } }))).toBe(false);
  });

  it('reads subject tags', () => {
    expect(holds("subject.tags contains 'copd'")).toBe(true);
    expect(holds("subject.tags contains 'asthma'")).toBe(false);
  });

  it('reads step results', () => {
    expect(holds("steps.visit.outcome = 'event'")).toBe(true);
    expect(holds("steps.visit.outcome = 'event'", context({ steps: { visit: { outcome: 'timeout' } } }))).toBe(false);
  });

  it('reads step results whose id holds a hyphen through backticks', () => {
    expect(run('steps.`tag-it`.outcome', context({ steps: { 'tag-it': { outcome: 'done' } } }))).toEqual(['done']);
  });

  it('calls now() and compares it with date literals', () => {
    const [now] = run('now()');
    expect(typeof now).toBe('string');
    expect(Date.parse(now as string)).not.toBeNaN();
    expect(holds('now() > @2020-01-01T00:00:00Z')).toBe(true);
  });

  it('navigates a FHIR resource inside the payload', () => {
    const ctx = context({
      payload: { event: 'Observation.final', resource: { resourceType: 'Observation', status: 'final', valueQuantity: { value: 8.4 } } },
    });
    expect(holds('payload.resource.valueQuantity.value >= 8', ctx)).toBe(true);
    expect(run('payload.resource.status', ctx)).toEqual(['final']);
  });

  it('gives empty for a path that is not there', () => {
    expect(run('payload.missing.deeper')).toEqual([]);
    expect(run('vars.count + 1')).toEqual([3]);
  });
});

describe('now() under fake timers', () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it('follows the process clock', () => {
    vi.useFakeTimers();
    vi.setSystemTime(new Date('2031-05-06T07:08:09.000Z'));
    const [now] = run('now()');
    expect(new Date(now as string).toISOString()).toBe('2031-05-06T07:08:09.000Z');
  });
});

describe('DateTimes fhirpath.js computes', () => {
  it('write a zero offset as +00:00, never -00:00 ("offset unknown" in RFC 3339)', () => {
    const [sum] = run('@2026-01-01T10:00:00Z + 1 hour') as [string];
    expect(Date.parse(sum)).toBe(Date.parse('2026-01-01T11:00:00Z'));
    const [now] = run('now()') as [string];
    for (const text of [sum, now]) {
      expect(text).not.toMatch(/-00:00$/);
      // In this process's zone: where that is UTC (as on most servers), +00:00.
      if (new Date(text).getTimezoneOffset() === 0) expect(text).toMatch(/\+00:00$/);
    }
  });

  it('leave other offsets, dates, strings and quantities as they were', () => {
    expect(run('@2026-01-01T10:00:00+02:00')).toEqual(['2026-01-01T10:00:00+02:00']);
    expect(run('@2026-01-01')).toEqual(['2026-01-01']);
    // A string from the data is the data's, whatever it says.
    expect(run('payload.at', context({ payload: { at: '2026-01-01T10:00:00-00:00' } }))).toEqual(['2026-01-01T10:00:00-00:00']);
    expect(run("5 'mg'")).toEqual(["5 'mg'"]);
  });
});

describe('evaluate', () => {
  it('hands out copies, so editing a result leaves the context alone', () => {
    const ctx = context({ payload: { nested: { list: [1, 2] } } });
    const [nested] = run('payload.nested', ctx) as [{ list: number[] }];
    nested.list.push(3);
    expect(ctx.payload).toEqual({ nested: { list: [1, 2] } });
  });

  it('wraps a failure while running with the expression text', () => {
    expect(() => run('payload.exist()')).toThrow(ExpressionEvaluationError);
    expect(() => run('payload.exist()')).toThrow(/"payload\.exist\(\)" failed: Not implemented: exist/);
  });
});

describe('evaluateBoolean', () => {
  it('treats empty as false', () => {
    expect(holds('payload.missing')).toBe(false);
  });

  it('takes a single Boolean as itself', () => {
    expect(holds('true')).toBe(true);
    expect(holds('false')).toBe(false);
  });

  it('treats a single item of another type as true', () => {
    expect(holds('payload.riskScore')).toBe(true);
    expect(holds("'text'")).toBe(true);
  });

  it('refuses more than one item', () => {
    expect(() => holds('subject.tags')).toThrow(/gave 2 items where a single Boolean was expected/);
  });
});

describe('compileExpression', () => {
  it('throws the parser message with a 1-based column', () => {
    let caught: unknown;
    try {
      compileExpression('payload.');
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(ExpressionSyntaxError);
    const error = caught as ExpressionSyntaxError;
    expect(error.expression).toBe('payload.');
    expect(error.message).toMatch(/^FHIRPath expression "payload\." does not compile: line 1, column 9: mismatched input '<EOF>'/);
  });

  it('keeps short parser messages whole', () => {
    expect(() => compileExpression('a b')).toThrow(/line 1, column 3: extraneous input 'b' expecting <EOF>/);
  });

  it('rejects an empty expression', () => {
    expect(() => compileExpression('  ')).toThrow(/is empty/);
  });
});

describe('ExpressionCache', () => {
  it('returns the compiled expression it already has', () => {
    const cache = new ExpressionCache(2);
    expect(cache.compile('payload.a')).toBe(cache.compile('payload.a'));
    expect(cache.size).toBe(1);
  });

  it('evicts the least recently used expression', () => {
    const cache = new ExpressionCache(2);
    const first = cache.compile('payload.a');
    const second = cache.compile('payload.b');
    cache.compile('payload.a'); // now b is the oldest
    cache.compile('payload.c');
    expect(cache.size).toBe(2);
    expect(cache.compile('payload.a')).toBe(first);
    const recompiled = cache.compile('payload.b');
    expect(recompiled).not.toBe(second);
    expect(evaluate(recompiled, context({ payload: { b: 1 } }))).toEqual([1]);
  });

  it('does not keep expressions that fail to compile', () => {
    const cache = new ExpressionCache(2);
    expect(() => cache.compile('((')).toThrow(ExpressionSyntaxError);
    expect(cache.size).toBe(0);
  });

  it('needs a positive bound', () => {
    expect(() => new ExpressionCache(0)).toThrow(RangeError);
  });
});

describe('an expression whose cost grows faster than its data', () => {
  const ids = Array.from({ length: 40_000 }, (_, n) => `id-${n}`);

  it('is stopped after its budget and fails as an evaluation error that says why', () => {
    const started = Date.now();
    const pairwise = compileExpression('payload.ids.distinct().count()');
    expect(pairwise.timeBoxed).toBe(true);
    expect(() => evaluate(pairwise, context({ payload: { ids } }))).toThrow(/took longer than 1000 ms over this data and was stopped/);
    expect(() => evaluate(pairwise, context({ payload: { ids } }))).toThrow(ExpressionEvaluationError);
    // Two evaluations at 1 s each, not the minutes 40,000 ids take unbounded.
    expect(Date.now() - started).toBeLessThan(6000);
  });

  it('gives its result when the data is small, and a failure of its own as before', () => {
    expect(run('payload.ids.distinct().count()', context({ payload: { ids: ['a', 'b', 'a'] } }))).toEqual([2]);
    expect(holds("payload.ids.isDistinct() and (payload.ids | 'c').count() = 3", context({ payload: { ids: ['a', 'b'] } }))).toBe(true);
    expect(() => run('payload.ids.distinct().exist()', context({ payload: { ids: ['a'] } }))).toThrow(/exist/);
  });

  it('runs without the time box when its cost is linear', () => {
    expect(compileExpression('payload.ids.where($this.startsWith(\'id-1\')).count()').timeBoxed).toBe(false);
    expect(run("payload.ids.where($this.startsWith('id-1')).count() > 0", context({ payload: { ids } }))).toEqual([true]);
  });
});

describe('an expression nested very deeply', () => {
  it('compiles or is refused as a syntax error, never overflows the caller', () => {
    for (const depth of [500, 990, 2000, 5000]) {
      const text = `${'('.repeat(depth)}1${')'.repeat(depth)} = 1`;
      try {
        compileExpression(text);
      } catch (error) {
        expect(error, String(depth)).toBeInstanceOf(ExpressionSyntaxError);
      }
    }
  });
});

describe('trace()', () => {
  afterEach(() => vi.restoreAllMocks());

  it('returns its input and prints nothing of it', () => {
    const log = vi.spyOn(console, 'log').mockImplementation(() => {});
    expect(run("payload.secret.trace('label')", context({ payload: { secret: 'health data' } }))).toEqual(['health data']);
    expect(run("payload.trace('label', secret)", context({ payload: { secret: 'health data' } }))).toEqual([{ secret: 'health data' }]);
    expect(log).not.toHaveBeenCalled();
  });
});
