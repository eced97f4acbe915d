/**
 * One claimed run, executed step by step until it ends, sleeps, pauses, or the lease is lost.
 * Each turn reads the same: plan (pure), then one guarded write per move, committed with the
 * writes of the worker's other runs (step-committer.ts):
 * - a local step: guard + effect + step record (+ the run's end) together;
 * - a call: guard + open step record; the call, outside any transaction; fenced outcome record;
 * - a wait: guard + open step record; later a wake-up finishes it;
 * - sleep: release the run until its earliest timer, unless an event came meanwhile;
 * - end: the status change (with the Pathway status tag), fenced, ending the lease.
 * When a guard fails, the run is read again to learn why: paused or ended (the worker lets go),
 * or taken by another worker (the worker stops, writing nothing more).
 */
import type { ExpressionCache } from '../lib/fhirpath.js';
import { uuidv7 } from '../lib/ids.js';
import type { RunStepTable } from '../storage/database.js';
import { AUTOMATIONS } from './automations/index.js';
import { CallAbandoned, ReplanNeeded, StepFailure, type AutomationHandler, type CallOutcome, type LocalOutcome, type StepRequest } from './automations/automation.js';
import { httpSentAudit, interruptedCallAudit, recordEngineAudit } from './engine-audit.js';
import { hasEventWaits, type EngineState, type OpenStep, type RunEnd } from './engine-state.js';
import type { EngineServices } from './engine-services.js';
import { beginStep, finishStep, plan, planAfterStep, type Move, type ReceivedEvent, type StepResult } from './executor.js';
import type { GraphIndex } from './graph-index.js';
import { expressionContext, linkCheck, type RunInHand } from './run-context.js';
import { receivedEvents } from './sql/event-wait-rows.js';
import type { Lease } from './sql/lease.js';
import { readRunLease } from './sql/read-run-lease.js';
import { releaseRun } from './sql/release-run.js';
import { isUnclaimed } from './sql/claim-on-write.js';
import type { StepCommitter, StepFinish, StepWrite } from './step-committer.js';
import { storableText } from '../lib/storable-text.js';
import { cutMessage, jsonWithin, MAX_RUN_STATE_CHARS, MAX_STEP_OUTPUT_CHARS, RUN_STATE_TOO_LARGE, RunStateTooLarge, STEP_OUTPUT_TOO_LARGE } from './step-limits.js';

/** How the worker and an execution talk: the lease, the shared commit, and whether to stop. */
export interface ExecutionControl {
  lease: Lease;
  committer: StepCommitter;
  /** The status the run was claimed in; a scheduled run turns running with its first write. */
  claimedAs: 'scheduled' | 'running';
  /** The heartbeat found the lease taken: write nothing more. */
  lost(): boolean;
  /**
   * The lease as this worker last took or extended it has not run out by the worker's clock,
   * and was not found taken: no store read (StepRequest.holdsLease).
   */
  holdsLease(): boolean;
  /** The worker is stopping: let go at the next step boundary. */
  stopping(): boolean;
  /**
   * Claims a run read unclaimed (SQLite, sql/claim-on-write.ts) before a write that is not a
   * step's; true at once when the lease is claimed already. False: the run changed since it was
   * read, and is not this execution's to write.
   */
  claim(): Promise<boolean>;
}

type Turn = 'continue' | 'done';

const NO_EVENTS: ReadonlyMap<string, ReceivedEvent> = new Map();

/** A guarded write found the run paused, ended, or no longer ours. */
class GuardFailed extends Error {}

/** A step about to run: its id, attempt and start; `recorded` when its row exists (a wait). */
interface StepInHand {
  stepId: string;
  attempt: number;
  startedAt: string;
  recorded: boolean;
}

export class RunExecution {
  private state: EngineState;
  /** What the run's status is, as far as this execution wrote it. */
  private status: 'scheduled' | 'running';

