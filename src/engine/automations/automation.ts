/**
 * What every automation type implements. Three modes, by where the step's effect lives:
 * - `local`: the effect is a database write (tags) or nothing (set, fail, stop, cancel). The
 *   step's start record, its effect and its finish record commit in ONE transaction: exactly once.
 * - `call`: the effect is outside (http, start_pathway). The start is committed before the call
 *   and the outcome after it; a worker lost in between leaves the step open, and the next worker
 *   repeats the call with the same idempotency key (at-least-once).
 * - `wait`: the step starts (its record stays open) and the run is released until the wait is
 *   due or its event comes; waking finishes it.
 */
import type { Automation } from '../../modules/blueprints/blueprint.js';
import type { ExpressionCache, ExpressionContext } from '../../lib/fhirpath.js';
import type { DbOrTx } from '../../storage/database.js';
import type { OpenStep } from '../engine-state.js';
import type { ReceivedEvent, StepResult } from '../executor.js';
import type { RunInHand, SubjectView } from '../run-context.js';
import type { EngineServices } from '../engine-services.js';
import type { RecordKey } from '../../modules/records/record-locks.js';
import { subjectReference } from '../../modules/triggers/subject-reference.js';
import { settingsProblems } from '../../modules/blueprints/automation.validate.js';
import { findPlaceholders } from '../../lib/placeholders.js';
import { render } from '../run-context.js';
import type { CallDisclosure } from '../engine-audit.js';

export interface StepRequest {
  run: RunInHand;
  nodeId: string;
  automation: Automation;
  context: ExpressionContext;
  expressions: ExpressionCache;
  now: Date;
  /** `<runId>:<nodeId>:<automationId>`: the same for every attempt of this step. */
  stepKey: string;
  /**
   * Whether a call may try again, asked of the store: this worker still holds the run (its
   * lease, at its fence) and the run is still running. A worker that stalled (a pause of the
   * process, a frozen VM) past its lease finds its try timed out when it wakes, and must not
   * send it again once another worker has taken the run over and recorded the outcome; a run
   * canceled or paused while its call waited to try again sends nothing more; and a worker that
   * is stopping tries no more (the run is let go, and taken up again elsewhere).
   */
  mayTryAgain(): Promise<boolean>;
  /**
   * Whether this worker's lease on the run, as it last took or extended it, has not run out by
   * its own clock (and the heartbeat did not find it taken): no store read, so it is asked right
   * before each request is sent, the first included. A worker that stalled past its lease
   * between recording the step and sending (a paused process, a frozen VM) must not send once
   * another worker may have taken the run and made the call (a soak: after a recorded `ok`, 1 in
   * 28 stalls). The receiver's idempotency key covers the moment left between this and the send.
   */
  holdsLease(): boolean;
}

/**
 * Thrown by a call that may not try again (its run taken over, paused or canceled, or its worker
 * stopping): the worker writes no outcome and lets go of the run.
 */
export class CallAbandoned extends Error {}

/** A database write that belongs to the step's own transaction. */
export type StepWrite = (tx: DbOrTx, at: string) => Promise<void>;

export interface LocalOutcome {
  result: StepResult;
  write?: StepWrite;
  /**
   * The run's subject as it is once this step commits (a `tag` step on it): the node's links are
   * routed with it, and it becomes the run's subject after the commit.
   */
  subjectAfter?: SubjectView;
  /** `write` may throw ReplanNeeded: commit this step in a transaction of its own. */
  alone?: boolean;
  /** The record `write` changes that deliveries change too (step-write.ts). */
  locksRecord?: RecordKey;
}

export interface WaitStart {
  /** When the wait ends (timer) or times out (event); null = no timeout. */
  dueAt: string | null;
  event?: string;
  write?: StepWrite;
  /** The record that `write` must hold against deliveries (step-write.ts). */
  locksRecord?: RecordKey;
}

/** A call's result, and what it sent out of the service when it did (an `http` step: audited with its outcome). */
export interface CallOutcome {
  result: StepResult;
  sent?: CallDisclosure;
}

/** Thrown by a step whose settings or context do not let it run: the run errors at that node. */
export class StepFailure extends Error {}

/** Thrown inside a step's transaction when a concurrent change (an event) means: plan again. */
export class ReplanNeeded extends Error {}

export type AutomationHandler =
  | { mode: 'local'; decide(step: StepRequest, services: EngineServices): LocalOutcome }
  | {
      mode: 'call';
      call(step: StepRequest, services: EngineServices): Promise<CallOutcome>;
      /**
       * Where a call of this step would send the run's data (`http`: its method and the URL's
       * origin), worked out without sending; null when it cannot be (a URL that does not fill).
       * Audits an earlier attempt that never recorded its outcome (engine-audit.ts).
       */
      target?(step: StepRequest): { method: string; origin: string } | null;
    }
  | {
      mode: 'wait';
      begin(step: StepRequest, services: EngineServices): WaitStart;
      wake(step: StepRequest, open: OpenStep, reason: 'elapsed' | 'event' | 'timeout', received?: ReceivedEvent): LocalOutcome;
    };

/**
 * The subject an automation needs, or a clear failure when the run has none. A fired run whose
 * `payload.subject` names a patient the workspace does not know gets its own message: that is
 * the usual cause (the Patient not delivered yet, or a typo in the reference), and "has none"
 * would send the reader looking in the wrong place. The reference itself stays out of the
 * message (an extId may be a medical record number).
 */
export function requireSubject(step: StepRequest) {
  if (!step.run.subject) {
    const needs = `${step.automation.type} needs the run's subject`;
    if (isEventPayload(step.run.payload)) {
      // Both causes, since a run cannot tell them apart (a reference to the bundle's own Patient,
      // `urn:uuid:…`, was resolved with the delivery): "names no patient" alone sent readers to
      // check a resource that named one, whose patient had been deleted (a soak).
      throw new StepFailure(
        `${needs}, and this run has none: its event's resource names no patient that is a record of this workspace (none in its subject, patient, beneficiary, individual or an Appointment's participant, or one deleted before or after the event)`,
      );
    }
    throw new StepFailure(
      subjectReference(step.run.payload) !== null
        ? `${needs}, and payload.subject names a patient that is not a record of this workspace (deliver the Patient first, or check the reference)`
        : `${needs}, and this run has none (a fired run takes it from payload.subject, {"reference": "Patient/<extId>"})`,
    );
  }
  return step.run.subject;
}

/** A run started by an event carries `{event, resource, deliveryId}` (DESIGN §7). */
function isEventPayload(payload: unknown): boolean {
  return typeof payload === 'object' && payload !== null && typeof (payload as { event?: unknown }).event === 'string' && 'resource' in payload;
}

/**
 * The step's settings with their `{{ }}` placeholders filled from the run context, checked
 * against the same rules import applies to settings written as they are (a filled-in duration
 * must be a duration, a tag a slug): a value that breaks them errors the run at this node, with
 * the rule it broke. Settings without placeholders were checked at import and are used as written.
 */
export function filledSettings<T>(step: StepRequest): T {
  const written = step.automation.with;
  if (findPlaceholders(written).length === 0) return written as T;
  const filled = render(step.expressions, step.context, written);
  requireValidFilled(step.automation.type, filled);
  return filled as T;
}

/** Fails the step when settings, once filled, break a rule import applies to written ones. */
export function requireValidFilled(type: Automation['type'], filled: unknown): void {
  const problems = settingsProblems(type, filled);
  if (problems.length > 0) throw new StepFailure(`${type}: once its placeholders are filled, ${problems.join('; ')}`);
}
