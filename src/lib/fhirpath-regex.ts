/**
 * FHIRPath's regular-expression functions — `matches`, `matchesFull` and `replaceMatches` — on a
 * linear-time engine (RE2, through re2js) instead of JavaScript's backtracking `RegExp`.
 *
 * Why: fhirpath.js runs these on `RegExp`, where a pattern such as `(a+)+$` over forty characters
 * of text takes longer than a request may, and JavaScript cannot interrupt a running match. The
 * text usually comes from a delivery's payload and the pattern may too
 * (`payload.resource.code.text.matches(payload.pattern)`), and a link's condition, a `set` and a
 * trigger's `when` run on the thread that serves every workspace: one such match would stall
 * them all. RE2 matches in time proportional to the text whatever the pattern.
 *
 * The price: RE2 has no look-around and no back-references (`(?=…)`, `\1`). A pattern that uses
 * them fails with a message that says so — at import or trigger creation when the pattern is
 * written in the expression (`constantPatternProblem`), when the expression runs otherwise (the
 * run errors at that node, a trigger's condition does not hold). Everything else FHIRPath's
 * patterns are written with (classes, `\d`, `\p{L}`, quantifiers, named groups, `$1` in a
 * replacement) works as before, but for two details of RE2: `\s` is ASCII white space (space,
 * tab, CR, LF, FF; not a no-break space), and with `m` a line ends at LF only.
 */
import fhirpath, { type UserInvocationTable } from 'fhirpath';
import { RE2JS } from 're2js';
import { runWithin, TimeBoxExceeded } from './time-box.js';
import type { SyntaxNode } from './fhirpath-syntax.js';

/**
 * Compiled patterns by flags and text; a pattern is compiled once (about 20 µs), then reused. A
 * pattern refused is remembered too: one from data that hit the compile's time box would
 * otherwise cost its 100 ms again for every resource that carries it.
 */
const compiledPatterns = new Map<string, RE2JS | UnsupportedPatternError>();
const MAX_COMPILED_PATTERNS = 500;

/**
 * RE2 matches in linear time, but compiles in time that grows with what a pattern expands to:
 * `(?:x{0,999})` repeated 200 times took 4 s (a verification round). A pattern is therefore at
 * most this long, and its compile is interrupted after COMPILE_TIMEOUT_MS (warm, a single
 * `x{0,999}` compiles in about 3 ms; ordinary patterns in well under one).
 */
const MAX_PATTERN_LENGTH = 1000;
const COMPILE_TIMEOUT_MS = 100;

/** The pattern cannot be compiled by the linear-time engine; `detail` says why. */
export class UnsupportedPatternError extends Error {
  constructor(pattern: string, detail: string) {
    super(`regular expression "${pattern}" is not supported: ${detail} (patterns run in linear time, without look-around or back-references)`);
    this.name = 'UnsupportedPatternError';
  }
}

/**
 * A pattern compiled with FHIRPath's flags: `i` (case-insensitive) and `m` (multi-line); `.`
 * matches a newline too (FHIRPath evaluates in single-line mode) unless `dotAll` is false, as in
 * fhirpath.js, whose replaceMatches does not.
 */
export function compilePattern(pattern: string, flags = '', dotAll = true): RE2JS {
  const key = `${flags}${dotAll ? 's' : ''}/${pattern}`;
  const hit = compiledPatterns.get(key);
  if (hit instanceof UnsupportedPatternError) throw hit;
  if (hit) return hit;
  try {
    const compiled = compileAnew(pattern, flags, dotAll);
    remember(key, compiled);
    return compiled;
  } catch (error) {
    if (error instanceof UnsupportedPatternError) remember(key, error);
    throw error;
  }
}

function remember(key: string, value: RE2JS | UnsupportedPatternError): void {
  if (compiledPatterns.size >= MAX_COMPILED_PATTERNS) compiledPatterns.delete(compiledPatterns.keys().next().value as string);
  compiledPatterns.set(key, value);
}

function compileAnew(pattern: string, flags: string, dotAll: boolean): RE2JS {
  const withFlags = engineFlags(flags) & (dotAll ? ~0 : ~RE2JS.DOTALL);
  if (pattern.length > MAX_PATTERN_LENGTH) {
    throw new UnsupportedPatternError(`${pattern.slice(0, 40)}…`, `it is ${pattern.length} characters long; at most ${MAX_PATTERN_LENGTH}`);
  }
  warmUp();
  const compile = () => runWithin(() => RE2JS.compile(RE2JS.translateRegExp(pattern), withFlags), COMPILE_TIMEOUT_MS);
  try {
    try {
      return compile();
    } catch (error) {
      // Once more before the refusal is remembered: a busy moment (a collection, a neighbour on
      // the machine) must not refuse an ordinary pattern for the life of the process.
      if (error instanceof TimeBoxExceeded) return compile();
      throw error;
    }
  } catch (error) {
    if (error instanceof TimeBoxExceeded) throw new UnsupportedPatternError(pattern, `it takes more than ${COMPILE_TIMEOUT_MS} ms to compile (too many repeats)`);
    throw new UnsupportedPatternError(pattern, error instanceof Error ? error.message.replace(/^error parsing regexp: /, '') : String(error));
  }
}

let warm = false;

/**
 * The engine's first compile builds its tables (about 20 ms, more on a loaded machine): done
 * once outside the time box, so that it is not counted against the first pattern a caller sends
 * (a suite on a busy machine saw `^E11\.[0-8]` refused as too slow to compile).
 */
