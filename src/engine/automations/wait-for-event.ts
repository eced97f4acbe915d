/**
 * `wait_for_event`: `{event, timeout}` for the run's subject. Starting the step records the wait
 * (run_event_waits) in the step's transaction; `wakeRunsWaitingFor` (event-waits.ts) stores the
 * event there and makes the run due. Waking ends the wait with outcome `event` (output: the
 * event as recorded) or `timeout` (output null). The timeout is a deadline: an event raised
 * after it (the run paused, or no worker free) ends the wait as `timeout`.
 */
import type { WaitForEventWith } from '../../modules/blueprints/blueprint.js';
import { afterDuration, TimerSettingError } from '../timers.js';
import { deleteEventWait, insertEventWait } from '../sql/event-wait-rows.js';
import { filledSettings, ReplanNeeded, requireSubject, StepFailure, type AutomationHandler } from './automation.js';

export const waitForEventAutomation: AutomationHandler = {
  mode: 'wait',
  begin(step) {
    const settings = filledSettings<WaitForEventWith>(step);
    const subject = requireSubject(step);
    let dueAt: string | null = null;
    try {
      if (settings.timeout !== undefined) dueAt = afterDuration(step.now, settings.timeout);
    } catch (error) {
      if (error instanceof TimerSettingError) throw new StepFailure(`wait_for_event: timeout ${error.message}`);
      throw error;
    }
    return {
      dueAt,
      event: settings.event,
      write: (tx) =>
        insertEventWait(tx, {
          run_id: step.run.id,
          node_id: step.nodeId,
          automation_id: step.automation.id,
          workspace_id: step.run.workspaceId,
          subject_record_id: subject.id,
          event: settings.event,
        }),
      // The patient's rows, as a delivery about the patient locks them: the wait begins wholly
      // before or wholly after such a delivery (engine/event-waits.ts).
      locksRecord: { workspaceId: step.run.workspaceId, resourceType: subject.resourceType, extId: subject.extId },
    };
  },
  wake(step, open, reason, received) {
    const key = { runId: step.run.id, nodeId: step.nodeId };
    if (reason === 'event' && received) {
      // The timeout is an absolute deadline: an event raised after it, while the run was paused
      // or waited for a worker, comes too late, and the wait ends as it would have on time.
      const inTime = open.dueAt == null || received.at <= open.dueAt;
      return {
        result: inTime ? { outcome: 'event', output: received.event } : { outcome: 'timeout', output: null },
        write: async (tx) => {
          await deleteEventWait(tx, key, { onlyIfNoEvent: false });
        },
      };
    }
    return {
      result: { outcome: 'timeout', output: null },
      alone: true,
      write: async (tx) => {
        // An event that came after the worker looked wins over the timeout.
        if (!(await deleteEventWait(tx, key, { onlyIfNoEvent: true }))) throw new ReplanNeeded('an event came in');
      },
    };
  },
};