  constructor(
    private readonly services: EngineServices,
    private readonly expressions: ExpressionCache,
    private readonly graph: GraphIndex,
    private readonly run: RunInHand,
    state: EngineState,
    private wakeSeq: number,
    private readonly control: ExecutionControl,
  ) {
    this.state = state;
    this.status = control.claimedAs;
  }

  private get lease(): Lease {
    return this.control.lease;
  }

  async execute(): Promise<void> {
    // A run that keeps failing its guard while still ours and running is a bug; do not spin.
    let unexplained = 0;
    while (!this.control.lost()) {
      if (this.control.stopping()) {
        // A run read unclaimed has nothing of this execution's in the store: it is due as it was.
        if (!isUnclaimed(this.lease)) await releaseRun(this.services.db, this.lease, { availableAt: this.nowIso(), state: JSON.stringify(this.state) });
        return;
      }
      let turn: Turn;
      try {
        turn = await this.turn();
      } catch (error) {
        if (error instanceof ReplanNeeded) continue;
        if (!(error instanceof GuardFailed)) throw error;
        turn = await this.afterGuardFailed();
        if (turn === 'continue' && ++unexplained > 3) throw new Error('the run failed its guard while still held and running');
      }
      if (turn === 'done') return;
    }
  }

  private async turn(): Promise<Turn> {
    const now = this.services.clock.now();
    const at = now.toISOString();
    const events = hasEventWaits(this.state) ? await this.readEvents() : NO_EVENTS;
    const holds = linkCheck(this.expressions, expressionContext(this.run, this.state));
    const { state, move } = plan(this.graph, this.state, { now: at, holds, events });
    switch (move.kind) {
      case 'end':
        await this.commit({ state, at, requireRunning: true, end: endOf(move.end) });
        return 'done';
      case 'sleep':
        return this.sleep(state, move.until);
      case 'run':
        return this.runStep(state, move, now);
      case 'wake':
        return this.wake(state, move, now);
    }
  }

  /** wake_seq first, then the events: an event recorded after this read raises wake_seq. */
  private async readEvents(): Promise<ReadonlyMap<string, ReceivedEvent>> {
    const row = await readRunLease(this.services.db, this.run.id);
    if (row) this.wakeSeq = row.wake_seq;
    return receivedEvents(this.services.db, this.run.id);
  }

  /**
   * Submits a guarded write; on success the run's state is the one written. A write that records
   * a step's result (`limitState`) throws RunStateTooLarge, writing nothing, when the run's
   * progress would pass MAX_RUN_STATE_CHARS: its caller records the step as failed instead.
   */
  private async commit(write: Omit<StepWrite, 'lease' | 'state' | 'from'> & { state: EngineState; limitState?: boolean }): Promise<void> {
    const next = write.state;
    const stateJson = jsonWithin(next, write.limitState ? MAX_RUN_STATE_CHARS : Number.POSITIVE_INFINITY);
    if (stateJson === null) throw new RunStateTooLarge(RUN_STATE_TOO_LARGE);
    // A run that ends while another branch waits leaves no step open and no event wait behind.
    const closeOpenSteps = write.end !== undefined && Object.values(next.nodes).some((node) => node.open);
    // Every property named, in one order, absent ones undefined: one object shape for every write.
    // Spread from the callers' objects (each its own set of properties), this object took the
    // slow generic copy and every reader of it a lookup by name: 7 µs of a one-node run's 100
    // (--cpu-prof on compiled code, 2026-11-28).
    const applied = await this.control.committer.submit({
      lease: this.lease,
      at: write.at,
      from: this.status,
      state: stateJson,
      requireRunning: write.requireRunning,
      end: write.end,
      insertStep: write.insertStep,
      finishStep: write.finishStep,
      interruptStep: write.interruptStep,
      closeOpenSteps,
      effect: write.effect,
      locksRecord: write.locksRecord,
      alone: write.alone,
    });
    if (!applied) throw new GuardFailed();
    this.state = next;
    this.status = 'running';
    if (write.end?.status === 'errored') this.logErrored(write.end.error?.nodeId ?? '', write.state);
  }

