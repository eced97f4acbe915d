import {
  compileExpression,
  evaluate,
  ExpressionEvaluationError,
  ExpressionSyntaxError,
  type CompiledExpression,
} from '../../lib/fhirpath.js';

/**
 * What is wrong with a FHIRPath expression written in a blueprint, or undefined when nothing is.
 *
 * Compiling only checks syntax: fhirpath.js resolves function names when it runs, so a typo such
 * as `exist()` or an unknown `%variable` would otherwise pass import and fail in every run. The
 * expression is therefore also run once against an empty run context, where navigation finds
 * nothing and only such mistakes can throw.
 */
export function expressionProblem(text: string): string | undefined {
  let compiled: CompiledExpression;
  try {
    compiled = compileExpression(text);
  } catch (error) {
    if (error instanceof ExpressionSyntaxError) return `does not compile: ${error.detail}`;
    throw error;
  }
  try {
    evaluate(compiled, { payload: {}, subject: {}, steps: {}, vars: {} });
  } catch (error) {
    if (error instanceof ExpressionEvaluationError) {
      return `fails even on an empty run context: ${error.detail}`;
    }
    throw error;
  }
  return undefined;
}
