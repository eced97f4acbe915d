/** `fail`: `{message}` (placeholders filled) → the run errors at this node with that message. */
import type { FailWith } from '../../modules/blueprints/blueprint.js';
import { render } from '../run-context.js';
import type { AutomationHandler } from './automation.js';
import { cutMessage } from '../step-limits.js';

export const failAutomation: AutomationHandler = {
  mode: 'local',
  decide(step) {
    const { message } = render(step.expressions, step.context, step.automation.with as FailWith);
    // Cut as the run's error is (step-limits.ts), so the step's output says what the run says.
    const text = cutMessage(typeof message === 'string' ? message : JSON.stringify(message));
    return {
      result: { outcome: 'failed', output: { message: text }, end: { status: 'errored', nodeId: step.nodeId, message: text } },
    };
  },
};