  /**
   * A run that errored is worth a line at 2 a.m.: which run, trigger and node, so the timeline
   * can be read (GET /v1/runs/{runId}/steps). Not the message: it may quote the run's data.
   * Runs that end otherwise are not logged, one line each would be most of a busy worker's output.
   */
  private logErrored(nodeId: string, state: EngineState): void {
    this.services.logger.warn({ ...this.logFields(nodeId), ...this.failedAutomation(nodeId, state) }, 'run errored');
  }

  /**
   * Which automation of the node failed, and its type (`http`, `tag`, …): whether to look at a
   * partner system or at the blueprint, without reading the run. None when a link's condition
   * failed rather than a step.
   */
  private failedAutomation(nodeId: string, state: EngineState): { automationId?: string; automation?: string } {
    const node = this.graph.blueprint.nodes.find((candidate) => candidate.id === nodeId);
    const failed = node?.automations?.find((automation) => state.steps[automation.id]?.outcome === 'failed');
    return failed ? { automationId: failed.id, automation: failed.type } : {};
  }

  /** What names a run and this worker in a log line (never its data). */
  private logFields(nodeId: string) {
    return { runId: this.run.id, workspaceId: this.run.workspaceId, triggerId: this.run.triggerId, nodeId, workerId: this.lease.owner };
  }

  /**
   * A call made again because its last attempt recorded no outcome: its worker died, lost the
   * run (a lease that ran out while it stalled), or let it go paused. Worth a warning: the
   * receiving system may see the call twice (with the same Idempotency-Key), and a worker that
   * takes over another's runs is how an on-call engineer learns one was lost.
   */
  private logRedo(move: Extract<Move, { kind: 'run' }>, stepId: string): void {
    this.services.logger.warn(
      { ...this.logFields(move.nodeId), automationId: move.automation.id, automation: move.automation.type, attempt: move.attempt, stepId, interruptedStepId: move.redo!.stepId },
      'making a call again: its last attempt recorded no outcome (its worker stopped or lost the run, or the run was paused mid-call); the receiver may see it twice, with the same Idempotency-Key',
    );
  }

  private async sleep(state: EngineState, until: string): Promise<Turn> {
    if (!(await this.control.claim())) return 'done';
    const released = await releaseRun(this.services.db, this.lease, {
      availableAt: until,
      state: JSON.stringify(state),
      wakeSeq: this.wakeSeq,
    });
    if (released) return 'done';
    const row = await readRunLease(this.services.db, this.run.id);
    if (!this.isOurs(row)) return 'done';
    // An event came in since we looked: look again instead of sleeping past it.
    this.wakeSeq = row.wake_seq;
    this.state = state;
    return 'continue';
  }

  private request(state: EngineState, nodeId: string, automation: StepRequest['automation'], now: Date): StepRequest {
    return {
      run: this.run,
      nodeId,
      automation,
      context: expressionContext(this.run, state),
      expressions: this.expressions,
      now,
      stepKey: `${this.run.id}:${nodeId}:${automation.id}`,
      mayTryAgain: () => this.mayTryAgain(),
      holdsLease: () => this.control.holdsLease(),
    };
  }

  /**
   * Whether the store still shows this run leased to us at our fence (and the heartbeat agrees),
   * and running: neither paused nor canceled since the call began; and this worker is not
   * stopping: a stop waits for the try in flight, never for tries yet to come (a drain took four
   * minutes of retries to a partner that did not answer), and the run, let go, is taken up by
   * another worker or the next start, which makes the call again with the same key.
   */
  private async mayTryAgain(): Promise<boolean> {
    if (this.control.lost() || this.control.stopping()) return false;
    const row = await readRunLease(this.services.db, this.run.id);
    return this.isOurs(row) && row.automation_status === 'running';
  }

