/**
 * FHIRPath over the run context (DESIGN §6): `when` on links, `set` variables and `{{ }}`
 * placeholders are all evaluated here, with HL7's fhirpath.js underneath.
 *
 * The root of every evaluation is the run context object itself, passed as the "resource" with
 * no FHIR model: its keys are plain members, so `payload.riskScore > 5`,
 * `subject.tags contains 'copd'` and `steps.visit.outcome = 'event'` navigate it directly.
 * Without a model, type-aware functions (`ofType(Observation)`, `is Patient`) are unavailable.
 *
 * Two properties of fhirpath.js shape this file:
 * - Results are references into the context. They are copied before being handed out, so a
 *   caller that stores or edits a result (a `set` variable, a rendered `with`) never edits the
 *   run context by accident.
 * - When a result is a nested FHIR resource (an object with `resourceType`, such as an event
 *   run's `payload.resource`), fhirpath.js attaches a hidden, non-enumerable `__path__` property
 *   to it. The context must therefore not be frozen; JSON serialisation is unaffected.
 *
 * `matches`, `matchesFull` and `replaceMatches` run on a linear-time engine (fhirpath-regex.ts):
 * a pattern from a payload must not be able to stall the process. For the same reason an
 * expression whose cost can grow faster than its data (fhirpath-cost.ts: `distinct()` over a
 * payload's list, a `where` that reads `%resource` once per item) runs within a time box of
 * EVALUATION_BUDGET_MS and fails when it overruns; fhirpath.js has no budget of its own.
 *
 * `now()`, `today()` and `timeOfDay()` read the process clock (`new Date()`), so tests move
 * them with fake timers rather than with the application Clock.
 *
 * fhirpath.js writes a DateTime it computes (`now()`, `@… + 1 hour`) in the process's time
 * zone, and a zero offset as `-00:00`, which RFC 3339 reserves for "offset unknown" (on a server
 * in UTC, every time it makes). Such results are written `+00:00` here, the same instant.
 */
import fhirpath from 'fhirpath';
import { runWithin, TimeBoxExceeded } from './time-box.js';
import { linearTimeRegexFunctions } from './fhirpath-regex.js';
import { mayGrowFasterThanData } from './fhirpath-cost.js';
import { parseSyntax, type SyntaxNode } from './fhirpath-syntax.js';

/** The root an expression sees. `steps.<automationId>` = `{outcome, output}`. */
export interface ExpressionContext {
  payload: unknown;
  subject: unknown;
  steps: Record<string, unknown>;
  vars: Record<string, unknown>;
}

type Evaluator = (root: unknown) => unknown[];

export interface CompiledExpression {
  readonly text: string;
  readonly evaluator: Evaluator;
  /** Evaluated within EVALUATION_BUDGET_MS: its cost can grow faster than its data. */
  readonly timeBoxed: boolean;
}

/**
 * How long an expression that may grow faster than its data may run before it fails. Its run
 * errors at its node (a condition on an event trigger fails the way a bad condition does); the
 * thread that serves every workspace is held at most this long. Ordinary expressions take
 * microseconds to a few milliseconds over the largest payload accepted.
 */
export const EVALUATION_BUDGET_MS = 1000;

/** The expression is not valid FHIRPath syntax. `detail` is the parser's account of why. */
export class ExpressionSyntaxError extends Error {
  constructor(
    readonly expression: string,
    readonly detail: string,
  ) {
    super(`FHIRPath expression "${expression}" does not compile: ${detail}`);
    this.name = 'ExpressionSyntaxError';
  }
}

/** The expression compiled but failed while running, or its result had the wrong shape. */
export class ExpressionEvaluationError extends Error {
  constructor(
    readonly expression: string,
    readonly detail: string,
  ) {
    super(`FHIRPath expression "${expression}" failed: ${detail}`);
    this.name = 'ExpressionEvaluationError';
  }
}

export function compileExpression(text: string): CompiledExpression {
  return compileWithSyntax(text).compiled;
}

/**
 * The compiled expression and its syntax tree, for a caller that checks its shape too (one parse
 * for all). With `wholeTree` the tree is parsed for every expression, calls or not (the import
 * checks read which names a path starts at); without it, a path without calls or `|` gets
 * SIMPLE_PATH in its place.
 */
