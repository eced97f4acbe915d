import {
  compileWithSyntax,
  evaluate,
  ExpressionEvaluationError,
  ExpressionSyntaxError,
  notOneBoolean,
  TOO_DEEP,
  type CompiledExpression,
} from '../../lib/fhirpath.js';
import { constantPatternProblem } from '../../lib/fhirpath-regex.js';
import type { SyntaxNode } from '../../lib/fhirpath-syntax.js';
import { runWithin, TimeBoxExceeded } from '../../lib/time-box.js';

/**
 * How long the check's run on an empty context may take. An expression of the usual kind takes
 * microseconds there; one that takes this long builds its items from literals alone, and would
 * hold the thread that serves every workspace each time it ran.
 */
const CHECK_TIMEOUT_MS = 250;
/**
 * How long parsing may take. An ordinary expression parses in a few milliseconds; one of
 * MAX_EXPRESSION_LENGTH characters of literals in a list (`code in ('a' | 'b' | …)`, a value
 * set written out) takes about 0.4 s, twice, more on a busy machine.
 */
const PARSE_TIMEOUT_MS = 2000;

/**
 * What is wrong with a FHIRPath expression written in a blueprint, or undefined when nothing is.
 *
 * Compiling only checks syntax: fhirpath.js resolves function names when it runs, so a typo such
 * as `exist()` or an unknown `%variable` would otherwise pass import and fail in every run. The
 * expression is therefore also run once against an empty run context, where navigation finds
 * nothing and only such mistakes can throw. A path that starts at a name the run context does
 * not have (`riskScore` for `payload.riskScore`) is refused too: it is empty in every run.
 */
export function expressionProblem(text: string): string | undefined {
  return problemOf(text, false, RUN_CONTEXT);
}

/**
 * What is wrong with a condition (an event trigger's `when`), or undefined: what
 * `expressionProblem` finds, and a condition that gives several items even on an empty run
 * context (`'a' | 'b'`), which is one true or false never, so never holds (a verification round).
 */
export function conditionProblem(text: string): string | undefined {
  return problemOf(text, true, RUN_CONTEXT);
}

/**
 * What is wrong with an event trigger's `when`, or undefined: what `conditionProblem` finds, and
 * a path that starts anywhere but at `payload`. The condition is checked before the run exists,
 * on `{payload}` alone, so `resource.status = 'final'` (`payload.` left out) or
 * `subject.tags contains 'copd'` found nothing, was false for every event, and the trigger
 * started no run with nothing to say why (a walk through docs/integrating.md).
 */
export function triggerConditionProblem(text: string): string | undefined {
  return problemOf(text, true, TRIGGER_CONTEXT);
}

/**
 * The longest expression taken, as an event trigger's `when` (its schema). Parsing costs about
 * 0.2 ms a character of a long expression, on the thread that serves everyone, before anything
 * can be time-boxed.
 */
export const MAX_EXPRESSION_LENGTH = 2000;

