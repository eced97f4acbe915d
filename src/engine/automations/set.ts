/** `set`: `{vars: {name: FHIRPath}}` → `vars.<name>` (one item unwrapped, none null, several a list). */
import type { SetWith } from '../../modules/blueprints/blueprint.js';
import { evaluateValue } from '../run-context.js';
import type { AutomationHandler } from './automation.js';

export const setAutomation: AutomationHandler = {
  mode: 'local',
  decide(step) {
    const settings = step.automation.with as SetWith;
    const vars: Record<string, unknown> = {};
    // Each expression sees the variables set before it in the same step.
    const context = { ...step.context, vars: { ...step.context.vars } };
    for (const [name, expression] of Object.entries(settings.vars)) {
      vars[name] = evaluateValue(step.expressions, context, expression);
      context.vars[name] = vars[name];
    }
    return { result: { outcome: 'ok', output: { vars }, vars } };
  },
};