  /** A run row read back: still leased to this execution, at its fence. */
  private isOurs(row: { lease_owner: string | null; lease_fence: number } | undefined): row is NonNullable<typeof row> {
    return row !== undefined && row.lease_owner === this.lease.owner && row.lease_fence === this.lease.fence;
  }

  private async runStep(state: EngineState, move: Extract<Move, { kind: 'run' }>, now: Date): Promise<Turn> {
    const handler = AUTOMATIONS[move.automation.type];
    const request = this.request(state, move.nodeId, move.automation, now);
    const at = now.toISOString();
    const step: StepInHand = { stepId: uuidv7(now.getTime()), attempt: move.attempt, startedAt: at, recorded: false };
    if (handler.mode === 'local') {
      return this.commitLocal(state, move, attempt(() => handler.decide(request, this.services), request), at, step);
    }
    if (handler.mode === 'wait') {
      let begun: ReturnType<typeof handler.begin>;
      try {
        begun = handler.begin(request, this.services);
      } catch (error) {
        return this.commitLocal(state, move, failureOutcome(error, request), at, step);
      }
      const open: OpenStep = {
        stepId: step.stepId,
        automationId: move.automation.id,
        attempt: move.attempt,
        startedAt: at,
        dueAt: begun.dueAt,
        ...(begun.event !== undefined ? { event: begun.event } : {}),
      };
      await this.commit({
        state: beginStep(state, move.nodeId, open),
        at,
        requireRunning: true,
        effect: begun.write,
        locksRecord: begun.locksRecord,
        insertStep: this.stepRow(move.nodeId, move.automation, step),
      });
      return 'continue';
    }
    return this.call(state, move, request, handler, step);
  }

  /**
   * A call: the open step is committed before it, the outcome after it. If the lease is lost
   * meanwhile the outcome cannot be recorded, and the next worker repeats the call with the
   * same idempotency key (the one side effect that may happen twice).
   */
  private async call(
    state: EngineState,
    move: Extract<Move, { kind: 'run' }>,
    request: StepRequest,
    handler: Extract<AutomationHandler, { mode: 'call' }>,
    step: StepInHand,
  ): Promise<Turn> {
    const open: OpenStep = { stepId: step.stepId, automationId: move.automation.id, attempt: move.attempt, startedAt: step.startedAt };
    const started = beginStep(state, move.nodeId, open);
    const who = { runId: this.run.id, nodeId: move.nodeId, automationId: move.automation.id, subjectRecordId: this.run.subjectRecordId };
    if (move.redo) this.logRedo(move, step.stepId);
    // The attempt this one replaces may have reached the partner: audited as it is closed, so
    // that each attempt is, whatever becomes of this one (engine-audit.ts).
    const target = move.redo ? handler.target?.(request) : null;
    const interrupted = move.redo && target ? interruptedCallAudit(who, target, move.redo.stepId) : null;
    await this.commit({
      state: started,
      at: step.startedAt,
      requireRunning: true,
      insertStep: this.stepRow(move.nodeId, move.automation, step),
      ...(move.redo ? { interruptStep: move.redo.stepId } : {}),
      ...(interrupted ? { effect: (tx, at) => recordEngineAudit(tx, this.run, at, interrupted) } : {}),
    });
    let result: StepResult;
    let sent: CallOutcome['sent'];
    try {
      ({ result, sent } = await handler.call(request, this.services));
    } catch (error) {
      if (error instanceof CallAbandoned) {
        // Taken over mid-call (the new holder owns the step now), or paused or canceled before a
        // next try: write nothing, send nothing more. The run is let go at once (a no-op unless
        // still ours), so that a resume redoes the call instead of waiting out this lease.
        this.services.logger.info(
          { ...this.logFields(move.nodeId), automationId: move.automation.id, stepId: step.stepId },
          'stopped a call before its next try: the run was taken over by another worker, paused or canceled',
        );
        await releaseRun(this.services.db, this.lease, { availableAt: this.nowIso() });
        return 'done';
      }
      result = failureOutcome(error, request).result;
    }
    const finishedAt = this.nowIso();
    // The outcome is recorded even if the run was paused or canceled meanwhile: the call happened.
    // So is what it sent out, in the same transaction (engine-audit.ts).
    const recordOutcome = async (outcome: StepResult, limitState: boolean) => {
      const kept = withinOutputLimit(outcome, request, finishedAt);
      const disclosure = sent && httpSentAudit(who, sent, kept.result.outcome === 'ok');
      await this.commit({
        state: finishStep(started, move.nodeId, move.automation.id, kept.result, finishedAt),
        at: finishedAt,
        requireRunning: false,
        limitState,
        finishStep: { stepId: step.stepId, finish: kept.finish },
        ...(disclosure ? { effect: (tx, at) => recordEngineAudit(tx, this.run, at, disclosure) } : {}),
      });
    };
    try {
      await recordOutcome(result, true);
    } catch (error) {
      if (!(error instanceof RunStateTooLarge)) throw error;
      await recordOutcome(engineRefused(request, RUN_STATE_TOO_LARGE), false);
    }
    return 'continue';
  }