export function compileWithSyntax(text: string, wholeTree = false): { compiled: CompiledExpression; syntax: SyntaxNode } {
  if (text.trim() === '') throw new ExpressionSyntaxError(text, 'the expression is empty');
  let run: (root: unknown) => unknown;
  try {
    run = fhirpath.compile(text, undefined, {
      async: false,
      resolveInternalTypes: false,
      userInvocationTable: linearTimeRegexFunctions,
      // fhirpath.js's trace() writes what it traces to the console: a payload's health data in
      // the service's output, outside the logger and its redaction. It stays a no-op that
      // returns its input, so an expression written with it still runs.
      traceFn: discardTrace,
    });
  } catch (error) {
    throw new ExpressionSyntaxError(text, describeParserError(error));
  }
  // Without a call or a `|` nothing can cost more than its data, and no pattern is written:
  // the second parse is spared for the commonest expressions (`payload.riskScore > 5`).
  try {
    const syntax = wholeTree || /[(|]/.test(text) ? parseSyntax(text) : SIMPLE_PATH;
    return { compiled: { text, evaluator: (root) => run(root) as unknown[], timeBoxed: mayGrowFasterThanData(syntax) }, syntax };
  } catch (error) {
    // The tree is walked recursively: 990 parentheses within one another overflowed the stack,
    // and a trigger save answered 500 (a verification round).
    if (error instanceof RangeError) throw new ExpressionSyntaxError(text, TOO_DEEP);
    throw error;
  }
}

/** Why an expression whose nesting overflows the stack is refused. */
export const TOO_DEEP = 'it nests too deeply (parentheses, operators or calls within one another)';

function discardTrace(): void {}

/** The syntax tree of an expression without calls or unions, as far as the checks are concerned. */
const SIMPLE_PATH: SyntaxNode = { type: 'EntireExpression', children: [] };

export function evaluate(compiled: CompiledExpression, context: ExpressionContext): unknown[] {
  let result: unknown[];
  try {
    result = compiled.timeBoxed ? runWithin(() => compiled.evaluator(context), EVALUATION_BUDGET_MS) : compiled.evaluator(context);
  } catch (error) {
    if (error instanceof TimeBoxExceeded) {
      throw new ExpressionEvaluationError(
        compiled.text,
        `took longer than ${EVALUATION_BUDGET_MS} ms over this data and was stopped (its cost grows faster than the data: distinct(), | over data, sort, or a where/select argument reaching beyond its item); simplify it`,
      );
    }
    throw new ExpressionEvaluationError(compiled.text, errorText(error));
  }
  return result.map(plainValue);
}

/** fhirpath.js's DateTime class, which its package does not export: the type of what now() gives. */
const DATE_TIME_TYPE = (fhirpath.evaluate({}, 'now()', undefined, undefined, { resolveInternalTypes: false }) as object[])[0].constructor;

/** A result as JSON: fhirpath.js's own types resolved (a DateTime's zero offset as `+00:00`), then copied. */
function plainValue(item: unknown): unknown {
  if (item instanceof DATE_TIME_TYPE) {
    const text = String(item);
    return text.endsWith('-00:00') ? `${text.slice(0, -6)}+00:00` : text;
  }
  return copyJsonValue(fhirpath.resolveInternalTypes(item));
}

/**
 * FHIRPath singleton evaluation of a collection as a Boolean (spec §4.5 / "Singleton Evaluation
 * of Collections"): empty is false, one Boolean is itself, one item of any other type is true,
 * and more than one item is an error rather than a guess.
 */
export function evaluateBoolean(compiled: CompiledExpression, context: ExpressionContext): boolean {
  const result = evaluate(compiled, context);
  const notBoolean = notOneBoolean(result);
  if (notBoolean !== null) throw new ExpressionEvaluationError(compiled.text, notBoolean);
  const [only] = result;
  return result.length === 1 && (typeof only === 'boolean' ? only : true);
}

/** Why a result is no Boolean under singleton evaluation (more than one item), or null. */
export function notOneBoolean(result: readonly unknown[]): string | null {
  return result.length > 1 ? `gave ${result.length} items where a single Boolean was expected` : null;
}

/**
 * A bounded least-recently-used cache of compiled expressions. Each owner (the engine, a
 * validator) makes its own, so nothing is shared between tenants or tests through the module.
 */
export class ExpressionCache {
  private readonly entries = new Map<string, CompiledExpression>();

  constructor(readonly maxEntries = 1000) {
    if (!Number.isInteger(maxEntries) || maxEntries < 1) {
      throw new RangeError(`maxEntries must be a positive integer, got ${maxEntries}`);
    }
  }

  get size(): number {
    return this.entries.size;
  }

  compile(text: string): CompiledExpression {
    const hit = this.entries.get(text);
    if (hit) {
      // A Map iterates in insertion order: re-inserting marks the entry as most recently used.
      this.entries.delete(text);
      this.entries.set(text, hit);
      return hit;
    }
    const compiled = compileExpression(text);
    this.entries.set(text, compiled);
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
    }
    return compiled;
  }
}

/**
 * The parser reports `line: 1; column: 8; message: mismatched input '<EOF>' expecting {…}`, one
 * line per problem, with 0-based columns and the full set of expected tokens (often thirty).
 * Keep the message, count columns from 1 and drop long token sets, which bury the point.
 */
function describeParserError(error: unknown): string {
  const lines = errorText(error)
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line !== '');
  const described = lines.map((line) => {
    const match = /^line: (\d+); column: (\d+); message: (.*)$/.exec(line);
    if (!match) return line;
    const [, lineNo, column, message] = match;
    return `line ${lineNo}, column ${Number(column) + 1}: ${shortenExpecting(message)}`;
  });
  return described.join('; ') || 'the parser rejected it';
}

function shortenExpecting(message: string): string {
  const match = / expecting \{(.*)\}$/.exec(message);
  if (!match) return message;
  const alternatives = match[1].split(', ').length;
  return alternatives > 6 ? message.slice(0, match.index) : message;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Results are JSON-shaped once fhirpath.js resolves its internal types; copy objects and arrays. */
function copyJsonValue(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(copyJsonValue);
  if (value !== null && typeof value === 'object') {
    // fromEntries defines own properties, so a "__proto__" key stays a key, not a prototype.
    return Object.fromEntries(Object.entries(value).map(([key, item]) => [key, copyJsonValue(item)]));
  }
  return value;
}
