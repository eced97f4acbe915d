/** `stop`: the run ends as `stopped` at this node. */
import type { AutomationHandler } from './automation.js';

export const stopAutomation: AutomationHandler = {
  mode: 'local',
  decide(step) {
    return { result: { outcome: 'stopped', output: null, end: { status: 'stopped', nodeId: step.nodeId } } };
  },
};
