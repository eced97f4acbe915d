/**
 * `tag`: `{target: subject|pathway, add, remove}` on the subject's record or the run's own
 * Pathway record (id = runId), in the step's transaction, so search sees it when the step is.
 * The change is audited in the same transaction (`record.tags.change`, engine-audit.ts).
 */
import type { TagWith } from '../../modules/blueprints/blueprint.js';
import { adoptTagsFromSource, changeTags } from '../../modules/records/record.repository.js';
import { isRunStatus } from '../run-status.js';
import { recordEngineAudit, tagsChangedAudit } from '../engine-audit.js';
import { filledSettings, requireSubject, StepFailure, type AutomationHandler } from './automation.js';

export const tagAutomation: AutomationHandler = {
  mode: 'local',
  decide(step) {
    const settings = filledSettings<TagWith>(step);
    const add = settings.add ?? [];
    const remove = settings.remove ?? [];
    const output = { target: settings.target, add, remove };
    const who = { runId: step.run.id, nodeId: step.nodeId, automationId: step.automation.id, subjectRecordId: step.run.subjectRecordId };
    if (settings.target === 'pathway') {
      // The Pathway record's status tag belongs to the engine: search must never see a run in
      // two states, or in none.
      const status = [...add, ...remove].find(isRunStatus);
      if (status) throw new StepFailure(`tag: "${status}" is an automation status; a pathway's status tag is set by the engine only`);
      return {
        result: { outcome: 'ok', output },
        write: async (tx, at) => {
          await changeTags(tx, step.run.workspaceId, step.run.id, add, remove, at);
          await recordEngineAudit(tx, step.run, at, tagsChangedAudit(who, { id: step.run.id, target: 'pathway' }, add, remove));
        },
      };
    }
    const subject = requireSubject(step);
    return {
      result: { outcome: 'ok', output },
      write: async (tx, at) => {
        // A subject deleted since the run read it keeps no tags: nothing changed, nothing audited.
        if (!(await changeTags(tx, step.run.workspaceId, subject.id, add, remove, at))) return;
        await adoptTagsFromSource(tx, step.run.workspaceId, subject, add.filter((tag) => !remove.includes(tag)));
        await recordEngineAudit(tx, step.run, at, tagsChangedAudit(who, { id: subject.id, target: 'subject' }, add, remove));
      },
      locksRecord: { workspaceId: step.run.workspaceId, resourceType: subject.resourceType, extId: subject.extId },
      subjectAfter: { ...subject, tags: [...new Set([...subject.tags.filter((tag) => !remove.includes(tag)), ...add])].sort() },
    };
  },
};
