/** `cancel`: the run ends as `canceled` at this node. */
import type { AutomationHandler } from './automation.js';

export const cancelAutomation: AutomationHandler = {
  mode: 'local',
  decide(step) {
    return { result: { outcome: 'canceled', output: null, end: { status: 'canceled', nodeId: step.nodeId } } };
  },
};
