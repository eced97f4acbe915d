import { describe, expect, it } from 'vitest';
import { requireSubject, StepFailure, type StepRequest } from '../../src/engine/automations/automation.js';
import { ExpressionCache } from '../../src/lib/fhirpath.js';

const stepFor = (payload: unknown): StepRequest => ({
  run: { id: 'r', workspaceId: 'w', triggerId: 't', payload, subject: null, subjectRecordId: null },
  nodeId: 'n',
  automation: { id: 'a', type: 'tag', with: { target: 'subject', add: ['x'] } },
  context: { payload, subject: null, steps: {}, vars: {} },
  expressions: new ExpressionCache(),
  now: new Date(),
  stepKey: 'r:n:a',
  mayTryAgain: async () => true,
  holdsLease: () => true,
});

describe('requireSubject', () => {
  it('says where a fired run takes its subject from', () => {
    expect(() => requireSubject(stepFor({ n: 1 }))).toThrow(/a fired run takes it from payload.subject/);
    expect(() => requireSubject(stepFor({ subject: { reference: 'Patient/nobody' } }))).toThrow(/not a record of this workspace/);
  });

  it('says where a run started by an event takes it from, not what a fired run does', () => {
    const error = (() => {
      try {
        requireSubject(stepFor({ event: 'Observation.final', resource: { resourceType: 'Observation', subject: { reference: 'Device/d1' } }, deliveryId: 'd' }));
      } catch (thrown) {
        return thrown;
      }
    })();
    expect(error).toBeInstanceOf(StepFailure);
    expect((error as Error).message).toMatch(/its event's resource names no patient that is a record of this workspace/);
    expect((error as Error).message).not.toMatch(/fired run/);
  });

  it('names deletion as a cause too: a resource that names a deleted patient is not one that names none', () => {
    for (const resource of [
      { resourceType: 'Encounter', id: 'e1', subject: { reference: 'Patient/p-07' } },
      { resourceType: 'Encounter', id: 'e2', subject: { reference: 'urn:uuid:0b1c' } },
      { resourceType: 'Patient', id: 'p-07' },
    ]) {
      expect(() => requireSubject(stepFor({ event: 'Encounter.finished', resource, deliveryId: 'd' }))).toThrow(
        "tag needs the run's subject, and this run has none: its event's resource names no patient that is a record of this workspace (none in its subject, patient, beneficiary, individual or an Appointment's participant, or one deleted before or after the event)",
      );
    }
  });
});