function warmUp(): void {
  if (warm) return;
  warm = true;
  RE2JS.compile(RE2JS.translateRegExp('^\\p{L}[a-z]{2}\\d+(?:x|y)*$'), RE2JS.CASE_INSENSITIVE | RE2JS.MULTILINE | RE2JS.DOTALL);
}

function engineFlags(flags: string): number {
  let result = RE2JS.DOTALL;
  for (const flag of flags) {
    if (flag === 'i') result |= RE2JS.CASE_INSENSITIVE;
    else if (flag === 'm') result |= RE2JS.MULTILINE;
    else throw new Error('matches/matchesFull flags must only contain i and/or m');
  }
  return result;
}

/** What fhirpath.js passes a function for a String parameter: the string, or an empty collection. */
type StringParameter = string | unknown[] | undefined;

const isEmpty = (value: StringParameter): value is unknown[] | undefined => value === undefined || (Array.isArray(value) && value.length === 0);

/**
 * The input collection as one string, as fhirpath.js's singleton rule has it: empty gives
 * undefined (the function's result is then empty), more than one item or a non-string is an error.
 */
function inputString(collection: unknown[]): string | undefined {
  if (collection.length > 1) throw new Error(`expected a single String, got ${collection.length} items`);
  if (collection.length === 0) return undefined;
  const value = fhirpath.resolveInternalTypes(collection[0]) as unknown;
  if (value === null || value === undefined) return undefined;
  if (typeof value !== 'string') throw new Error(`expected a String, got ${typeof value}`);
  return value;
}

function matches(collection: unknown[], pattern: StringParameter, flags?: StringParameter): boolean | [] {
  const text = inputString(collection);
  if (isEmpty(pattern) || text === undefined) return [];
  return compileFor('matches', pattern as string, isEmpty(flags) ? '' : (flags as string)).test(text);
}

/**
 * The pattern as each function compiles it, the same at the import check and at run time:
 * matchesFull anchored as fhirpath.js anchors it (with `m`, the anchors are a line's);
 * replaceMatches without dot-all, as in fhirpath.js.
 */
function compileFor(functionName: string, pattern: string, flags: string): RE2JS {
  if (functionName === 'matchesFull') return compilePattern(`^(?:${pattern})$`, flags);
  if (functionName === 'replaceMatches') return compilePattern(pattern, '', false);
  return compilePattern(pattern, flags);
}

function matchesFull(collection: unknown[], pattern: StringParameter, flags?: StringParameter): boolean | [] {
  const text = inputString(collection);
  if (isEmpty(pattern) || text === undefined) return [];
  return compileFor('matchesFull', pattern as string, isEmpty(flags) ? '' : (flags as string)).test(text);
}

function replaceMatches(collection: unknown[], pattern: StringParameter, substitution: StringParameter): string | [] {
  const text = inputString(collection);
  if (isEmpty(pattern) || isEmpty(substitution) || text === undefined) return [];
  // The substitution follows JavaScript's rules, as with fhirpath.js: `$1`, `$<name>`, `$&`, `$$`.
  return compileFor('replaceMatches', pattern as string, '').matcher(text).replaceAll(substitution as string);
}

/**
 * fhirpath.js's `userInvocationTable`: entries here take the place of its own functions of the
 * same name, with the same parameters.
 */
export const linearTimeRegexFunctions = {
  matches: { fn: matches, arity: { 1: ['String'], 2: ['String', 'String'] } },
  matchesFull: { fn: matchesFull, arity: { 1: ['String'], 2: ['String', 'String'] } },
  replaceMatches: { fn: replaceMatches, arity: { 2: ['String', 'String'] } },
} satisfies UserInvocationTable;

const PATTERN_FUNCTIONS = new Set(Object.keys(linearTimeRegexFunctions));

/**
 * What is wrong with a pattern written as a string literal in an expression
 * (`code.matches('(?=x)')`), or undefined. An expression's check runs it on an empty run
 * context, where such a function never gets to its pattern; this looks at the pattern itself.
 */
export function constantPatternProblem(syntax: SyntaxNode): string | undefined {
  let problem: string | undefined;
  const visit = (node: SyntaxNode): void => {
    if (problem !== undefined) return;
    if (node.type === 'Functn' && node.text !== undefined && PATTERN_FUNCTIONS.has(node.text)) {
      const parameters = node.children?.find((child) => child.type === 'ParamList')?.children ?? [];
      problem = literalPatternProblem(node.text, parameters);
    }
    for (const child of node.children ?? []) visit(child);
  };
  visit(syntax);
  return problem;
}

function literalPatternProblem(functionName: string, parameters: SyntaxNode[]): string | undefined {
  const [pattern, flags] = parameters.map(stringLiteralValue);
  if (pattern === undefined) return undefined;
  try {
    compileFor(functionName, pattern, flags ?? '');
    return undefined;
  } catch (error) {
    return `${functionName}(): ${error instanceof Error ? error.message : String(error)}`;
  }
}

/** A parameter written as one string literal, unescaped by fhirpath.js itself; otherwise undefined. */
function stringLiteralValue(parameter: SyntaxNode): string | undefined {
  const term = parameter.type === 'TermExpression' ? parameter.children?.[0] : undefined;
  const literal = term?.type === 'LiteralTerm' ? term.children?.[0] : undefined;
  if (literal?.type !== 'StringLiteral' || literal.text === undefined) return undefined;
  const [value] = fhirpath.evaluate({}, literal.text) as unknown[];
  return typeof value === 'string' ? value : undefined;
}