  private async wake(state: EngineState, move: Extract<Move, { kind: 'wake' }>, now: Date): Promise<Turn> {
    const handler = AUTOMATIONS[move.automation.type];
    if (handler.mode !== 'wait') throw new Error(`automation type ${move.automation.type} does not wait`);
    const request = this.request(state, move.nodeId, move.automation, now);
    const outcome = attempt(() => handler.wake(request, move.open, move.reason, move.received), request);
    return this.commitLocal(state, move, outcome, now.toISOString(), { ...move.open, recorded: true });
  }

  /**
   * A local step, or the end of a wait, in one write: the guard, the effect, the step record,
   * and the run's end when this step decides it (so a one-step run ends in one commit).
   */
  private async commitLocal(
    state: EngineState,
    move: { nodeId: string; automation: StepRequest['automation'] },
    decided: LocalOutcome,
    at: string,
    step: StepInHand,
    limitState = true,
  ): Promise<Turn> {
    const { result, finish } = withinOutputLimit(decided.result, move, at);
    // A step whose output is too large fails whole: its effect (tags) is not applied either.
    const outcome: LocalOutcome = result === decided.result ? decided : { result };
    const finished = { nodeId: move.nodeId, automationId: move.automation.id, result: outcome.result, at };
    // The node's links see what this step changes: a condition on subject.tags right after a tag step.
    const subject = outcome.subjectAfter ?? this.run.subject;
    const after = planAfterStep(this.graph, state, finished, (next) => linkCheck(this.expressions, { ...expressionContext(this.run, next), subject }));
    const ends = after.move.kind === 'end' ? after.move.end : null;
    try {
      await this.commitStep(after.state, ends, outcome, finish, move, at, step, limitState);
    } catch (error) {
      if (!(error instanceof RunStateTooLarge) || !limitState) throw error;
      // Nothing was written: the step is recorded failed instead, without its output or effect.
      return this.commitLocal(state, move, { result: engineRefused(move, RUN_STATE_TOO_LARGE) }, at, step, false);
    }
    if (outcome.subjectAfter) this.run.subject = outcome.subjectAfter;
    return ends ? 'done' : 'continue';
  }

  private async commitStep(
    state: EngineState,
    ends: RunEnd | null,
    outcome: LocalOutcome,
    finish: StepFinish,
    move: { nodeId: string; automation: StepRequest['automation'] },
    at: string,
    step: StepInHand,
    limitState: boolean,
  ): Promise<void> {
    await this.commit({
      state,
      at,
      requireRunning: true,
      limitState,
      end: ends ? endOf(ends) : undefined,
      effect: outcome.write,
      alone: outcome.alone,
      locksRecord: outcome.locksRecord,
      finishStep: step.recorded ? { stepId: step.stepId, finish } : undefined,
      insertStep: step.recorded ? undefined : this.stepRow(move.nodeId, move.automation, step, finish),
    });
  }

