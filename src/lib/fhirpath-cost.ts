/**
 * Whether a FHIRPath expression's cost can grow faster than the data it reads, decided from its
 * syntax tree once, when it is compiled.
 *
 * Most expressions a blueprint holds (`payload.riskScore > 5`, a `where` over a resource's
 * codings) cost time in proportion to the data they walk, and a payload's size is bounded. Some
 * do not: fhirpath.js compares items pairwise in `distinct()`, `isDistinct()`, `|`/`union`,
 * `intersect`, `exclude`, `subsetOf` and `supersetOf` when the items are primitives (16,000 ids
 * through `distinct()` took 9 s here), `repeat` and `aggregate` can build on every item, and a
 * `where`/`select`/`all`/`exists`/`sort` argument that reads a `%` variable walks data beyond
 * the item once per item. (An argument that iterates the item's own parts, such as
 * `entry.where(resource.code.coding.where(system = 'x').exists())`, stays linear: each part is
 * walked once.) Such expressions are evaluated within a time box
 * (lib/fhirpath.ts); the rest run as they are, because a time box costs a watchdog thread per
 * evaluation (lib/time-box.ts).
 *
 * The list of safe functions is an allow-list: a function not named here (a new one in a later
 * fhirpath.js) counts as one that may grow faster, which only costs the time box.
 */
import fhirpath from 'fhirpath';

interface SyntaxNode {
  type: string;
  text?: string;
  children?: SyntaxNode[];
}

/** Functions whose argument is evaluated once per item of their input. */
const PER_ITEM_FUNCTIONS = new Set(['where', 'select', 'all', 'exists', 'sort']);

/** Functions whose cost is at most about linear in their input and arguments. */
const LINEAR_FUNCTIONS = new Set([
  // existence, filtering and subsetting without per-item arguments
  'empty', 'not', 'count', 'first', 'last', 'single', 'tail', 'take', 'skip', 'allTrue', 'anyTrue', 'allFalse',
  'anyFalse', 'ofType', 'is', 'as', 'type', 'extension', 'children', 'descendants', 'combine', 'hasValue',
  'getValue', 'iif', 'coalesce', 'trace', 'defineVariable',
  // aggregates over one collection
  'sum', 'min', 'max', 'avg',
  // conversions
  'toInteger', 'toLong', 'toDecimal', 'toString', 'toDate', 'toDateTime', 'toTime', 'toBoolean', 'toQuantity',
  'convertsToInteger', 'convertsToLong', 'convertsToDecimal', 'convertsToString', 'convertsToDate',
  'convertsToDateTime', 'convertsToTime', 'convertsToBoolean', 'convertsToQuantity',
  // strings (the regular-expression ones run in linear time: lib/fhirpath-regex.ts)
  'indexOf', 'lastIndexOf', 'substring', 'startsWith', 'endsWith', 'contains', 'upper', 'lower',
  'matches', 'matchesFull', 'length', 'toChars', 'split', 'join', 'trim', 'encode', 'decode',
  'escape', 'unescape',
  // arithmetic and time
  'abs', 'ceiling', 'exp', 'floor', 'ln', 'log', 'power', 'round', 'sqrt', 'truncate', 'precision',
  'lowBoundary', 'highBoundary', 'comparable', 'now', 'today', 'timeOfDay', 'yearOf', 'monthOf', 'dayOf',
  'hourOf', 'minuteOf', 'secondOf', 'millisecondOf', 'timezoneOffsetOf', 'dateOf', 'timeOf',
]);

/**
 * Functions linear when their arguments are constants: `replace('a', payload.text)` writes the
 * text once per match, a result as large as the product of the two.
 */
const LINEAR_WITH_CONSTANT_ARGUMENTS = new Set(['replace', 'replaceMatches']);

/**
 * True when `text` (which must compile) may cost more than in proportion to its data.
 * Decided conservatively: unknown constructs count as costly.
 */
export function mayGrowFasterThanData(text: string): boolean {
  return costly(fhirpath.parse(text) as SyntaxNode, false);
}

/** Whether `node` is costly; `perItem` when it runs once per item of an enclosing function's input. */
function costly(node: SyntaxNode, perItem: boolean): boolean {
  switch (node.type) {
    case 'FunctionInvocation':
      return costlyFunction(node, perItem);
    case 'UnionExpression':
      // `('a' | 'b')` of literals is a constant; `|` over data compares its items pairwise.
      return !literalsOnly(node) || childrenCostly(node, perItem);
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
  const functn = node.children?.find((child) => child.type === 'Functn');
  const parts = functn?.children ?? [];
  const name = functn?.text ?? parts.find((child) => child.type === 'Identifier')?.text ?? '';
  // The arguments: a ParamList, or for sort() its SortDirectionArguments.
  const args = parts.filter((child) => child.type !== 'Identifier');
  if (PER_ITEM_FUNCTIONS.has(name)) return args.some((arg) => costly(arg, true));
  if (LINEAR_FUNCTIONS.has(name)) return args.some((arg) => costly(arg, perItem));
  if (LINEAR_WITH_CONSTANT_ARGUMENTS.has(name)) return !args.every(literalsOnly);
  return true;
}

function childrenCostly(node: SyntaxNode, perItem: boolean): boolean {
  return (node.children ?? []).some((child) => costly(child, perItem));
}

function literalsOnly(node: SyntaxNode): boolean {
  if (node.type === 'InvocationTerm' || node.type === 'ExternalConstantTerm' || node.type === 'InvocationExpression') return false;
  return (node.children ?? []).every(literalsOnly);
}
