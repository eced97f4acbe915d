/** `fail`: `{message}` (placeholders filled) → the run errors at this node with that message. */
import type { FailWith } from '../../modules/blueprints/blueprint.js';
import { render } from '../run-context.js';
import type { AutomationHandler } from './automation.js';

export const failAutomation: AutomationHandler = {
  mode: 'local',
  decide(step) {
    const { message } = render(step.expressions, step.context, step.automation.with as FailWith);
    const text = typeof message === 'string' ? message : JSON.stringify(message);
    return {
      result: { outcome: 'failed', output: { message: text }, end: { status: 'errored', nodeId: step.nodeId, message: text } },
    };
  },
};