function problemOf(text: string, condition: boolean, context: ContextRoots): string | undefined {
  if (text.length > MAX_EXPRESSION_LENGTH) return `is ${text.length} characters long; at most ${MAX_EXPRESSION_LENGTH}`;
  let compiled: CompiledExpression;
  let syntax: SyntaxNode;
  try {
    // Parsed twice (fhirpath.js's compile, and the whole tree the checks below read, paths
    // without calls included: the names a path starts at are read from it), at up to 0.2 ms a
    // character of a long chain such as `1+1+…`: boxed too, so one save holds the thread that
    // serves everyone at most this long.
    ({ compiled, syntax } = runWithin(() => compileWithSyntax(text, true), PARSE_TIMEOUT_MS));
  } catch (error) {
    // `steps.t-1b` does not even parse; the hint says more than the parser's "mismatched input".
    if (error instanceof ExpressionSyntaxError) return hyphenHint(text) ?? `does not compile: ${error.detail}`;
    if (error instanceof TimeBoxExceeded) return `takes longer than ${PARSE_TIMEOUT_MS} ms to parse; shorten it`;
    throw error;
  }
  let pattern: string | undefined;
  try {
    pattern = runWithin(() => constantPatternProblem(syntax), CHECK_TIMEOUT_MS);
  } catch (error) {
    if (error instanceof TimeBoxExceeded) return `takes longer than ${CHECK_TIMEOUT_MS} ms to check its regular expressions; simplify them`;
    if (error instanceof RangeError) return TOO_DEEP;
    throw error;
  }
  if (pattern) return pattern;
  const hint = hyphenHint(text);
  if (hint) return hint;
  let root: string | undefined;
  try {
    root = rootMembers(syntax).find((name) => !context.roots.has(name));
  } catch (error) {
    if (error instanceof RangeError) return TOO_DEEP;
    throw error;
  }
  if (root !== undefined) return context.outside(root);
  let result: unknown[];
  try {
    // An expression such as `(0|1|…|59).select((0|1|…|59).select(…))` builds millions of items
    // from literals alone: checked on the thread that serves every request, one such trigger
    // condition held the process for minutes (a security review).
    result = runWithin(() => evaluate(compiled, { payload: {}, subject: {}, steps: {}, vars: {} }), CHECK_TIMEOUT_MS);
  } catch (error) {
    if (error instanceof ExpressionEvaluationError) {
      return `fails even on an empty run context: ${error.detail}`;
    }
    if (error instanceof TimeBoxExceeded) {
      return `takes longer than ${CHECK_TIMEOUT_MS} ms even on an empty run context (it builds too many items); simplify it`;
    }
    throw error;
  }
  if (!condition) return undefined;
  const notBoolean = notOneBoolean(result);
  if (notBoolean !== null) return `can never hold: it ${notBoolean}`;
  const always = alwaysHolds(result);
  // `subject` or `payload` alone give one item on the empty context, but are null in a run that
  // has none (no subject, no payload sent): a test whether there is one, not a constant.
  return always && alwaysHolds(resultWithNothing(compiled)) ? always : undefined;
}

/** The result over a context whose payload and subject are null, as a run without them has; [] when it fails. */
function resultWithNothing(compiled: CompiledExpression): unknown[] {
  try {
    return runWithin(() => evaluate(compiled, { payload: null, subject: null, steps: {}, vars: {} }), CHECK_TIMEOUT_MS);
  } catch {
    return [];
  }
}

/**
 * A condition that gives one item that is not a Boolean even on an empty run context (`'abc'`,
 * `5`, `today()`): FHIRPath counts such an item as true, so it holds for every event and every
 * run, whatever the data (an integration review: a trigger with `when: "'abc'"` was saved and
 * started a run for every Encounter). Only a comparison or a test was meant.
 */
function alwaysHolds(result: readonly unknown[]): string | undefined {
  if (result.length !== 1 || typeof result[0] === 'boolean') return undefined;
  const kind = typeof result[0] === 'string' ? 'a string' : typeof result[0] === 'number' ? 'a number' : 'a value';
  return `always holds: it gives ${kind}, not true or false, even with no data, and one item that is not a Boolean counts as true; compare it (\`… > 8\`) or test it (\`….exists()\`)`;
}

/** The names an expression's paths may start at, and what to say of a path that starts elsewhere. */
interface ContextRoots {
  roots: ReadonlySet<string>;
  outside(root: string): string;
}

/** What a blueprint's expressions start from: the run context (DESIGN §6). */
const RUN_ROOTS: ReadonlySet<string> = new Set(['payload', 'subject', 'steps', 'vars']);
const RUN_CONTEXT: ContextRoots = { roots: RUN_ROOTS, outside: notInRunContext };
/** What an event trigger's condition starts from: the run does not exist yet (docs/integrating.md §2). */
const TRIGGER_CONTEXT: ContextRoots = { roots: new Set(['payload']), outside: notPayload };

