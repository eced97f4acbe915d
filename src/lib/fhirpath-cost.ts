/**
 * Whether a FHIRPath expression's cost can grow faster than the data it reads, decided from its
 * syntax tree once, when it is compiled.
 *
 * Most expressions a blueprint holds (`payload.riskScore > 5`, a `where` over a resource's
 * codings) cost time in proportion to the data they walk, and a payload's size is bounded. Some
 * do not, and such expressions are evaluated within a time box (lib/fhirpath.ts); the rest run as
 * they are, because a time box costs a watchdog thread per evaluation (lib/time-box.ts):
 * - fhirpath.js compares items pairwise in `distinct()`, `isDistinct()`, `|`/`union`,
 *   `intersect`, `exclude`, `subsetOf` and `supersetOf` when the items are primitives (16,000
 *   ids through `distinct()` took 9 s); `repeat`, `aggregate`, `sort` and a two-argument
 *   `trace` (it evaluates its projection twice) can cost more than linear too.
 * - A per-item function (`where`, `select`, `all`, `exists`) runs its argument once per item. An
 *   argument that walks the item's own parts stays linear (each part is walked once:
 *   `entry.where(resource.code.coding.where(system = 'x').exists())`), and so does a constant
 *   list tested by `in` or `contains`. An argument that reaches beyond the item (a `%` variable),
 *   builds a collection from literals (`|`, `'…'.toChars()`) or multiplies the item's parts
 *   (`combine`, `descendants()`) makes each level of nesting or chaining multiply the work.
 * - A per-item function over a collection built from literals multiplies the same way:
 *   `(0|…|59).select((0|…|59).select(…))` behind a condition the import check's empty context
 *   never meets (a verification round: 11 s for a one-item payload).
 * - V8's `lastIndexOf` searches naively (28 s for 400,000 characters against a 200,000-character
 *   pattern), and `replace` reads `$'`, `$&` and `` $` `` in its replacement, so each is linear
 *   only with constant arguments, and `replace` only without `$`.
 *
 * The list of safe functions is an allow-list: a function not named here (a new one in a later
 * fhirpath.js) counts as one that may grow faster, which only costs the time box.
 */
import type { SyntaxNode } from './fhirpath-syntax.js';

/** Functions whose argument is evaluated once per item of their input. */
const PER_ITEM_FUNCTIONS = new Set(['where', 'select', 'all', 'exists']);

/** Functions whose cost is at most about linear in their input and arguments. */
const LINEAR_FUNCTIONS = new Set([
  // existence, filtering and subsetting without per-item arguments
  'empty', 'not', 'count', 'first', 'last', 'single', 'tail', 'take', 'skip', 'allTrue', 'anyTrue', 'allFalse',
  'anyFalse', 'ofType', 'is', 'as', 'type', 'extension', 'children', 'descendants', 'combine', 'hasValue',
  'getValue', 'iif', 'coalesce', 'defineVariable',
  // aggregates over one collection
  'sum', 'min', 'max', 'avg',
  // conversions
  'toInteger', 'toLong', 'toDecimal', 'toString', 'toDate', 'toDateTime', 'toTime', 'toBoolean', 'toQuantity',
  'convertsToInteger', 'convertsToLong', 'convertsToDecimal', 'convertsToString', 'convertsToDate',
  'convertsToDateTime', 'convertsToTime', 'convertsToBoolean', 'convertsToQuantity',
  // strings (the regular-expression ones run in linear time: lib/fhirpath-regex.ts)
  'indexOf', 'substring', 'startsWith', 'endsWith', 'contains', 'upper', 'lower', 'matches', 'matchesFull',
  'length', 'toChars', 'split', 'join', 'trim', 'encode', 'decode', 'escape', 'unescape',
  // arithmetic and time
  'abs', 'ceiling', 'exp', 'floor', 'ln', 'log', 'power', 'round', 'sqrt', 'truncate', 'precision',
  'lowBoundary', 'highBoundary', 'comparable', 'now', 'today', 'timeOfDay', 'yearOf', 'monthOf', 'dayOf',
  'hourOf', 'minuteOf', 'secondOf', 'millisecondOf', 'timezoneOffsetOf', 'dateOf', 'timeOf',
]);

/** Linear functions that, run once per item, give more items than the item holds. */
const MULTIPLYING_FUNCTIONS = new Set(['combine', 'descendants']);

/**
 * Functions linear only when their arguments are constants: `replace('a', payload.text)` writes
 * the text once per match, a result as large as the product of the two.
 */
