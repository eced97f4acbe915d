/** `set`: `{vars: {name: FHIRPath}}` → `vars.<name>` (one item unwrapped, none null, several a list). */
import type { SetWith } from '../../modules/blueprints/blueprint.js';
import { evaluateValue } from '../run-context.js';
import { jsonWithin, MAX_STEP_OUTPUT_CHARS, STEP_OUTPUT_TOO_LARGE } from '../step-limits.js';
import { StepFailure, type AutomationHandler } from './automation.js';

export const setAutomation: AutomationHandler = {
  mode: 'local',
  decide(step) {
    const settings = step.automation.with as SetWith;
    const vars: Record<string, unknown> = {};
    // Each expression sees the variables set before it in the same step.
    const context = { ...step.context, vars: { ...step.context.vars } };
    let size = 0;
    for (const [name, expression] of Object.entries(settings.vars)) {
      const value = evaluateValue(step.expressions, context, expression);
      // Checked as each variable is made, not once at the end: variables built from one another
      // can double at each one, and the next would be made from the last before the check.
      size += sizeOf(value);
      if (size > MAX_STEP_OUTPUT_CHARS) throw new StepFailure(`set: with vars.${name}, ${STEP_OUTPUT_TOO_LARGE}`);
      vars[name] = value;
      context.vars[name] = value;
    }
    return { result: { outcome: 'ok', output: { vars }, vars } };
  },
};

/** About as many characters as the value's JSON (exactly, but for a string's escapes); numbers and the like count little. */
function sizeOf(value: unknown): number {
  if (typeof value === 'string') return value.length + 2;
  if (value === null || typeof value !== 'object') return 24;
  return jsonWithin(value, MAX_STEP_OUTPUT_CHARS)?.length ?? MAX_STEP_OUTPUT_CHARS + 1;
}