function notPayload(root: string): string {
  if (RUN_ROOTS.has(root)) {
    return `reads ${root}, which a trigger's condition does not have: it sees payload only (the run, with its subject, vars and steps, does not exist yet), so it never holds; test ${root} in a link's when in the blueprint instead`;
  }
  return `reads ${root} at the top, where a trigger's condition has payload only, so it never holds; start the path at payload (payload.${root}…)`;
}

/**
 * A blueprint's expression whose path starts at a name the run context does not have
 * (`riskScore > 5` for `payload.riskScore > 5`): it is empty in every run, so a link on it never
 * holds and a placeholder fills in nothing, and nothing says why (DESIGN §6: expressions are
 * over `{payload, subject, steps, vars}`).
 */
function notInRunContext(root: string): string {
  return `reads ${root} at the top, where the run context has payload, subject, steps and vars only, so it is empty in every run; start the path at one of them (payload.${root}…)`;
}

/**
 * The names a path starts with at the top of an expression (`resource` in `resource.status`),
 * read from the context's root. Function arguments are not looked at: inside `where(…)` a name
 * is read from each item, not from the root.
 */
function rootMembers(node: SyntaxNode): string[] {
  if (node.type === 'ParamList') return [];
  const first = node.children?.[0];
  if (node.type === 'InvocationTerm' && first?.type === 'MemberInvocation' && first.text !== undefined) {
    return [first.text.replace(/^`|`$/g, '')];
  }
  return (node.children ?? []).flatMap(rootMembers);
}

function hyphenHint(text: string): string | undefined {
  const hyphenated = hyphenatedName(text);
  if (!hyphenated) return undefined;
  return `reads ${hyphenated.written} as "${hyphenated.left} - ${hyphenated.right}" (FHIRPath subtracts); write the name in backticks: ${hyphenated.quoted}`;
}

/** `steps.` and an automation id whose hyphen comes before a digit (`steps.t-1`, `steps.check-2b`). */
const STEP_ID_WITH_DIGITS = /(?<![A-Za-z0-9_.%`])steps\.([A-Za-z_][A-Za-z0-9_]*)-([0-9][A-Za-z0-9_-]*)/;

/**
 * A name with a hyphen written bare after a dot (`steps.tag-it.outcome`): FHIRPath reads it as a
 * subtraction, `steps.tag - it`, which compiles, runs, and is empty, so a condition on it never
 * holds and nothing says why. Automation ids and payload keys may hold hyphens (DESIGN §11's
 * own example: `tag-it`); in an expression they are written `steps.\`tag-it\``. Text inside
 * string literals and names already in backticks are not looked at; a hyphen between spaces, or
 * before a digit, is arithmetic and is left alone (`vars.count-1`), but not right after `steps.`:
 * what follows it is always an automation id (`steps.t-1.outcome`), and a step's record is no
 * number to subtract from.
 */
function hyphenatedName(text: string): { written: string; left: string; right: string; quoted: string } | undefined {
  const bare = text.replace(/'(?:[^'\\]|\\.)*'/g, "''").replace(/`[^`]*`/g, '``');
  const stepId = STEP_ID_WITH_DIGITS.exec(bare);
  const match = /\.([A-Za-z_][A-Za-z0-9_]*)-([A-Za-z_][A-Za-z0-9_-]*)/.exec(bare) ?? stepId;
  if (!match) return undefined;
  const [, left, right] = match;
  const before = match === stepId ? 'steps' : (/([A-Za-z_%][A-Za-z0-9_]*)$/.exec(bare.slice(0, match.index))?.[1] ?? '');
  const prefix = before ? `${before}.` : '.';
  return { written: `${prefix}${left}-${right}`, left: `${prefix}${left}`, right, quoted: `${prefix}\`${left}-${right}\`` };
}
