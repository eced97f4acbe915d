/** `wait`: `{duration}` or `{until, timezone}`, placeholders filled: a durable timer (timers.ts has the arithmetic). */
import type { WaitWith } from '../../modules/blueprints/blueprint.js';
import { TimerSettingError, waitDueAt } from '../timers.js';
import { filledSettings, StepFailure, type AutomationHandler } from './automation.js';

export const waitAutomation: AutomationHandler = {
  mode: 'wait',
  begin(step) {
    try {
      return { dueAt: waitDueAt(filledSettings<WaitWith>(step), step.now) };
    } catch (error) {
      if (error instanceof TimerSettingError) throw new StepFailure(`wait: ${error.message}`);
      throw error;
    }
  },
  wake(_step, open) {
    return { result: { outcome: 'elapsed', output: { until: open.dueAt } } };
  },
};