  /** Why a guarded write failed, and what to do: let go, stop, or look again. */
  private async afterGuardFailed(): Promise<Turn> {
    const row = await readRunLease(this.services.db, this.run.id);
    if (!this.isOurs(row)) return 'done';
    if (row.automation_status !== this.status) {
      // Paused or ended by the API: end the lease. A resumed run is due at once and goes on
      // from the last recorded step.
      await releaseRun(this.services.db, this.lease, { availableAt: this.nowIso() });
      return 'done';
    }
    return 'continue';
  }

  /** The step's row: open (a call or a wait starting), or with `finish`, whole. */
  private stepRow(nodeId: string, automation: StepRequest['automation'], step: StepInHand, finish?: StepFinish): RunStepTable {
    return {
      id: step.stepId,
      run_id: this.run.id,
      node_id: nodeId,
      automation_id: automation.id,
      automation_type: automation.type,
      attempt: step.attempt,
      started_at: step.startedAt,
      finished_at: finish ? finish.at : null,
      outcome: finish ? finish.outcome : null,
      output: finish ? finish.output : null,
      error: finish ? finish.error : null,
    };
  }

  private nowIso(): string {
    return this.services.clock.now().toISOString();
  }
}

function endOf(end: RunEnd): NonNullable<StepWrite['end']> {
  return { status: end.status, error: end.status === 'errored' ? { message: storableText(cutMessage(end.message)), nodeId: end.nodeId } : null };
}

/** A step that throws (bad settings, an expression failing at run time) errors the run at its node. */
function attempt(decide: () => LocalOutcome, request: StepRequest): LocalOutcome {
  try {
    return decide();
  } catch (error) {
    return failureOutcome(error, request);
  }
}

function failureOutcome(error: unknown, request: Pick<StepRequest, 'nodeId' | 'automation'>): LocalOutcome {
  const detail = error instanceof Error ? error.message : String(error);
  const message = error instanceof StepFailure ? detail : stepProblem(request, detail);
  return { result: { outcome: 'failed', output: null, end: { status: 'errored', nodeId: request.nodeId, message } } };
}

function stepProblem(request: Pick<StepRequest, 'automation'>, detail: string): string {
  return `${request.automation.type} automation "${request.automation.id}": ${detail}`;
}

/**
 * The step's result and its record, or, when its output is larger than a step may keep
 * (step-limits.ts), the step failed for that reason: the run errors at its node.
 */
function withinOutputLimit(result: StepResult, request: Pick<StepRequest, 'nodeId' | 'automation'>, at: string): { result: StepResult; finish: StepFinish } {
  const output = result.output === undefined ? 'null' : jsonWithin(result.output, MAX_STEP_OUTPUT_CHARS);
  if (output !== null) return { result, finish: stepFinish(result, output, at) };
  const failed = engineRefused(request, STEP_OUTPUT_TOO_LARGE);
  return { result: failed, finish: stepFinish(failed, 'null', at) };
}

/** The step failed because the engine will not keep what it made (step-limits.ts): the run errors at its node. */
function engineRefused(request: Pick<StepRequest, 'nodeId' | 'automation'>, why: string): StepResult {
  return failureOutcome(new StepFailure(stepProblem(request, why)), request).result;
}

function stepFinish(result: StepResult, output: string, at: string): StepFinish {
  return {
    at,
    outcome: result.outcome,
    output: result.output === undefined ? null : output,
    // A message may quote what others sent (a partner's answer, a filled `fail` message).
    error: result.end?.status === 'errored' ? storableText(cutMessage(result.end.message)) : null,
  };
}