const LINEAR_WITH_CONSTANT_ARGUMENTS = new Set(['replace', 'replaceMatches', 'lastIndexOf']);

/** The terms a path over the data starts with: a member of the context or of the item, `$this`, `$index`. */
const DATA_TERMS = new Set(['MemberInvocation', 'ThisInvocation', 'IndexInvocation']);

/**
 * True when the expression (its syntax tree: fhirpath-syntax.ts) may cost more than in
 * proportion to its data. Decided conservatively: unknown constructs count as costly.
 */
export function mayGrowFasterThanData(syntax: SyntaxNode): boolean {
  return costly(syntax, false);
}

/** Whether `node` is costly; `perItem` when it runs once per item of an enclosing function's input. */
function costly(node: SyntaxNode, perItem: boolean): boolean {
  const children = node.children ?? [];
  switch (node.type) {
    case 'FunctionInvocation':
      return costlyFunction(node, perItem);
    case 'InvocationExpression': {
      const [input, invocation] = children;
      if (invocation?.type === 'FunctionInvocation') {
        // Iterating a collection that does not come from the data: `(0|…|59).select(…)`.
        if (PER_ITEM_FUNCTIONS.has(functionName(invocation)) && !DATA_TERMS.has(leftmostTerm(input).type)) return true;
        // Once per item, a function of something other than the item: `'…'.toChars()`.
        if (perItem && !DATA_TERMS.has(leftmostTerm(input).type)) return true;
      }
      return childrenCostly(node, perItem);
    }
    case 'MembershipExpression': {
      // `code in ('a' | 'b')`: a constant list tested once per item, no item made.
      const [left, right] = children;
      const [value, list] = node.text === 'in' ? [left, right] : [right, left];
      if (list !== undefined && value !== undefined && literalsOnly(list)) return costly(value, perItem);
      return childrenCostly(node, perItem);
    }
    case 'UnionExpression':
      // `('a' | 'b')` of literals is a constant; `|` over data compares its items pairwise, and
      // once per item even a constant list multiplies what a `select` gives.
      return perItem || !literalsOnly(node) || childrenCostly(node, perItem);
    case 'ExternalConstantTerm':
      // `%resource` and its kin reach the whole context: read once per item, that is quadratic.
      return perItem;
    case 'TotalInvocation':
      return true;
    default:
      return childrenCostly(node, perItem);
  }
}

function costlyFunction(node: SyntaxNode, perItem: boolean): boolean {
  const name = functionName(node);
  const args = functionArguments(node);
  if (PER_ITEM_FUNCTIONS.has(name)) return args.some((arg) => costly(arg, true));
  if (perItem && MULTIPLYING_FUNCTIONS.has(name)) return true;
  if (LINEAR_FUNCTIONS.has(name)) return args.some((arg) => costly(arg, perItem));
  if (LINEAR_WITH_CONSTANT_ARGUMENTS.has(name)) return !args.every(literalsOnly) || (name === 'replace' && args.some(mentionsDollar));
  return true;
}

function functionName(invocation: SyntaxNode): string {
  const functn = invocation.children?.find((child) => child.type === 'Functn');
  return functn?.text ?? functn?.children?.find((child) => child.type === 'Identifier')?.text ?? '';
}

/** The arguments: a ParamList, or for sort() its SortDirectionArguments. */
function functionArguments(invocation: SyntaxNode): SyntaxNode[] {
  const functn = invocation.children?.find((child) => child.type === 'Functn');
  return (functn?.children ?? []).filter((child) => child.type !== 'Identifier');
}

/** The term a path starts with: `payload` in `payload.a.b`, the literal in `'x'.upper()`. */
function leftmostTerm(node: SyntaxNode | undefined): SyntaxNode {
  let current = node;
  while (current && ['InvocationExpression', 'TermExpression', 'InvocationTerm'].includes(current.type)) current = current.children?.[0];
  return current ?? { type: 'unknown' };
}

function childrenCostly(node: SyntaxNode, perItem: boolean): boolean {
  return (node.children ?? []).some((child) => costly(child, perItem));
}

function literalsOnly(node: SyntaxNode): boolean {
  if (node.type === 'InvocationTerm' || node.type === 'ExternalConstantTerm' || node.type === 'InvocationExpression') return false;
  return (node.children ?? []).every(literalsOnly);
}

function mentionsDollar(node: SyntaxNode): boolean {
  return (node.text ?? '').includes('$') || (node.children ?? []).some(mentionsDollar);
}
