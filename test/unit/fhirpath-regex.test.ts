import { describe, expect, it } from 'vitest';
import { compileExpression, evaluate, type ExpressionContext } from '../../src/lib/fhirpath.js';
import { constantPatternProblem as patternProblemOf } from '../../src/lib/fhirpath-regex.js';
import { parseSyntax } from '../../src/lib/fhirpath-syntax.js';

const constantPatternProblem = (text: string) => patternProblemOf(parseSyntax(text));

function context(payload: unknown): ExpressionContext {
  return { payload, subject: {}, steps: {}, vars: {} };
}

const run = (text: string, payload: unknown = {}) => evaluate(compileExpression(text), context(payload));

describe('matches, matchesFull and replaceMatches on the linear-time engine', () => {
  it('answers in time proportional to the text for a pattern that backtracks exponentially', () => {
    // With JavaScript's RegExp, `(a+)+$` over 40 a's and a "!" takes longer than any request may.
    const payload = { text: `${'a'.repeat(40)}!`, pattern: '(a+)+$' };
    const started = performance.now();
    expect(run('payload.text.matches(payload.pattern)', payload)).toEqual([false]);
    expect(run("payload.text.matchesFull('(a|aa)+')", payload)).toEqual([false]);
    expect(run("payload.text.replaceMatches('(a+)+$', 'x')", payload)).toEqual([payload.text]);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('keeps FHIRPath semantics: substring search, full match, single-line mode and the i and m flags', () => {
    const payload = { code: 'E11.9', note: 'first\nSecond' };
    expect(run("payload.code.matches('^E11')", payload)).toEqual([true]);
    expect(run("payload.code.matches('11')", payload)).toEqual([true]);
    expect(run("payload.code.matchesFull('11')", payload)).toEqual([false]);
    expect(run("payload.code.matchesFull('E\\\\d{2}\\\\.\\\\d')", payload)).toEqual([true]);
    expect(run("payload.note.matches('first.Second')", payload)).toEqual([true]);
    expect(run("payload.note.matches('^second', 'im')", payload)).toEqual([true]);
    expect(run("payload.note.matches('^second', 'i')", payload)).toEqual([false]);
    expect(run("'Émile'.matches('^\\\\p{L}+$')")).toEqual([true]);
  });

  it('replaces with group references as JavaScript does', () => {
    expect(run("'Smith, John'.replaceMatches('(\\\\w+), (\\\\w+)', '$2 $1')")).toEqual(['John Smith']);
    expect(run("'a-b-c'.replaceMatches('-', '+')")).toEqual(['a+b+c']);
    expect(run("'2024-05'.replaceMatches('(?<year>\\\\d{4})-(?<month>\\\\d{2})', '$<month>/$<year>')")).toEqual(['05/2024']);
  });

  it('gives an empty result for an empty input or pattern', () => {
    expect(run("payload.missing.matches('a')")).toEqual([]);
    expect(run('payload.code.matches(payload.missing)', { code: 'a' })).toEqual([]);
    expect(run("payload.missing.replaceMatches('a', 'b')")).toEqual([]);
  });

  it('refuses several items, a non-string input and unknown flags', () => {
    expect(() => run("payload.codes.matches('a')", { codes: ['a', 'b'] })).toThrow(/expected a single String, got 2 items/);
    expect(() => run("payload.n.matches('1')", { n: 1 })).toThrow(/expected a String/);
    expect(() => run("'a'.matches('a', 'x')")).toThrow(/flags must only contain i and\/or m/);
  });

  it('fails an expression whose pattern uses look-around or back-references, saying why', () => {
    expect(() => run('payload.text.matches(payload.pattern)', { text: 'aa', pattern: '(a)\\1' })).toThrow(
      /regular expression "\(a\)\\1" is not supported: invalid escape sequence.*without look-around or back-references/,
    );
    expect(() => run("'ab'.matches('a(?=b)')")).toThrow(/not supported: invalid or unsupported Perl syntax/);
  });
});

describe('patterns that would take long to compile, and details fhirpath.js has', () => {
  it('refuses a pattern over 1,000 characters, and one that takes more than 100 ms to compile', () => {
    expect(() => run('payload.t.matches(payload.p)', { t: 'x', p: 'a'.repeat(1001) })).toThrow(/is 1001 characters long; at most 1000/);
    // RE2 compiles counted repeats into copies: 400 of x{0,999} took 9 s (a verification round).
    const started = Date.now();
    expect(() => run('payload.t.matches(payload.p)', { t: 'x', p: `${'(?:x{0,999})'.repeat(80)}y` })).toThrow(/takes more than 100 ms to compile/);
    expect(Date.now() - started).toBeLessThan(2000);
    expect(constantPatternProblem(`payload.t.matches('${'(?:x{0,999})'.repeat(80)}y')`)).toMatch(/takes more than 100 ms to compile/);
    // Refused once, remembered: a pattern carried by every resource of a feed costs its 100 ms once.
    const again = Date.now();
    for (let n = 0; n < 5; n++) expect(() => run('payload.t.matches(payload.p)', { t: 'x', p: `${'(?:x{0,999})'.repeat(80)}y` })).toThrow(/to compile/);
    expect(Date.now() - again).toBeLessThan(100);
  });

  it('checks a pattern at import as the function compiles it: matchesFull anchored', () => {
    // 997 characters, 1,003 once matchesFull anchors it: refused at import, not at every run.
    expect(constantPatternProblem(`payload.t.matchesFull('${'a'.repeat(997)}')`)).toMatch(/^matchesFull\(\): .*is 1003 characters long; at most 1000/);
    expect(constantPatternProblem(`payload.t.matches('${'a'.repeat(997)}')`)).toBeUndefined();
  });

  it('anchors matchesFull as fhirpath.js does, so with m it matches a whole line; replaceMatches keeps . off newlines', () => {
    expect(run("payload.t.matchesFull('b', 'm')", { t: 'a\nb' })).toEqual([true]);
    expect(run("payload.t.matchesFull('b')", { t: 'a\nb' })).toEqual([false]);
    expect(run("payload.t.replaceMatches('a.b', 'x')", { t: 'a\nb' })).toEqual(['a\nb']);
    expect(run("payload.t.replaceMatches('a.b', 'x')", { t: 'a-b' })).toEqual(['x']);
    expect(run("payload.t.matches('a.b')", { t: 'a\nb' })).toEqual([true]);
  });
});

describe('constantPatternProblem', () => {
  it('names the function and the pattern written in the expression that cannot run', () => {
    expect(constantPatternProblem("payload.code.matches('a(?=b)')")).toMatch(/^matches\(\): regular expression "a\(\?=b\)" is not supported/);
    expect(constantPatternProblem("payload.a.exists() and payload.b.replaceMatches('(x)\\\\1', 'y') = 'z'")).toMatch(/^replaceMatches\(\):/);
    expect(constantPatternProblem("payload.code.matchesFull('E11', 'q')")).toMatch(/^matchesFull\(\): .*flags must only contain i and\/or m/);
  });

  it('passes patterns that compile, patterns from data and expressions without patterns', () => {
    expect(constantPatternProblem("payload.code.matches('^E1[01]\\\\.')")).toBeUndefined();
    expect(constantPatternProblem('payload.code.matches(payload.pattern)')).toBeUndefined();
    expect(constantPatternProblem('payload.riskScore > 5')).toBeUndefined();
  });
});
